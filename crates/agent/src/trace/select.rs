//! Which classes and methods a plan selects, and which classes jtap refuses to touch.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use jtap_classfile::annotations;
use jtap_classfile::constant_pool::Constant;
use jtap_classfile::guard::Guard;
use jtap_classfile::plan::{MemberFilter, Pattern};
use jtap_classfile::ClassFile;
use jtap_protocol::trace::{Guarded, MethodPattern, Plan, PointKind};
use regex::Regex;

/// What a selected method is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A traced method (calltree: the entry method).
    Target,
    /// Calltree: a method timed inside an entry call.
    Inner,
    /// Calltree: a method called (directly or not) by the entry whose own call sites are
    /// timed, for trees deeper than one level.
    Host,
    /// Trace: a method probed inside, at the plan's call sites or points, not at its own
    /// entry and exit.
    Inside,
}

/// One compiled [`MethodPattern`].
struct Matcher {
    /// The class names, or with `annotated` the annotation types.
    class: Regex,
    subtypes: bool,
    annotated: bool,
    /// The method names, or with `method_annotated` the annotation types.
    method: Option<Regex>,
    method_annotated: bool,
    descriptor: Option<String>,
    role: Role,
    /// The pattern as the user wrote it.
    text: String,
    /// `+` patterns: dotted names of the classes and interfaces known to be subtypes; `@`
    /// patterns: of the classes annotated (or, before their bytes are read, that may be).
    known: Mutex<HashSet<String>>,
    /// `::@` patterns: the methods annotated, as `pkg.Class.name(descriptor)`.
    annotated_methods: Mutex<HashSet<String>>,
    /// [`Role::Inside`]: where.
    inside: Option<Inside>,
    /// [`Role::Target`] and entry points: the condition its calls' arguments must meet.
    guard: Option<Guard>,
}

/// Where a [`Role::Inside`] method is probed.
enum Inside {
    /// At its calls to these methods.
    Calls(Callee),
    /// At these points.
    Points(PointKind),
    /// At its reads (or writes) of these fields.
    Fields(Fields),
}

/// The fields of a plan's field sites, and whether their writes (or reads) are traced.
struct Fields {
    class: Regex,
    name: Regex,
    write: bool,
}

/// How many supertypes up a `+` callee's owner is looked for.
const MAX_SUPERTYPE_DEPTH: u32 = 64;

/// The called methods of a plan's call sites.
struct Callee {
    /// The owner classes, or with `subtypes` their supertypes.
    class: Regex,
    subtypes: bool,
    /// `subtypes`: the dotted names of the loaded classes found to extend or implement one.
    known: Mutex<HashSet<String>>,
    method: Option<Regex>,
    descriptor: Option<String>,
}

impl Callee {
    /// Whether a call site naming `owner` (internal name), `name` and `descriptor` calls one;
    /// `supers` are the direct supertypes of the classes loaded during the session.
    fn matches(&self, supers: &Supertypes, owner: &str, name: &str, descriptor: &str) -> bool {
        self.method.as_ref().is_none_or(|re| re.is_match(name))
            && self.descriptor.as_deref().is_none_or(|d| d == descriptor)
            && self.owner_matches(supers, &dotted(owner), 0)
    }

    fn owner_matches(&self, supers: &Supertypes, owner: &str, depth: u32) -> bool {
        if self.class.is_match(owner) {
            return true;
        }
        if !self.subtypes || depth > MAX_SUPERTYPE_DEPTH {
            return false;
        }
        lock(&self.known).contains(owner)
            || supers.get(owner).is_some_and(|direct| {
                direct
                    .iter()
                    .any(|s| self.owner_matches(supers, s, depth + 1))
            })
    }
}

/// Dotted class names and their direct superclass and interfaces.
type Supertypes = HashMap<String, Vec<String>>;

impl Matcher {
    fn new(pattern: &MethodPattern, role: Role) -> Result<Matcher, String> {
        let compile = |re: String| Regex::new(&re).map_err(|e| format!("pattern {pattern}: {e}"));
        Ok(Matcher {
            class: compile(pattern.class.to_regex())?,
            subtypes: pattern.subtypes,
            annotated: pattern.annotated,
            method: pattern
                .method
                .as_ref()
                .map(|m| compile(m.to_regex()))
                .transpose()?,
            method_annotated: pattern.method_annotated,
            descriptor: pattern.descriptor.clone(),
            role,
            text: pattern.to_string(),
            known: Mutex::new(HashSet::new()),
            annotated_methods: Mutex::new(HashSet::new()),
            inside: None,
            guard: None,
        })
    }

