//! Java source to a checked [`Script`].
//!
//! tree-sitter's Java grammar parses the whole language, so every construct has a name and a
//! position; this module accepts what BTrace allows and refuses the rest with a
//! `file:line:col: message` error: no loops, no `new`, no `try`/`throw`, no calls but the
//! `BTraceUtils` functions and the script's own (non-recursive) methods, no writes but to the
//! script's static fields, `@TLS` fields and locals, no `trusted`/`unsafe` scripts.
//!
//! This module reads the class, its fields and methods; `probe` reads a handler's
//! annotations, `body` its statements and expressions, and `check` makes the checks that
//! need the whole script.

mod body;
mod check;
mod descriptor;
mod events;
mod probe;

use std::fmt;

use tree_sitter::{Node, Parser};

use crate::arguments::Arguments;
use crate::ast::{Field, Handler, Method, Param, Pos, Role, Script, Trigger, Type};
use body::{describe_kind, unquote};
use check::{calls_any, calls_stack, measures, Checker};
use probe::is_throwable;

/// A compile error: where and what, printed as javac prints errors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompileError {
    /// The script's file name.
    pub file: String,
    /// Where.
    pub at: Pos,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for CompileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file, self.at.line, self.at.col, self.message
        )
    }
}

impl std::error::Error for CompileError {}

type Result<T> = std::result::Result<T, (Pos, String)>;

/// Finds the text of a probe descriptor by its namespace (`@OnProbe(namespace = ...)`).
pub type Descriptors<'d> = &'d dyn Fn(&str) -> std::result::Result<String, String>;

/// Compiles a script's source, given no arguments; `file` names it in errors. `@OnProbe`
/// handlers need [`compile_with`].
pub fn compile(source: &str, file: &str) -> std::result::Result<Script, CompileError> {
    let descriptors: Descriptors = &|namespace| {
        Err(format!(
            "no probe descriptor is read here ({namespace}.xml)"
        ))
    };
    compile_with(source, file, descriptors, &Arguments::default())
}

/// [`compile`], reading the probe descriptors of `@OnProbe` handlers with `descriptors`, and
/// `${name}` in annotation values from `arguments`.
pub fn compile_with(
    source: &str,
    file: &str,
    descriptors: Descriptors,
    arguments: &Arguments,
) -> std::result::Result<Script, CompileError> {
    let error = |(at, message): (Pos, String)| CompileError {
        file: file.to_string(),
        at,
        message,
    };
    let mut parser = Parser::new();
    parser
        .set_language(&tree_sitter_java::LANGUAGE.into())
        .expect("the Java grammar matches tree-sitter's version");
    let tree = parser
        .parse(source, None)
        .ok_or_else(|| error((Pos::default(), "could not parse".into())))?;
    let root = tree.root_node();
    if root.has_error() {
        // Not Java: BTrace's scripts may go through the C preprocessor first.
        if let Some(at) = preprocessor_line(source) {
            return Err(error((
                at,
                "#include and #define need BTrace's preprocessor, which `jtap btrace` runs (-I DIR: where to find included files)".into(),
            )));
        }
        let bad = first_error(root).unwrap_or(root);
        let what = if bad.is_missing() {
            format!("syntax error: missing {}", bad.kind())
        } else {
            let text = text(bad, source);
            let shown: String = text.chars().take(30).collect();
            format!("syntax error at {shown:?}")
        };
        return Err(error((pos(bad), what)));
    }
    Compiler {
        source,
        printers: Vec::new(),
        descriptors,
        arguments,
    }
    .script(root)
    .map_err(error)
}

/// Where the first preprocessor directive (`#include`, `#define`, …) of a source is, if it
/// has one.
fn preprocessor_line(source: &str) -> Option<Pos> {
    source.lines().enumerate().find_map(|(i, line)| {
        let directive = line.trim_start();
        let is_directive = ["#include", "#define", "#if", "#undef"]
            .iter()
            .any(|d| directive.starts_with(d));
        is_directive.then(|| Pos {
            line: i + 1,
            col: line.len() - directive.len() + 1,
        })
    })
}

