//! The plan-driven API: which probes go where, and the ids handed to them.

use std::collections::HashMap;

use crate::guard::Guard;

/// A name pattern.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum Pattern {
    /// Matches everything.
    #[default]
    Any,
    /// Matches exactly this text.
    Exact(String),
    /// Matches text starting with this prefix.
    Prefix(String),
    /// Matches any of these texts exactly.
    OneOf(Vec<String>),
}

impl Pattern {
    /// Whether `text` matches.
    pub fn matches(&self, text: &str) -> bool {
        match self {
            Pattern::Any => true,
            Pattern::Exact(s) => s == text,
            Pattern::Prefix(p) => text.starts_with(p.as_str()),
            Pattern::OneOf(texts) => texts.iter().any(|t| t == text),
        }
    }
}

/// Selects methods (or, for call sites and fields, the referenced member).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct MemberFilter {
    /// Internal name of the declaring/owner class (`java/util/HashMap`).
    pub owner: Pattern,
    /// Member name.
    pub name: Pattern,
    /// Member descriptor.
    pub descriptor: Pattern,
}

impl MemberFilter {
    /// Matches every member.
    pub fn any() -> Self {
        MemberFilter::default()
    }

    /// Whether the member matches.
    pub fn matches(&self, owner: &str, name: &str, descriptor: &str) -> bool {
        self.owner.matches(owner) && self.name.matches(name) && self.descriptor.matches(descriptor)
    }
}

/// Where in a method a probe is called.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Point {
    /// Once at method entry.
    Entry,
    /// Before every return instruction.
    Return,
    /// When an exception leaves the method (catch-all handler that rethrows; in constructors
    /// only after the super/this constructor call).
    ExceptionExit,
    /// Before calls whose owner/name/descriptor match.
    BeforeCall(MemberFilter),
    /// After calls that match, on normal return and (with the exception) when they throw.
    AfterCall(MemberFilter),
    /// After `new … <init>`, `newarray`, `anewarray`, `multianewarray`.
    Allocation,
    /// Before `monitorenter`.
    MonitorEnter,
    /// Before `monitorexit`.
    MonitorExit,
    /// After reads of matching fields.
    FieldRead(MemberFilter),
    /// Before writes of matching fields.
    FieldWrite(MemberFilter),
    /// At the first instruction of each source line (from the LineNumberTable); of these
    /// lines only, when any are given.
    Line(Vec<u32>),
    /// At each instruction of a kind (array accesses, throws, catches, type checks).
    Instruction(InsnKind),
}

/// The instructions a [`Point::Instruction`] probes, and what its probes' [`Value::Target`]
/// and [`Value::CallArgs`] are there (the operands the instruction takes, as they were
/// before it). Each site's detail names the type involved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InsnKind {
    /// After each array load: the array, the index; [`Value::ReturnValue`] the element.
    /// Detail: the element type (`int`, `java.lang.Object` for any reference).
    ArrayLoad,
    /// Before each array store: the array, then the index and the value. Detail: as loads.
    ArrayStore,
    /// Before each `athrow`: the exception.
    Throw,
    /// At the start of each handler of a typed `catch`: the exception caught. Detail: the
    /// type caught.
    Catch,
    /// Before each `checkcast`: the object. Detail: the type cast to.
    CheckCast,
    /// Before each `instanceof`: the object. Detail: the type tested.
    InstanceOf,
}