    fn method_matches(&self, dotted: &str, supers: &[String], name: &str, desc: &str) -> bool {
        let method = match &self.method {
            None => true,
            Some(_) if self.method_annotated => {
                lock(&self.annotated_methods).contains(&format!("{dotted}.{name}{desc}"))
            }
            Some(re) => re.is_match(name),
        };
        method
            && self.descriptor.as_deref().is_none_or(|d| d == desc)
            && self.selects_class(dotted, supers)
    }

    /// Whether the class is selected; `supers` are its direct superclass and interfaces.
    fn selects_class(&self, dotted: &str, supers: &[String]) -> bool {
        if self.annotated {
            return lock(&self.known).contains(dotted);
        }
        if self.class.is_match(dotted) {
            return true;
        }
        if !self.subtypes {
            return false;
        }
        let mut known = lock(&self.known);
        if known.contains(dotted) {
            return true;
        }
        if supers
            .iter()
            .any(|s| known.contains(s) || self.class.is_match(s))
        {
            known.insert(dotted.to_string());
            return true;
        }
        false
    }
}

/// The compiled patterns of a plan.
pub struct Selector {
    matchers: Vec<Matcher>,
    /// With `+` callees: the direct supertypes of every class the hook has seen.
    supers: Option<Mutex<Supertypes>>,
}

impl Selector {
    /// Compiles the plan's patterns.
    pub fn new(plan: &Plan) -> Result<Selector, String> {
        let mut matchers = Vec::new();
        // Several guards on one pattern: any of them.
        let guard_of = |guarded: Guarded| {
            any_of(
                plan.guards
                    .iter()
                    .filter(|(g, _)| *g == guarded)
                    .map(|(_, guard)| guard.clone())
                    .collect(),
            )
        };
        for (index, p) in plan.targets.iter().enumerate() {
            let mut target = Matcher::new(p, Role::Target)?;
            target.guard = guard_of(Guarded::Target(index));
            matchers.push(target);
        }
        for p in &plan.inner {
            matchers.push(Matcher::new(p, Role::Inner)?);
        }
        for sites in &plan.call_sites {
            let callee = Matcher::new(&sites.callee, Role::Inside)?;
            let mut caller = Matcher::new(&sites.host, Role::Inside)?;
            caller.inside = Some(Inside::Calls(Callee {
                class: callee.class,
                subtypes: callee.subtypes,
                known: Mutex::new(HashSet::new()),
                method: callee.method,
                descriptor: callee.descriptor,
            }));
            matchers.push(caller);
        }
        for sites in &plan.field_sites {
            let field = Matcher::new(&sites.field, Role::Inside)?;
            let mut host = Matcher::new(&sites.host, Role::Inside)?;
            host.inside = Some(Inside::Fields(Fields {
                class: field.class,
                name: field.method.ok_or("a field site names no field")?,
                write: sites.write,
            }));
            matchers.push(host);
        }
        for (index, (kind, pattern)) in plan.points.iter().enumerate() {
            let mut matcher = Matcher::new(pattern, Role::Inside)?;
            matcher.inside = Some(Inside::Points(*kind));
            matcher.guard = guard_of(Guarded::Point(index));
            matchers.push(matcher);
        }
        let supers = plan
            .call_sites
            .iter()
            .any(|sites| sites.callee.subtypes)
            .then(|| Mutex::new(HashMap::new()));
        Ok(Selector { matchers, supers })
    }

    /// Whether some pattern may select methods of the class.
    pub fn selects_class(&self, dotted: &str, supers: &[String]) -> bool {
        self.matchers
            .iter()
            .any(|m| m.selects_class(dotted, supers))
    }

    /// The target patterns that select none of these classes (dotted names).
    pub fn targets_matching_none(&self, classes: &[String]) -> Vec<String> {
        self.matchers
            .iter()
            .filter(|m| matches!(m.role, Role::Target | Role::Inside))
            .filter(|m| !classes.iter().any(|c| m.selects_class(c, &[])))
            .map(|m| m.text.clone())
            .collect()
    }