/// Whether a script declares DTrace probes (`@DTrace`, `@DTraceRef` on its class) or fires
/// them (`D.probe`, `dtraceProbe`).
fn uses_dtrace(class_annotations: &[Annotation], script: &Script) -> bool {
    let own_probe = script.methods.iter().any(|m| m.name == "probe");
    let fired = match own_probe {
        true => &["dtraceProbe"][..],
        false => &["dtraceProbe", "probe"][..],
    };
    class_annotations
        .iter()
        .any(|a| matches!(a.name.as_str(), "DTrace" | "DTraceRef"))
        || script
            .handlers
            .iter()
            .map(|h| &h.method)
            .chain(&script.methods)
            .any(|m| calls_any(&m.body, fired))
}

/// What a probe handler whose annotation names a script argument not given does: nothing,
/// as in BTrace, where `${name}` then stays in the pattern as written.
fn unresolved_note(handler: &Handler) -> Option<String> {
    let Trigger::Probe(probe) = &handler.trigger else {
        return None;
    };
    let name = probe.unresolved()?;
    Some(format!(
        "line {}: no script argument {name} is given (NAME=VALUE after the script) for ${{{name}}}: this handler probes nothing, as in BTrace",
        handler.method.at.line
    ))
}

fn first_error(node: Node) -> Option<Node> {
    if node.is_error() || node.is_missing() {
        return Some(node);
    }
    let mut cursor = node.walk();
    let children: Vec<Node> = node.children(&mut cursor).collect();
    children.into_iter().find_map(first_error)
}

fn pos(node: Node) -> Pos {
    let p = node.start_position();
    Pos {
        line: p.row + 1,
        col: p.column + 1,
    }
}

fn text<'s>(node: Node, source: &'s str) -> &'s str {
    &source[node.byte_range()]
}

fn named_children(node: Node) -> Vec<Node> {
    let mut cursor = node.walk();
    node.named_children(&mut cursor).collect()
}

fn fail<T>(node: Node, message: impl Into<String>) -> Result<T> {
    Err((pos(node), message.into()))
}

struct Compiler<'s> {
    source: &'s str,
    /// The script's `@Injected` `Printer` fields, whose `print`/`println` are BTraceUtils'.
    printers: Vec<String>,
    descriptors: Descriptors<'s>,
    arguments: &'s Arguments,
}

/// An annotation: its simple name and its arguments (`value` for a lone one).
struct Annotation<'t> {
    name: String,
    node: Node<'t>,
    arguments: Vec<(String, Node<'t>)>,
}