/// A value passed to the probe method, in parameter order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Value {
    /// `int`: the method id from the [`Registry`].
    MethodId,
    /// `int`: the site id (call site, allocation, monitor, field access, line, return); -1 where
    /// the point has no site.
    SiteId,
    /// `int`: the source line (line probes), else -1.
    LineNumber,
    /// `Object`: `this`, or null in static methods and before a constructor's super call.
    This,
    /// `Object[]`: the arguments, boxed (at entry; at other points when still provably intact,
    /// else null).
    Args,
    /// `Object`: the value about to be returned (or returned by the call), boxed; null for void.
    ReturnValue,
    /// `Throwable`: the exception leaving the method or the call; null otherwise.
    Thrown,
    /// `Object`: the allocated object or array.
    NewObject,
    /// `Object`: the monitor object.
    Lock,
    /// `Object`: the field value read or about to be written, boxed.
    FieldValue,
    /// `long`: the plan's [`InjectionPlan::clock`] as read at method entry (kept in a local
    /// of its own for the whole method).
    Mark,
    /// `Object`: at call points, the called method's receiver (null for static calls and
    /// calls of constructors); at field points, the object whose field is read or written
    /// (null for static fields); at instruction points, see [`InsnKind`]; null at other
    /// points.
    Target,
    /// `Object[]`: at call points, the called method's arguments, boxed (as they were before
    /// the call, also after it); at instruction points, see [`InsnKind`]; null at other
    /// points and on a call's exception path.
    CallArgs,
}

impl Value {
    /// Descriptor of the probe parameter.
    pub fn descriptor(self) -> &'static str {
        match self {
            Value::MethodId | Value::SiteId | Value::LineNumber => "I",
            Value::Mark => "J",
            Value::Args | Value::CallArgs => "[Ljava/lang/Object;",
            Value::Thrown => "Ljava/lang/Throwable;",
            _ => "Ljava/lang/Object;",
        }
    }

    /// Operand stack slots the value takes.
    pub fn slots(self) -> i32 {
        if self == Value::Mark {
            2
        } else {
            1
        }
    }
}

/// One probe: for matching methods, at `point`, call `runtime_class.method(values…)V`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Probe {
    /// Methods to instrument.
    pub methods: MemberFilter,
    /// Where to call the probe.
    pub point: Point,
    /// Name of the static probe method in the plan's runtime class.
    pub method: String,
    /// Values to pass, in parameter order.
    pub values: Vec<Value>,
}

impl Probe {
    /// Descriptor of the probe method, derived from the values.
    pub fn descriptor(&self) -> String {
        let mut d = String::from("(");
        for v in &self.values {
            d.push_str(v.descriptor());
        }
        d.push_str(")V");
        d
    }
}

/// A set of probes and the class that implements them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InjectionPlan {
    /// Internal name of the class holding the static probe methods (e.g. `jtap/runtime/Probes`);
    /// it is never instrumented itself.
    pub runtime_class: String,
    /// The probes.
    pub probes: Vec<Probe>,
    /// What methods with a probe taking [`Value::Mark`] read once at entry and keep in a
    /// local of their own: the exit probes then know when the call started, whatever ran on
    /// the thread in between (a virtual thread may even have moved to another carrier).
    pub clock: Option<Clock>,
    /// Conditions on the arguments of the methods they select (the first that selects a
    /// method applies): evaluated at entry, a false one leaves every probe of that call out.
    pub guards: Vec<(MemberFilter, Guard)>,
}

/// Where a method's entry reads its [`Value::Mark`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Clock {
    /// A `static long` field of the runtime class, e.g. a clock advanced by another thread:
    /// the entry costs a field read and no call.
    Field(String),
    /// A `static long name()` method of the runtime class, e.g. a native reading the exact
    /// clock.
    Method(String),
}