    /// Whether a `+` pattern names this class itself (it is a base of subtype matching).
    pub fn is_subtype_base(&self, dotted: &str) -> Vec<usize> {
        self.matchers
            .iter()
            .enumerate()
            .filter(|(_, m)| m.subtypes && m.class.is_match(dotted))
            .map(|(i, _)| i)
            .collect()
    }

    /// Records that `dotted` extends or implements a base of pattern `index`.
    pub fn add_subtype(&self, index: usize, dotted: &str) {
        if let Some(m) = self.matchers.get(index) {
            lock(&m.known).insert(dotted.to_string());
        }
    }

    /// The `+` callees whose base `dotted` is, as indexes for [`Selector::add_callee_subtype`].
    pub fn callee_bases(&self, dotted: &str) -> Vec<usize> {
        (self.matchers.iter().enumerate())
            .filter(|(_, m)| match &m.inside {
                Some(Inside::Calls(callee)) => callee.subtypes && callee.class.is_match(dotted),
                _ => false,
            })
            .map(|(i, _)| i)
            .collect()
    }

    /// Records that loaded class `dotted` extends or implements a base of `+` callee `index`.
    pub fn add_callee_subtype(&self, index: usize, dotted: &str) {
        if let Some(Some(Inside::Calls(callee))) = self.matchers.get(index).map(|m| &m.inside) {
            lock(&callee.known).insert(dotted.to_string());
        }
    }

    /// Whether some pattern selects classes by their annotations.
    pub fn by_class_annotation(&self) -> bool {
        self.matchers.iter().any(|m| m.annotated)
    }

    /// Takes loaded class `dotted` for annotated as `@` patterns want it when its constant
    /// pool spells their annotation types (`types`, from
    /// [`annotations::descriptor_types`]), until its bytes say ([`Selector::learn`]).
    pub fn may_be_annotated(&self, dotted: &str, types: &[String]) {
        for m in self.matchers.iter().filter(|m| m.annotated) {
            if types.iter().any(|t| m.class.is_match(t)) {
                lock(&m.known).insert(dotted.to_string());
            }
        }
    }

    /// Learns what the patterns need of class `cf` (`dotted`, with its direct supertypes
    /// `supers`) as the hook sees it: the run-time visible annotations of the class and its
    /// methods for `@` and `::@` patterns, its supertypes for `+` callees.
    pub fn learn(&self, cf: &ClassFile, dotted: &str, supers: &[String]) {
        if let Some(known) = &self.supers {
            lock(known).insert(dotted.to_string(), supers.to_vec());
        }
        let pool = &cf.constant_pool;
        let of = |attributes| annotations::visible(pool, attributes).unwrap_or_default();
        if self.by_class_annotation() {
            let types = of(&cf.attributes);
            for m in self.matchers.iter().filter(|m| m.annotated) {
                set(&m.known, dotted, types.iter().any(|t| m.class.is_match(t)));
            }
        }
        let by_method: Vec<(&Matcher, &Regex)> = self
            .matchers
            .iter()
            .filter(|m| m.method_annotated)
            .filter_map(|m| Some((m, m.method.as_ref()?)))
            .collect();
        if by_method.is_empty() {
            return;
        }
        for method in &cf.methods {
            let (Ok(name), Ok(desc)) = (
                pool.utf8_str(method.name_index),
                pool.utf8_str(method.descriptor_index),
            ) else {
                continue;
            };
            let types = of(&method.attributes);
            let key = format!("{dotted}.{name}{desc}");
            for (m, re) in &by_method {
                set(
                    &m.annotated_methods,
                    &key,
                    types.iter().any(|t| re.is_match(t)),
                );
            }
        }
    }

    /// The role of a method, if a pattern selects it (targets win over inner methods).
    pub fn method_role(
        &self,
        dotted: &str,
        supers: &[String],
        name: &str,
        descriptor: &str,
    ) -> Option<Role> {
        let mut role = None;
        for m in self.matchers.iter().filter(|m| m.role != Role::Inside) {
            if m.method_matches(dotted, supers, name, descriptor) {
                if m.role == Role::Target {
                    return Some(Role::Target);
                }
                role = Some(m.role);
            }
        }
        role
    }