impl<'s> Compiler<'s> {
    fn text(&self, node: Node) -> &'s str {
        text(node, self.source)
    }

    fn script(&mut self, root: Node) -> Result<Script> {
        let mut class = None;
        for child in named_children(root) {
            match child.kind() {
                "import_declaration" | "package_declaration" | "line_comment" | "block_comment" => {
                }
                "class_declaration" if class.is_none() => class = Some(child),
                _ => return fail(child, "a script is one class (and its imports)"),
            }
        }
        let Some(class) = class else {
            return fail(
                root,
                "no class: a BTrace script is a class annotated @BTrace",
            );
        };
        let annotations = self.annotations(class)?;
        let Some(btrace) = annotations.iter().find(|a| a.name == "BTrace") else {
            return fail(class, "the class is not annotated @BTrace");
        };
        for (key, value) in &btrace.arguments {
            if matches!(key.as_str(), "trusted" | "unsafe") && self.text(*value) == "true" {
                return fail(
                    *value,
                    format!("{key} scripts are not run: jtap runs only scripts that cannot change the application"),
                );
            }
        }
        let name = class
            .child_by_field_name("name")
            .map(|n| self.text(n).to_string())
            .unwrap_or_default();
        let body = class
            .child_by_field_name("body")
            .ok_or((pos(class), "the class has no body".to_string()))?;
        self.printers = self.injected(body)?;
        let mut script = Script {
            name,
            fields: Vec::new(),
            static_init: Vec::new(),
            handlers: Vec::new(),
            methods: Vec::new(),
            notes: Vec::new(),
            events: Vec::new(),
        };
        for member in named_children(body) {
            match member.kind() {
                "field_declaration" => self.fields(member, &mut script)?,
                "method_declaration" => self.method(member, &mut script)?,
                "static_initializer" => {
                    let block = named_children(member)
                        .into_iter()
                        .find(|n| n.kind() == "block")
                        .ok_or((pos(member), "empty static block".to_string()))?;
                    script.static_init.extend(self.block(block)?);
                }
                "line_comment" | "block_comment" => {}
                "constructor_declaration" => {}
                other => {
                    return fail(
                        member,
                        format!("{} is not allowed in a BTrace script", describe_kind(other)),
                    )
                }
            }
        }
        Checker::new(&script).check()?;
        script
            .notes
            .extend(script.handlers.iter().filter_map(unresolved_note));
        if uses_dtrace(&annotations, &script) {
            script.notes.push("DTrace probes (@DTrace, @DTraceRef, D.probe) do nothing: there is no DTrace here, and BTrace ignores them too then".into());
        }
        Ok(script)
    }

    /// A declaration's annotations (from its `modifiers`).
    fn annotations<'t>(&self, node: Node<'t>) -> Result<Vec<Annotation<'t>>> {
        let Some(modifiers) = named_children(node)
            .into_iter()
            .find(|n| n.kind() == "modifiers")
        else {
            return Ok(Vec::new());
        };
        Ok(named_children(modifiers)
            .into_iter()
            .filter(|c| matches!(c.kind(), "annotation" | "marker_annotation"))
            .map(|c| self.annotation(c))
            .collect())
    }

    /// An annotation node: its simple name and its arguments.
    fn annotation<'t>(&self, node: Node<'t>) -> Annotation<'t> {
        let name = node
            .child_by_field_name("name")
            .map(|n| self.text(n).rsplit('.').next().unwrap_or("").to_string())
            .unwrap_or_default();
        let mut arguments = Vec::new();
        if let Some(list) = node.child_by_field_name("arguments") {
            for argument in named_children(list) {
                if argument.kind() == "element_value_pair" {
                    let key = argument
                        .child_by_field_name("key")
                        .map(|k| self.text(k).to_string())
                        .unwrap_or_default();
                    if let Some(value) = argument.child_by_field_name("value") {
                        arguments.push((key, value));
                    }
                } else if !argument.kind().ends_with("comment") {
                    arguments.push(("value".to_string(), argument));
                }
            }
        }
        Annotation {
            name,
            node,
            arguments,
        }
    }

    /// The names of the `@Injected` fields of class body `body`: BTrace's one service,
    /// `Printer` (any other is refused).
    fn injected(&self, body: Node) -> Result<Vec<String>> {
        let mut printers = Vec::new();
        for member in named_children(body) {
            if member.kind() != "field_declaration"
                || !self
                    .annotations(member)?
                    .iter()
                    .any(|a| a.name == "Injected")
            {
                continue;
            }
            let ty = member.child_by_field_name("type").map(|t| self.text(t));
            if ty.and_then(|t| t.rsplit('.').next()) != Some("Printer") {
                return fail(member, "@Injected services other than Printer are not BTrace's: jtap runs no service code");
            }
            let mut cursor = member.walk();
            for declarator in member.children_by_field_name("declarator", &mut cursor) {
                if let Some(n) = declarator.child_by_field_name("name") {
                    printers.push(self.text(n).to_string());
                }
            }
        }
        Ok(printers)
    }

    /// A script's fields; as in BTrace 2, one declared without `static` is static all the
    /// same (a script has no instance). `@Injected` fields are no state (see
    /// [`Self::injected`]). An `@Event` field is the factory of the event type it declares.
    fn fields(&self, node: Node, script: &mut Script) -> Result<()> {
        let annotations = self.annotations(node)?;
        if annotations.iter().any(|a| a.name == "Injected") {
            return Ok(());
        }
        let event = match annotations.iter().find(|a| a.name == "Event") {
            Some(a) => {
                let ty = node.child_by_field_name("type").map(|t| self.text(t));
                if !ty.is_some_and(|t| t.ends_with("Factory")) {
                    return fail(node, "an @Event field is a JfrEvent.Factory");
                }
                Some(self.declare_event(a, script)?)
            }
            None => None,
        };
        let thread_local = annotations.iter().any(|a| a.name == "TLS");
        let exported = annotations
            .iter()
            .any(|a| a.name == "Export" || a.name == "Property");
        let ty = self.ty(node
            .child_by_field_name("type")
            .expect("fields have a type"));
        let mut cursor = node.walk();
        for declarator in node.children_by_field_name("declarator", &mut cursor) {
            let name = declarator
                .child_by_field_name("name")
                .map(|n| self.text(n).to_string())
                .unwrap_or_default();
            let init = declarator
                .child_by_field_name("value")
                .map(|v| self.expr(v))
                .transpose()?;
            script.fields.push(Field {
                name,
                ty: ty.clone(),
                init,
                thread_local,
                exported,
                event,
            });
        }
        Ok(())
    }

    fn method(&self, node: Node, script: &mut Script) -> Result<()> {
        let name = self.text(
            node.child_by_field_name("name")
                .expect("methods have names"),
        );
        let Some(body) = node.child_by_field_name("body") else {
            return fail(node, format!("method {name} has no body"));
        };
        let annotations = self.annotations(node)?;
        let special = |a: &&Annotation| matches!(a.name.as_str(), "OnProbe" | "PeriodicEvent");
        let triggers = match annotations.iter().find(special) {
            Some(a) if a.name == "OnProbe" => self
                .on_probe(a)?
                .into_iter()
                .map(|probe| Some(Trigger::Probe(probe)))
                .collect(),
            Some(a) => vec![Some(self.periodic(a, node, script)?)],
            None => vec![self.trigger(&annotations)?],
        };
        for trigger in triggers {
            self.handler(node, (name, body), &annotations, trigger, script)?;
        }
        Ok(())
    }

    /// Method `node` (`name`, `body`) as a handler of `trigger`, or a plain method.
    fn handler(
        &self,
        node: Node,
        (name, body): (&str, Node),
        annotations: &[Annotation],
        trigger: Option<Trigger>,
        script: &mut Script,
    ) -> Result<()> {
        let sampled = self.sampling(annotations)?;
        let enabled_at = self.levels(annotations)?;
        let mut params = Vec::new();
        let mut arg = 0;
        if let Some(list) = node.child_by_field_name("parameters") {
            for p in named_children(list) {
                if p.kind() == "spread_parameter" {
                    return fail(p, "varargs parameters are not allowed");
                }
                if p.kind() != "formal_parameter" {
                    continue;
                }
                let ty = self.ty(p
                    .child_by_field_name("type")
                    .expect("parameters have types"));
                let param_name = p
                    .child_by_field_name("name")
                    .map(|n| self.text(n).to_string())
                    .unwrap_or_default();
                let role = match &trigger {
                    Some(Trigger::Probe(probe)) => self.role(p, &ty, probe.location, &mut arg)?,
                    Some(Trigger::Error) if is_throwable(&ty) => Role::Thrown,
                    _ => Role::Plain,
                };
                params.push(Param {
                    name: param_name,
                    ty,
                    role,
                });
            }
        }
        let method = Method {
            name: name.to_string(),
            params,
            body: self.block(body)?,
            at: pos(node),
        };
        let uses_sizes = measures(&method, trigger.is_some())?;
        match trigger {
            Some(trigger) => {
                let uses_stack = calls_stack(&method.body);
                script.handlers.push(Handler {
                    trigger,
                    method,
                    uses_stack,
                    uses_sizes,
                    sampled,
                    enabled_at,
                });
            }
            None => script.methods.push(method),
        }
        Ok(())
    }

    fn string_constant(&self, node: Node) -> Result<String> {
        match node.kind() {
            "string_literal" => Ok(unquote(self.text(node))),
            _ => fail(node, "expected a string literal"),
        }
    }

    /// A string constant with each `${name}` replaced by the script's argument `name`, as
    /// BTrace does for the values naming probed methods, events and memory pools.
    fn templated(&self, node: Node) -> Result<String> {
        Ok(self.arguments.template(&self.string_constant(node)?))
    }

    fn ty(&self, node: Node) -> Type {
        match self.text(node) {
            "boolean" => Type::Boolean,
            "byte" => Type::Integral("byte"),
            "short" => Type::Integral("short"),
            "char" => Type::Integral("char"),
            "int" => Type::Integral("int"),
            "long" => Type::Integral("long"),
            "float" => Type::Floating("float"),
            "double" => Type::Floating("double"),
            "String" | "java.lang.String" => Type::String,
            other => Type::Object(other.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ast::{Location, Probe};

    const TRACKER: &str = r##"
import com.sun.btrace.annotations.*;
import static com.sun.btrace.BTraceUtils.*;
@BTrace
public class Tracker {
    @OnMethod(clazz = "/me\\.kisimple\\.just4fun\\..*/", method = "/.*/", location = @Location(Kind.RETURN))
    public static void trace(@ProbeClassName String pcn, @ProbeMethodName String pmn, @Duration long duration) {
        if (duration > 3000000000l) {
            print(Strings.strcat("#Duration of ", Strings.strcat(Strings.strcat(pcn, "."), pmn)));
            print(" is "); print(duration); println("#");
            jstack();
        }
    }
}
"##;

    #[test]
    fn the_issues_tracker_compiles_to_one_return_probe_with_stacks() {
        let script = compile(TRACKER, "Tracker.java").unwrap();
        assert_eq!(script.name, "Tracker");
        assert_eq!(script.handlers.len(), 1);
        let handler = &script.handlers[0];
        assert_eq!(
            handler.trigger,
            Trigger::Probe(Probe {
                class: "/me\\.kisimple\\.just4fun\\..*/".into(),
                method: "/.*/".into(),
                descriptor: String::new(),
                location: Location::Return,
                target: None,
            })
        );
        assert!(handler.uses_stack);
        let roles: Vec<&Role> = handler.method.params.iter().map(|p| &p.role).collect();
        assert_eq!(
            roles,
            [
                &Role::ClassName,
                &Role::MethodName { fqn: false },
                &Role::Duration
            ]
        );
    }

    fn error(source: &str) -> String {
        let script = format!("import com.sun.btrace.annotations.*;\nimport static com.sun.btrace.BTraceUtils.*;\n@BTrace public class S {{\n{source}\n}}\n");
        compile(&script, "S.java").unwrap_err().to_string()
    }

    #[test]
    fn sizeof_measures_only_what_the_probe_captured() {
        let local = error("@OnMethod(clazz=\"a.B\", method=\"run\")\npublic static void h(String s) {\n    String t = s;\n    println(sizeof(t));\n}");
        assert!(
            local.starts_with("S.java:7:13: sizeof measures a handler's parameter"),
            "{local}"
        );
        let helper = error("static long size(Object o) { return sizeof(o); }\n@OnTimer(100) public static void h() {}");
        assert!(
            helper.starts_with("S.java:4:37: sizeof measures"),
            "{helper}"
        );
        let name = error("@OnMethod(clazz=\"a.B\", method=\"run\")\npublic static void h(@ProbeMethodName String m) { println(sizeof(m)); }");
        assert!(name.contains("sizeof measures"), "{name}");
    }

    #[test]
    fn allocations_pass_the_object_as_return_only_after() {
        let before = error("@OnMethod(clazz=\"a.B\", method=\"run\", location=@Location(value=Kind.NEW, clazz=\"a.C\"))\npublic static void h(@Return Object o) {}");
        assert!(
            before.contains("@Return at Kind.NEW and Kind.NEWARRAY needs where = Where.AFTER"),
            "{before}"
        );
        let source = "import com.sun.btrace.annotations.*;\n@BTrace public class S {\n@OnMethod(clazz=\"a.B\", method=\"run\", location=@Location(value=Kind.NEWARRAY, clazz=\"int\", where=Where.AFTER))\npublic static void h(@Return int[] a) {}\n}\n";
        let script = compile(source, "S.java").unwrap();
        assert_eq!(script.handlers[0].method.params[0].role, Role::Return);
    }

    #[test]
    fn call_locations_take_what_a_call_site_offers() {
        let call = |where_: &str, params: &str| {
            error(&format!(
                "@OnMethod(clazz=\"a.B\", method=\"run\", location=@Location(value=Kind.CALL, clazz=\"/.*/\", method=\"/.*/\"{where_}))\npublic static void h({params}) {{}}"
            ))
        };
        assert!(
            call("", "@Duration long d")
                .contains("S.java:5:22: @Duration at Kind.CALL needs where = Where.AFTER"),
            "{}",
            call("", "@Duration long d")
        );
        let taken = compile(
            "import com.sun.btrace.annotations.*;\n@BTrace public class S {\n@OnMethod(clazz=\"a.B\", method=\"run\", location=@Location(value=Kind.CALL, clazz=\"/.*/\", method=\"/.*/\", where=Where.AFTER))\npublic static void h(@Self Object self, @TargetInstance Object target, String first, AnyType[] all, @Return int r) {}\n}\n",
            "S.java",
        )
        .unwrap();
        let roles: Vec<&Role> = taken.handlers[0]
            .method
            .params
            .iter()
            .map(|p| &p.role)
            .collect();
        assert_eq!(
            roles,
            [
                &Role::This,
                &Role::TargetInstance,
                &Role::Arg(0),
                &Role::AllArgs,
                &Role::Return
            ]
        );
        let entry = error("@OnMethod(clazz=\"a.B\", method=\"run\")\npublic static void h(@TargetMethodOrField String m) {}");
        assert!(
            entry.contains(
                "@TargetMethodOrField needs location = @Location(value = Kind.CALL, ...)"
            ),
            "{entry}"
        );
        let bogus = error("@OnMethod(clazz=\"a.B\", method=\"run\", location=@Location(Kind.BOGUS))\npublic static void h() {}");
        assert!(
            bogus.contains("location Kind.BOGUS is not a BTrace location (ENTRY, "),
            "{bogus}"
        );
        let get = error("@OnMethod(clazz=\"a.B\", method=\"run\", location=@Location(Kind.ARRAY_GET))\npublic static void h(@Return int v) {}");
        assert!(
            get.contains("@Return at Kind.ARRAY_GET needs where = Where.AFTER"),
            "{get}"
        );
        let throw = error("@OnMethod(clazz=\"a.B\", method=\"run\", location=@Location(Kind.THROW))\npublic static void h(@TargetMethodOrField String m) {}");
        assert!(throw.contains("@TargetMethodOrField needs"), "{throw}");
        let field_return = error("@OnMethod(clazz=\"a.B\", method=\"run\", location=@Location(value=Kind.FIELD_GET, clazz=\"a.C\", field=\"n\"))\npublic static void h(@Return int n) {}");
        assert!(
            field_return.contains("@Return at Kind.FIELD_GET needs where = Where.AFTER"),
            "{field_return}"
        );
        let array = error("@OnMethod(clazz=\"a.B\", method=\"run\", location=@Location(value=Kind.NEWARRAY, clazz=\"char\"))\npublic static void h(String type, int dims, int more) {}");
        assert!(
            array.contains("S.java:5:45: this location passes no more values"),
            "{array}"
        );
        let two = error("@OnMethod(clazz=\"a.B\", method=\"run\", location=@Location(value=Kind.LINE, line=3))\npublic static void h(int line, int more) {}");
        assert!(
            two.contains("S.java:5:32: this location passes no more values"),
            "{two}"
        );
        let duration = error("@OnMethod(clazz=\"a.B\", method=\"run\", location=@Location(Kind.SYNC_ENTRY))\npublic static void h(@Duration long d) {}");
        assert!(
            duration.contains("@Duration needs location = @Location(Kind.RETURN)"),
            "{duration}"
        );
    }

    #[test]
    fn what_btrace_forbids_is_refused_with_its_position() {
        let handler = |body: &str| {
            error(&format!(
                "@OnMethod(clazz=\"a.B\", method=\"run\")\npublic static void h() {{\n{body}\n}}"
            ))
        };
        assert_eq!(
            handler("for (;;) {}"),
            "S.java:6:1: loops are not allowed in BTrace scripts"
        );
        assert_eq!(
            handler("while (true) {}"),
            "S.java:6:1: loops are not allowed in BTrace scripts"
        );
        assert_eq!(
            handler("Object o = new Object();"),
            "S.java:6:12: creating objects (new) is not allowed in BTrace scripts"
        );
        assert_eq!(
            handler("try { } finally { }"),
            "S.java:6:1: try, catch and throw are not allowed in BTrace scripts"
        );
        assert!(handler("System.exit(1);").contains("calls to application methods (System.exit)"));
        assert!(handler("foo();").contains("foo is neither a BTraceUtils function"));
        assert_eq!(
            handler("Sys.Memory.runFinalization();"),
            "S.java:6:1: Memory.runFinalization is refused: it runs the application's finalizers (application code) in the JVM"
        );
        assert!(handler("hash(\"a\");").starts_with("S.java:6:1: hash is refused: it calls"));
        assert!(handler("x = 1;").contains("cannot find symbol: x"));
        assert!(error("#include \"defs.h\"\nclass T {}")
            .starts_with("S.java:4:1: #include and #define need BTrace's preprocessor"));
        assert!(
            handler("println(\"a\")").starts_with("S.java:6:"),
            "syntax error"
        );
        assert!(error("static void a() { b(); }\nstatic void b() { a(); }")
            .contains("recursion is not allowed"));
        // As in BTrace 2, what is declared without `static` is static (no `this`).
        let instance = compile(
            "@BTrace class T {\n@Property Profiler p = Profiling.newProfiler();\n@Export long n;\n@OnTimer(10) void t() { Profiling.recordEntry(p, \"b\"); n++; }\n}",
            "T.java",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let mut machine = crate::Machine::new(&instance, "T.java", Vec::new(), None);
        machine.run(0);
        let exported: Vec<String> = machine
            .exported()
            .into_iter()
            .map(|(n, v)| format!("{n}={v}"))
            .collect();
        assert_eq!(
            exported,
            ["p=Profiler", "n=1"],
            "instance fields, static as in BTrace 2"
        );
        let trusted = compile("@BTrace(trusted = true) public class T {}", "T.java").unwrap_err();
        assert!(
            trusted.to_string().contains("trusted scripts are not run"),
            "{trusted}"
        );
        assert!(compile("public class T {}", "T.java")
            .unwrap_err()
            .message
            .contains("@BTrace"));
        assert!(
            error("@OnMethod(clazz=\"a.B\")\nstatic void h(@Duration long d) {}")
                .contains("@Duration needs location = @Location(Kind.RETURN) (or Kind.ERROR, or Kind.CALL with Where.AFTER): a call has no duration at its entry, and BTrace's verifier refuses it there too")
        );
    }

    #[test]
    fn btrace_3s_package_names_are_btrace_2s() {
        let source = |package: &str| {
            format!(
                "import {package}.annotations.*;\nimport static {package}.BTraceUtils.*;\n@BTrace public class S {{\n\
                 @{package}.annotations.OnMethod(clazz = \"a.B\", method = \"run\", location = @Location({package}.annotations.Kind.RETURN))\n\
                 public static void h(@{package}.annotations.Duration long d) {{ {package}.BTraceUtils.println(d); Strings.strcat(\"a\", \"b\"); }}\n}}\n"
            )
        };
        let compiled = |package: &str| {
            let script = compile(&source(package), "S.java").unwrap_or_else(|e| panic!("{e}"));
            // The same handlers, at columns the packages' lengths move.
            let columns = regex::Regex::new(r"col: \d+").unwrap();
            columns
                .replace_all(&format!("{:?}", script.handlers), "col")
                .to_string()
        };
        let btrace_2 = compiled("org.openjdk.btrace.core");
        assert!(btrace_2.contains("Builtin(\"println\""), "{btrace_2}");
        assert_eq!(compiled("io.btrace.core"), btrace_2);
    }

    #[test]
    fn an_injected_printer_prints_as_println_does() {
        let source = "import org.openjdk.btrace.core.annotations.*;\nimport org.openjdk.btrace.services.impl.Printer;\n@BTrace public class S {\n@Injected(ServiceType.RUNTIME) private static Printer printer;\n@OnTimer(100) public static void h() { printer.println(\"x\"); }\n}\n";
        let script = compile(source, "S.java").unwrap_or_else(|e| panic!("{e}"));
        assert!(script.fields.is_empty());
        let body = format!("{:?}", script.handlers[0].method.body);
        assert!(body.contains("Builtin(\"println\""), "{body}");
        let other = error("@Injected private static Mailer mailer;");
        assert!(
            other.starts_with("S.java:4:1: @Injected services other than Printer"),
            "{other}"
        );
    }
}