impl InjectionPlan {
    /// A plan calling every kind of probe on every method: `entry(I,Object,Object[])`,
    /// `exit(I,Object)`, `thrown(I,Throwable)`, `leave(J,I)` and `leaveThrown(J,I,Throwable)`
    /// with the entry's reading of `static long clock`, `beforeCall(I,I)`,
    /// `afterCall(I,I,Object,Throwable)`, `alloc(I,I,Object)`, `monitor(I,I,Object)`,
    /// `field(I,I,Object)`, `line(I,I)`.
    pub fn everything(runtime_class: &str) -> Self {
        use Value::*;
        let p = |point, method: &str, values: Vec<Value>| Probe {
            methods: MemberFilter::any(),
            point,
            method: method.into(),
            values,
        };
        InjectionPlan {
            runtime_class: runtime_class.into(),
            clock: Some(Clock::Field("clock".into())),
            guards: Vec::new(),
            probes: vec![
                p(Point::Entry, "entry", vec![MethodId, This, Args]),
                p(Point::Return, "exit", vec![MethodId, ReturnValue]),
                p(Point::ExceptionExit, "thrown", vec![MethodId, Thrown]),
                p(Point::Return, "leave", vec![Mark, MethodId]),
                p(
                    Point::ExceptionExit,
                    "leaveThrown",
                    vec![Mark, MethodId, Thrown],
                ),
                p(
                    Point::BeforeCall(MemberFilter::any()),
                    "beforeCall",
                    vec![MethodId, SiteId],
                ),
                p(
                    Point::AfterCall(MemberFilter::any()),
                    "afterCall",
                    vec![MethodId, SiteId, ReturnValue, Thrown],
                ),
                p(
                    Point::Allocation,
                    "alloc",
                    vec![MethodId, SiteId, NewObject],
                ),
                p(Point::MonitorEnter, "monitor", vec![MethodId, SiteId, Lock]),
                p(Point::MonitorExit, "monitor", vec![MethodId, SiteId, Lock]),
                p(
                    Point::FieldRead(MemberFilter::any()),
                    "field",
                    vec![MethodId, SiteId, FieldValue],
                ),
                p(
                    Point::FieldWrite(MemberFilter::any()),
                    "field",
                    vec![MethodId, SiteId, FieldValue],
                ),
                p(Point::Line(Vec::new()), "line", vec![MethodId, LineNumber]),
            ],
        }
    }
}

/// A method that received an id.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MethodEntry {
    /// Class internal name.
    pub class: String,
    /// Method name.
    pub name: String,
    /// Method descriptor.
    pub descriptor: String,
}

/// A site that received an id.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SiteEntry {
    /// Id of the enclosing method.
    pub method_id: i32,
    /// Bytecode offset in the original method.
    pub bci: u32,
    /// What the site is (`call`, `alloc`, `monitor`, `field`, `line`, `return`).
    pub kind: &'static str,
    /// The opcode of the site's instruction (which `invoke…` a call is).
    pub opcode: u8,
    /// Details (the called member, the allocated type, the line number…).
    pub detail: String,
}

/// Hands out method and site ids; the agent keeps it to map ids back to names. A method or
/// site instrumented again (its class retransformed, by this session or another's) keeps its
/// id: the ids stay as many as the methods and sites, and a class instrumented twice alike
/// gets the same bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Registry {
    /// Methods by id.
    pub methods: Vec<MethodEntry>,
    /// Sites by id.
    pub sites: Vec<SiteEntry>,
    method_ids: HashMap<MethodEntry, i32>,
    site_ids: HashMap<SiteEntry, i32>,
}

impl Registry {
    pub(crate) fn add_method(&mut self, class: &str, name: &str, descriptor: &str) -> i32 {
        let entry = MethodEntry {
            class: class.into(),
            name: name.into(),
            descriptor: descriptor.into(),
        };
        let next = self.methods.len() as i32;
        *self.method_ids.entry(entry).or_insert_with_key(|entry| {
            self.methods.push(entry.clone());
            next
        })
    }

    pub(crate) fn add_site(
        &mut self,
        method_id: i32,
        bci: u32,
        opcode: u8,
        kind: &'static str,
        detail: String,
    ) -> i32 {
        let entry = SiteEntry {
            method_id,
            bci,
            kind,
            opcode,
            detail,
        };
        let next = self.sites.len() as i32;
        *self.site_ids.entry(entry).or_insert_with_key(|entry| {
            self.sites.push(entry.clone());
            next
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_and_descriptors() {
        assert!(Pattern::Prefix("java/".into()).matches("java/lang/Object"));
        assert!(!Pattern::Exact("a".into()).matches("ab"));
        let one_of = Pattern::OneOf(vec!["a".into(), "b".into()]);
        assert!(one_of.matches("b") && !one_of.matches("ab"));
        let p = &InjectionPlan::everything("P").probes[6];
        assert_eq!(
            p.descriptor(),
            "(IILjava/lang/Object;Ljava/lang/Throwable;)V"
        );
    }
}