    /// The condition on a method's arguments under which its calls are traced (`entry`
    /// false) or its entries reported (`entry` true): any of the guards of the targets (the
    /// entry points) selecting it; None when one of those has none.
    pub fn guard(
        &self,
        dotted: &str,
        supers: &[String],
        name: &str,
        descriptor: &str,
        entry: bool,
    ) -> Option<Guard> {
        let mut guards = Vec::new();
        let selecting = self.matchers.iter().filter(|m| match entry {
            false => m.role == Role::Target,
            true => matches!(m.inside, Some(Inside::Points(PointKind::Entry))),
        });
        for m in selecting {
            if m.method_matches(dotted, supers, name, descriptor) {
                guards.push(m.guard.clone()?);
            }
        }
        any_of(guards)
    }

    /// The calls of a [`Role::Inside`] method to trace, as a filter of the call sites of
    /// class `class` (one filter for all the plan's callees of the method: it may take a
    /// few calls more than they do, never fewer). None when the method is no caller or
    /// calls none of its callees.
    pub fn callee_filter(
        &self,
        class: &ClassFile,
        dotted: &str,
        supers: &[String],
        name: &str,
        descriptor: &str,
    ) -> Option<MemberFilter> {
        let callees: Vec<&Callee> = self
            .inside(dotted, supers, name, descriptor)
            .filter_map(|inside| match inside {
                Inside::Calls(callee) => Some(callee),
                _ => None,
            })
            .collect();
        if callees.is_empty() {
            return None;
        }
        let none = HashMap::new();
        let supers = self.supers.as_ref().map(lock);
        let supers = supers.as_deref().unwrap_or(&none);
        members_filter(
            method_refs(class)
                .into_iter()
                .filter(|(owner, method, desc)| {
                    callees
                        .iter()
                        .any(|c| c.matches(supers, owner, method, desc))
                })
                .map(|(owner, method, _)| (owner, method)),
        )
    }

    /// The field accesses of a [`Role::Inside`] method to trace, as filters of the fields class
    /// `class` refers to: reads, then writes. None where the method accesses none.
    pub fn field_filters(
        &self,
        class: &ClassFile,
        dotted: &str,
        supers: &[String],
        name: &str,
        descriptor: &str,
    ) -> [Option<MemberFilter>; 2] {
        let fields: Vec<&Fields> = self
            .inside(dotted, supers, name, descriptor)
            .filter_map(|inside| match inside {
                Inside::Fields(fields) => Some(fields),
                _ => None,
            })
            .collect();
        if fields.is_empty() {
            return [None, None];
        }
        let refs = field_refs(class);
        [false, true].map(|write| {
            let wanted = |(owner, field): &&(String, String)| {
                fields.iter().any(|f| {
                    f.write == write
                        && f.class.is_match(&self::dotted(owner))
                        && f.name.is_match(field)
                })
            };
            members_filter(refs.iter().filter(wanted).cloned())
        })
    }

    /// Where the [`Role::Inside`] patterns that select a method probe it.
    fn inside<'a>(
        &'a self,
        dotted: &'a str,
        supers: &'a [String],
        name: &'a str,
        descriptor: &'a str,
    ) -> impl Iterator<Item = &'a Inside> {
        self.matchers
            .iter()
            .filter(move |m| m.method_matches(dotted, supers, name, descriptor))
            .filter_map(|m| m.inside.as_ref())
    }

    /// The points at which the plan probes a method (each kind once).
    pub fn points(
        &self,
        dotted: &str,
        supers: &[String],
        name: &str,
        descriptor: &str,
    ) -> Vec<PointKind> {
        let mut kinds = Vec::new();
        for inside in self.inside(dotted, supers, name, descriptor) {
            if let Inside::Points(kind) = *inside {
                if !kinds.contains(&kind) {
                    kinds.push(kind);
                }
            }
        }
        kinds
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// Puts `key` in `set` or takes it out.
fn set(set: &Mutex<HashSet<String>>, key: &str, member: bool) {
    let mut set = lock(set);
    match member {
        true => set.insert(key.to_string()),
        false => set.remove(key),
    };
}

/// A guard holding when any of `guards` does; None for none.
fn any_of(mut guards: Vec<Guard>) -> Option<Guard> {
    match guards.len() {
        0 => None,
        1 => guards.pop(),
        _ => Some(Guard::Any(guards)),
    }
}

/// A filter of the members named by `members` (owner as an internal name, name): any of the
/// owners with any of the names (which may take a few members more, never fewer); None for
/// no members.
fn members_filter(members: impl Iterator<Item = (String, String)>) -> Option<MemberFilter> {
    let (mut owners, mut names) = (Vec::new(), Vec::new());
    for (owner, name) in members {
        if !owners.contains(&owner) {
            owners.push(owner);
        }
        if !names.contains(&name) {
            names.push(name);
        }
    }
    (!owners.is_empty()).then_some(MemberFilter {
        owner: Pattern::OneOf(owners),
        name: Pattern::OneOf(names),
        descriptor: Pattern::Any,
    })
}

/// The fields a class refers to (owner as an internal name, name): those its code can read
/// and write.
fn field_refs(class: &ClassFile) -> Vec<(String, String)> {
    let pool = &class.constant_pool;
    (1..pool.count())
        .filter(|&i| matches!(pool.get(i), Ok(Constant::Fieldref(..))))
        .filter_map(|i| pool.member_ref(i).ok())
        .map(|r| {
            let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
            (text(r.owner), text(r.name))
        })
        .collect()
}

/// The methods a class refers to (owner as an internal name, name, descriptor): those its
/// code can call.
fn method_refs(class: &ClassFile) -> Vec<(String, String, String)> {
    let pool = &class.constant_pool;
    (1..pool.count())
        .filter(|&i| {
            matches!(
                pool.get(i),
                Ok(Constant::Methodref(..) | Constant::InterfaceMethodref(..))
            )
        })
        .filter_map(|i| pool.member_ref(i).ok())
        .map(|r| {
            let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
            (text(r.owner), text(r.name), text(r.descriptor))
        })
        .collect()
}

/// Why jtap never instruments a class (internal name), if it does not. The list is kept to
/// what is unsafe, as BTrace's is: classes the probes themselves run (boxing, strings, class
/// and thread-local machinery, method handles, references, reflection, stack walking), the
/// JVM's own packages, and generated classes. Other `java.lang` classes (`Thread`,
/// `Throwable`, `ClassLoader`, `Runtime`, ...) can be traced: a probe re-entered on its own
/// thread (an exception created inside a probe) returns at once.
pub fn refusal(internal: &str) -> Option<&'static str> {
    const PREFIXES: [(&str, &str); 10] = [
        ("java/lang/invoke/", "method handles and lambdas run the JVM's own machinery and cannot be instrumented safely"),
        ("java/lang/ref/", "reference handling runs the JVM's own machinery and cannot be instrumented safely"),
        ("java/lang/reflect/", "reflection runs the probes' own machinery and cannot be instrumented safely"),
        ("java/lang/ThreadLocal", "thread-locals run the probes' own machinery and cannot be instrumented safely"),
        ("jdk/internal/", "jdk.internal classes run the JVM's own machinery and cannot be instrumented safely"),
        ("sun/", "sun.* classes run the JVM's own machinery and cannot be instrumented safely"),
        ("jdk/jfr/", "JFR classes cannot be instrumented safely"),
        ("jtap/", "jtap's own runtime class is never instrumented"),
        ("com/sun/proxy/", "dynamic proxies are generated classes"),
        ("java/util/concurrent/locks/", "lock classes the probes' own machinery may use cannot be instrumented safely"),
    ];
    /// Single `java.lang` classes the probes, boxing and class loading themselves run, and
    /// the module system's read edges, which the JVM updates (`Modules.transformedByAgent`)
    /// when it accepts a transformed class: a transformed `WeakPairMap` loaded while
    /// `Module$ReflectionData` initialises re-enters that update and the JVM recurses until
    /// its stack overflows.
    const CLASSES: [&str; 23] = [
        "java/lang/Object",
        "java/lang/Class",
        "java/lang/ClassValue",
        "java/lang/String",
        "java/lang/StringLatin1",
        "java/lang/StringUTF16",
        "java/lang/StringCoding",
        "java/lang/AbstractStringBuilder",
        "java/lang/StringBuilder",
        "java/lang/System",
        "java/lang/Module",
        "java/lang/WeakPairMap",
        "java/lang/StackTraceElement",
        "java/lang/StackWalker",
        "java/lang/StackStreamFactory",
        "java/lang/Boolean",
        "java/lang/Byte",
        "java/lang/Character",
        "java/lang/Short",
        "java/lang/Integer",
        "java/lang/Long",
        "java/lang/Float",
        "java/lang/Double",
    ];
    if let Some((_, why)) = PREFIXES
        .iter()
        .find(|(prefix, _)| internal.starts_with(prefix))
    {
        return Some(why);
    }
    // The class or one of its nested classes (`java/lang/Integer$IntegerCache`).
    let outer = internal.split('$').next().unwrap_or(internal);
    if CLASSES.contains(&outer) {
        return Some("core java.lang classes the probes themselves run (Object, Class, String, boxing, System, stack walking, module reads) cannot be instrumented safely");
    }
    if is_hidden_name(internal) {
        return Some("hidden classes (lambdas, method handle forms) cannot be retransformed");
    }
    None
}

/// Whether `internal` is a name the JVM gives a hidden (JDK 15+) or VM-anonymous (JDK 11–14)
/// class: the name it was defined with, `/`, and its address (`a/B$$Lambda/0x0000…`,
/// `a/B$$Lambda$14/0x0000…`, `java/lang/invoke/LambdaForm$MH/0x…`). The JVM cannot
/// retransform those, and a broad pattern meets many (counted, not named). This is only for
/// names the class-file hook is handed (it is not called for hidden classes, but a name alone
/// is all it has); a loaded class is asked (`IsModifiableClass`). Names such as Scala's
/// `Typers$Typer$$anonfun$65` or CGLIB's `Foo$$EnhancerByCGLIB$$1` are ordinary classes.
pub fn is_hidden_name(internal: &str) -> bool {
    internal
        .rsplit_once('/')
        .is_some_and(|(_, last)| last.starts_with("0x"))
        || internal
            .split_once("$$Lambda")
            .is_some_and(|(_, rest)| rest.contains('/'))
}

/// `java/util/Map$Entry` as `java.util.Map$Entry`.
pub fn dotted(internal: &str) -> String {
    internal.replace('/', ".")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(targets: &[&str], inner: &[&str]) -> Plan {
        Plan {
            targets: targets
                .iter()
                .map(|t| MethodPattern::parse(t).unwrap())
                .collect(),
            inner: inner
                .iter()
                .map(|t| MethodPattern::parse(t).unwrap())
                .collect(),
            ..Plan::default()
        }
    }

    #[test]
    fn methods_by_class_name_glob_regex_and_descriptor() {
        let s = Selector::new(&plan(
            &["a.b.*Service::handle*", "/x\\.Y/::/get.+/", "p.Q::m(I)V"],
            &["p.Q::inner"],
        ))
        .unwrap();
        assert_eq!(
            s.method_role("a.b.OrderService", &[], "handleIt", "()V"),
            Some(Role::Target)
        );
        assert_eq!(s.method_role("a.b.OrderService", &[], "other", "()V"), None);
        assert_eq!(s.method_role("x.Y", &[], "getA", "()I"), Some(Role::Target));
        assert_eq!(s.method_role("x.Y", &[], "get", "()I"), None);
        assert_eq!(s.method_role("p.Q", &[], "m", "(I)V"), Some(Role::Target));
        assert_eq!(s.method_role("p.Q", &[], "m", "(J)V"), None);
        assert_eq!(s.method_role("p.Q", &[], "inner", "()V"), Some(Role::Inner));
        assert!(!s.selects_class("p.R", &[]));
    }

    #[test]
    fn subtypes_follow_known_supertypes() {
        let s = Selector::new(&plan(&["+a.Shape::area"], &[])).unwrap();
        assert_eq!(
            s.method_role("a.Circle", &["a.Shape".into()], "area", "()D"),
            Some(Role::Target)
        );
        // A subclass of a known subtype, seen later.
        assert_eq!(
            s.method_role("a.Small", &["a.Circle".into()], "area", "()D"),
            Some(Role::Target)
        );
        assert_eq!(
            s.method_role("b.Other", &["java.lang.Object".into()], "area", "()D"),
            None
        );
        assert_eq!(s.is_subtype_base("a.Shape"), vec![0]);
        s.add_subtype(0, "c.Loaded");
        assert!(s.selects_class("c.Loaded", &[]));
    }

    #[test]
    fn annotated_classes_are_those_the_bytes_or_pools_name() {
        let s = Selector::new(&plan(&["@a.Endpoint::@/a\\.Handler/"], &[])).unwrap();
        assert!(s.by_class_annotation());
        assert!(!s.selects_class("a.Orders", &[]));
        s.may_be_annotated("a.Orders", &["a.Endpoint".into()]);
        s.may_be_annotated("a.Other", &["a.Handler".into()]);
        assert!(s.selects_class("a.Orders", &[]));
        assert!(!s.selects_class("a.Other", &[]));
        // The method's annotations are known only once its bytes were read.
        assert_eq!(s.method_role("a.Orders", &[], "place", "(I)I"), None);
        assert_eq!(
            s.targets_matching_none(&["a.Orders".into()]),
            [] as [String; 0]
        );
    }

    #[test]
    fn plus_callees_follow_loaded_and_learned_supertypes() {
        let plan = Plan {
            call_sites: vec![jtap_protocol::trace::CallSites {
                host: MethodPattern::parse("a.B::run").unwrap(),
                callee: MethodPattern::parse("+java.util.Map::put").unwrap(),
            }],
            ..Plan::default()
        };
        let s = Selector::new(&plan).unwrap();
        assert_eq!(s.callee_bases("java.util.Map"), [0]);
        assert!(s.callee_bases("java.util.HashMap").is_empty());
        s.add_callee_subtype(0, "java.util.HashMap");
        let Some(Inside::Calls(callee)) = &s.matchers[0].inside else {
            panic!("no callee");
        };
        // Classes loaded during the session, by their direct supertypes.
        let supers: Supertypes = [
            ("a.Ledger", "java.util.HashMap"),
            ("a.Sub", "a.Ledger"),
            ("a.Registry", "java.lang.Object"),
        ]
        .into_iter()
        .map(|(class, sup)| (class.to_string(), vec![sup.to_string()]))
        .collect();
        for (owner, taken) in [
            ("java/util/Map", true),
            ("java/util/HashMap", true),
            ("a/Sub", true),
            ("a/Registry", false),
            ("a/NotLoaded", false),
        ] {
            let put = "(Ljava/lang/Object;Ljava/lang/Object;)Ljava/lang/Object;";
            assert_eq!(callee.matches(&supers, owner, "put", put), taken, "{owner}");
        }
        assert!(!callee.matches(&supers, "java/util/HashMap", "get", "()V"));
    }

    #[test]
    fn patterns_selecting_no_class_are_named() {
        let s = Selector::new(&plan(&["a.B::run", "c.*", "+d.E"], &["x.Y"])).unwrap();
        let loaded = ["a.B".to_string(), "d.E".to_string()];
        assert_eq!(s.targets_matching_none(&loaded), vec!["c.*".to_string()]);
    }

    #[test]
    fn core_and_generated_classes_are_refused() {
        for name in [
            "java/lang/String",
            "java/lang/Integer$IntegerCache",
            "java/lang/Module$ReflectionData",
            "java/lang/WeakPairMap$Pair$Weak",
            "java/lang/invoke/MethodHandle",
            "jdk/internal/misc/Unsafe",
            "jtap/runtime/Probes",
            "a/B$$Lambda$12/0x0000000800066840",
            "a/B$$Lambda/0x0000000800c01234",
            "a/B$$Lambda$3/1523554304",
        ] {
            assert!(refusal(name).is_some(), "{name}");
        }
        assert!(is_hidden_name("a/B$$Lambda$12/0x0000000800066840"));
        assert!(is_hidden_name(
            "java/lang/invoke/LambdaForm$MH/0x0000000800c0d000"
        ));
        assert!(!is_hidden_name("java/lang/String"));
        for name in [
            "java/util/HashMap",
            "com/example/Foo$Inner",
            // Ordinary classes of other languages and of bytecode generators.
            "scala/tools/nsc/typechecker/Typers$Typer$$anonfun$65",
            "scala/tools/nsc/Global$Run$$anonfun$compileUnits$1",
            "groovy/lang/MetaClassImpl$$Lambda",
            "com/acme/Service$$EnhancerByCGLIB$$1a2b3c",
            "com/acme/Order$HibernateProxy$0xdead",
            "workloads/Traced",
            "java/lang/Thread",
            "java/lang/Throwable",
            "java/lang/ClassLoader",
        ] {
            assert!(refusal(name).is_none(), "{name}");
        }
    }
}
