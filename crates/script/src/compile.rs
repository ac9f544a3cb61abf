//! Java source to a checked [`Script`].
//!
//! tree-sitter's Java grammar parses the whole language, so every construct has a name and a
//! position; this module accepts what BTrace allows and refuses the rest with a
//! `file:line:col: message` error: no loops, no `new`, no `try`/`throw`, no calls but the
//! `BTraceUtils` functions and the script's own (non-recursive) methods, no writes but to the
//! script's static fields, `@TLS` fields and locals, no `trusted`/`unsafe` scripts.

use std::collections::{HashMap, HashSet};
use std::fmt;

use tree_sitter::{Node, Parser};

use crate::ast::{
    Expr, ExprKind, Field, Handler, Literal, Location, Method, Param, Pos, Probe, Role, Sampling,
    Script, Stmt, Target, Trigger, Type,
};
use crate::builtins;

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

/// Compiles a script's source; `file` names it in errors.
pub fn compile(source: &str, file: &str) -> std::result::Result<Script, CompileError> {
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
    Compiler { source }.script(root).map_err(error)
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

    fn script(&self, root: Node) -> Result<Script> {
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
        let mut script = Script {
            name,
            fields: Vec::new(),
            static_init: Vec::new(),
            handlers: Vec::new(),
            methods: Vec::new(),
        };
        for member in named_children(body) {
            match member.kind() {
                "field_declaration" => self.fields(member, &mut script.fields)?,
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
        let mut out = Vec::new();
        for child in named_children(modifiers) {
            if !matches!(child.kind(), "annotation" | "marker_annotation") {
                continue;
            }
            let name = child
                .child_by_field_name("name")
                .map(|n| self.text(n).rsplit('.').next().unwrap_or("").to_string())
                .unwrap_or_default();
            let mut arguments = Vec::new();
            if let Some(list) = child.child_by_field_name("arguments") {
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
            out.push(Annotation {
                name,
                node: child,
                arguments,
            });
        }
        Ok(out)
    }

    fn modifiers(&self, node: Node) -> Vec<&'s str> {
        named_children(node)
            .into_iter()
            .find(|n| n.kind() == "modifiers")
            .map(|m| {
                let mut cursor = m.walk();
                m.children(&mut cursor)
                    .filter(|c| !c.kind().contains("annotation"))
                    .map(|c| self.text(c))
                    .collect()
            })
            .unwrap_or_default()
    }

    fn fields(&self, node: Node, fields: &mut Vec<Field>) -> Result<()> {
        if !self.modifiers(node).contains(&"static") {
            return fail(node, "fields of a BTrace script must be static");
        }
        let annotations = self.annotations(node)?;
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
            fields.push(Field {
                name,
                ty: ty.clone(),
                init,
                thread_local,
                exported,
            });
        }
        Ok(())
    }

    fn method(&self, node: Node, script: &mut Script) -> Result<()> {
        let name = self.text(
            node.child_by_field_name("name")
                .expect("methods have names"),
        );
        if !self.modifiers(node).contains(&"static") {
            return fail(node, format!("method {name} must be static"));
        }
        let Some(body) = node.child_by_field_name("body") else {
            return fail(node, format!("method {name} has no body"));
        };
        let annotations = self.annotations(node)?;
        let trigger = self.trigger(&annotations)?;
        let sampled = self.sampling(&annotations)?;
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
                });
            }
            None => script.methods.push(method),
        }
        Ok(())
    }

    /// What a handler parameter receives, from its annotation (or its position).
    fn role(&self, p: Node, ty: &Type, location: Location, arg: &mut usize) -> Result<Role> {
        let annotations = self.annotations(p)?;
        let Some(a) = annotations.first() else {
            let values = location.point_values();
            if !values.is_empty() {
                *arg += 1;
                return match values.get(*arg - 1) {
                    Some(role) => Ok(role.clone()),
                    None => fail(p, "this location passes no more values without an annotation (the line, the class allocated, the array's type and dimensions, or the monitor)"),
                };
            }
            if matches!(ty, Type::Object(t) if t == "AnyType[]") {
                return Ok(Role::AllArgs);
            }
            if location == Location::Error && is_throwable(ty) {
                return Ok(Role::Thrown);
            }
            *arg += 1;
            return Ok(Role::Arg(*arg - 1));
        };
        let role = match a.name.as_str() {
            "ProbeClassName" => Role::ClassName,
            "ProbeMethodName" => Role::MethodName {
                fqn: a
                    .arguments
                    .iter()
                    .any(|(k, v)| k == "fqn" && self.text(*v) == "true"),
            },
            "Duration" => Role::Duration,
            "Return" => Role::Return,
            "Self" => Role::This,
            "TargetMethodOrField" if location.has_target() => Role::TargetMethod {
                fqn: a
                    .arguments
                    .iter()
                    .any(|(k, v)| k == "fqn" && self.text(*v) == "true"),
            },
            "TargetInstance" if location.has_target() => Role::TargetInstance,
            "TargetMethodOrField" | "TargetInstance" => {
                return fail(
                    a.node,
                    format!("@{} needs location = @Location(value = Kind.CALL, ...) (or Kind.FIELD_GET, Kind.FIELD_SET)", a.name),
                )
            }
            other => {
                return fail(
                    a.node,
                    format!("@{other} parameters are not supported (yet): @ProbeClassName, @ProbeMethodName, @Duration, @Return, @Self, @TargetInstance, @TargetMethodOrField and the arguments are"),
                )
            }
        };
        match (&role, location) {
            (Role::Duration | Role::Return, Location::Entry) => fail(
                a.node,
                format!(
                    "@{} needs location = @Location(Kind.RETURN) (or Kind.ERROR)",
                    a.name
                ),
            ),
            (Role::Return, Location::Field { write: false, after: true })
            | (Role::Return, Location::New { after: true } | Location::NewArray { after: true }) => {
                Ok(role)
            }
            (Role::Return, Location::New { after: false } | Location::NewArray { after: false }) => {
                fail(
                    a.node,
                    "@Return at Kind.NEW and Kind.NEWARRAY needs where = Where.AFTER",
                )
            }
            (Role::Return, Location::Field { write: false, after: false }) => fail(
                a.node,
                "@Return at Kind.FIELD_GET needs where = Where.AFTER",
            ),
            (Role::Duration | Role::Return, location) if location.is_point() => fail(
                a.node,
                format!(
                    "@{} needs location = @Location(Kind.RETURN) (or Kind.ERROR, or Kind.CALL with Where.AFTER)",
                    a.name
                ),
            ),
            (Role::Duration | Role::Return, Location::Call { after: false }) => fail(
                a.node,
                format!("@{} at Kind.CALL needs where = Where.AFTER", a.name),
            ),
            _ => Ok(role),
        }
    }

    /// `@Sampled(kind = Sampled.Sampler.X, mean = N)` (BTrace's defaults: `Const`, 10).
    fn sampling(&self, annotations: &[Annotation]) -> Result<Option<Sampling>> {
        let Some(a) = annotations.iter().find(|a| a.name == "Sampled") else {
            return Ok(None);
        };
        let argument = |key: &str| a.arguments.iter().find(|(k, _)| k == key).map(|(_, v)| *v);
        let mean = match argument("mean") {
            Some(v) => self
                .text(v)
                .replace('_', "")
                .parse::<u64>()
                .ok()
                .filter(|&n| n > 0)
                .ok_or((pos(v), "@Sampled takes a mean of 1 or more".to_string()))?,
            None => 10,
        };
        let kind = argument("kind").map_or("Const", |v| {
            let text = self.text(v);
            text.rsplit('.').next().unwrap_or(text)
        });
        match kind {
            "None" => Ok(None),
            "Const" => Ok(Some(Sampling::Every(mean))),
            "Adaptive" => Ok(Some(Sampling::Interval(mean))),
            other => fail(
                a.node,
                format!("@Sampled kind {other} is not None, Const or Adaptive"),
            ),
        }
    }

    /// A handler's trigger, from its annotations; None for plain methods.
    fn trigger(&self, annotations: &[Annotation]) -> Result<Option<Trigger>> {
        for a in annotations {
            let argument = |key: &str| a.arguments.iter().find(|(k, _)| k == key).map(|(_, v)| *v);
            match a.name.as_str() {
                "OnMethod" => {
                    let string = |key: &str| -> Result<String> {
                        match argument(key) {
                            Some(v) => self.string_constant(v),
                            None => Ok(String::new()),
                        }
                    };
                    let class = string("clazz")?;
                    if class.is_empty() {
                        return fail(a.node, "@OnMethod needs clazz");
                    }
                    let method = match string("method")? {
                        m if m.is_empty() => "/.*/".to_string(),
                        m => m,
                    };
                    let (location, target) = match argument("location") {
                        Some(v) => self.location(v)?,
                        None => (Location::Entry, None),
                    };
                    return Ok(Some(Trigger::Probe(Probe {
                        class,
                        method,
                        descriptor: string("type")?,
                        location,
                        target,
                    })));
                }
                "OnTimer" => {
                    let Some(v) = argument("value") else {
                        return fail(a.node, "@OnTimer needs its period in milliseconds");
                    };
                    let ms = self
                        .text(v)
                        .trim_end_matches(['l', 'L'])
                        .replace('_', "")
                        .parse::<u64>()
                        .ok()
                        .filter(|&ms| ms > 0)
                        .ok_or((
                            pos(v),
                            "@OnTimer takes a period in milliseconds, more than 0".to_string(),
                        ))?;
                    return Ok(Some(Trigger::Timer(ms)));
                }
                "OnExit" => return Ok(Some(Trigger::Exit)),
                "OnEvent" => {
                    let name = argument("value")
                        .map(|v| self.string_constant(v))
                        .transpose()?;
                    return Ok(Some(Trigger::Event(name)));
                }
                "OnError" => return Ok(Some(Trigger::Error)),
                "OnLowMemory" | "OnProbe" | "OnCheckPoint" => {
                    return fail(
                        a.node,
                        format!("@{} handlers are not supported yet", a.name),
                    );
                }
                "Sampled" | "Export" | "Property" | "DTrace" | "DTraceRef" => {}
                _ => {}
            }
        }
        Ok(None)
    }

    /// `@Location(Kind.RETURN)`, `@Location(value = Kind.RETURN, ...)`, and for `Kind.CALL`
    /// the called methods (`clazz`, `method`, `type`) and `where`.
    fn location(&self, node: Node) -> Result<(Location, Option<Target>)> {
        let mut kind = None;
        let mut keyed = Vec::new();
        for arg in node
            .child_by_field_name("arguments")
            .map(named_children)
            .unwrap_or_default()
        {
            match arg.kind() {
                "element_value_pair" => {
                    let key = arg.child_by_field_name("key").map(|k| self.text(k));
                    let value = arg.child_by_field_name("value");
                    match (key, value) {
                        (Some("value"), Some(v)) => kind = Some(v),
                        (Some(key), Some(v)) => keyed.push((key, v)),
                        _ => {}
                    }
                }
                k if k.ends_with("comment") => {}
                _ => kind = Some(arg),
            }
        }
        let Some(kind) = kind else {
            return Ok((Location::Entry, None));
        };
        let last = |n: Node| self.text(n).rsplit('.').next().unwrap_or("").to_string();
        let mut target = Target {
            class: "/.*/".into(),
            method: "/.*/".into(),
            descriptor: String::new(),
        };
        let mut after = false;
        let mut line = None;
        for (key, value) in keyed {
            match key {
                "clazz" => target.class = self.string_constant(value)?,
                "method" | "field" => target.method = self.string_constant(value)?,
                "type" => target.descriptor = self.string_constant(value)?,
                "where" => after = last(value) == "AFTER",
                "line" => {
                    let text = self.text(value).replace(' ', "");
                    line = match text.parse::<i64>() {
                        Ok(-1) => None,
                        Ok(n) if n > 0 => u32::try_from(n).ok(),
                        _ => return fail(value, "line takes a line number, or -1 for every line"),
                    };
                }
                _ => {}
            }
        }
        let location = match last(kind).as_str() {
            "ENTRY" => Location::Entry,
            "RETURN" => Location::Return,
            "ERROR" => Location::Error,
            "CALL" => return Ok((Location::Call { after }, Some(target))),
            "NEW" => return Ok((Location::New { after }, Some(target))),
            "NEWARRAY" => return Ok((Location::NewArray { after }, Some(target))),
            "LINE" => Location::Line(line),
            "SYNC_ENTRY" => Location::Sync { exit: false },
            "SYNC_EXIT" => Location::Sync { exit: true },
            access @ ("FIELD_GET" | "FIELD_SET") => {
                // A field's `type` is its own; fields are told apart by class and name.
                let target = Target {
                    descriptor: String::new(),
                    ..target
                };
                let write = access == "FIELD_SET";
                return Ok((Location::Field { write, after }, Some(target)));
            }
            other => {
                return fail(
                    kind,
                    format!("location Kind.{other} is not supported yet (ENTRY, RETURN, ERROR, CALL, LINE, NEW, NEWARRAY, SYNC_ENTRY, SYNC_EXIT, FIELD_GET and FIELD_SET are)"),
                )
            }
        };
        Ok((location, None))
    }

    fn string_constant(&self, node: Node) -> Result<String> {
        match node.kind() {
            "string_literal" => Ok(unquote(self.text(node))),
            _ => fail(node, "expected a string literal"),
        }
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

    fn block(&self, node: Node) -> Result<Vec<Stmt>> {
        let mut out = Vec::new();
        for child in named_children(node) {
            self.statement(child, &mut out)?;
        }
        Ok(out)
    }

    fn statement(&self, node: Node, out: &mut Vec<Stmt>) -> Result<()> {
        match node.kind() {
            "line_comment" | "block_comment" => {}
            "block" => out.push(Stmt::Block(self.block(node)?)),
            "expression_statement" => {
                let e = named_children(node)
                    .into_iter()
                    .next()
                    .ok_or((pos(node), "empty statement".to_string()))?;
                out.push(Stmt::Expr(self.expr(e)?));
            }
            "local_variable_declaration" => {
                let ty = self.ty(node
                    .child_by_field_name("type")
                    .expect("declarations have types"));
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
                    out.push(Stmt::Local(name, ty.clone(), init));
                }
            }
            "if_statement" => {
                let condition = self.expr(
                    node.child_by_field_name("condition")
                        .expect("if has a condition"),
                )?;
                let branch = |n: Option<Node>| -> Result<Vec<Stmt>> {
                    let mut stmts = Vec::new();
                    if let Some(n) = n {
                        self.statement(n, &mut stmts)?;
                    }
                    Ok(stmts)
                };
                let then = branch(node.child_by_field_name("consequence"))?;
                let otherwise = branch(node.child_by_field_name("alternative"))?;
                out.push(Stmt::If(condition, then, otherwise));
            }
            "return_statement" => {
                let value = named_children(node)
                    .into_iter()
                    .next()
                    .map(|e| self.expr(e))
                    .transpose()?;
                out.push(Stmt::Return(value));
            }
            ";" | "empty_statement" => {}
            "for_statement" | "enhanced_for_statement" | "while_statement" | "do_statement" => {
                return fail(node, "loops are not allowed in BTrace scripts");
            }
            "try_statement" | "try_with_resources_statement" | "throw_statement" => {
                return fail(
                    node,
                    "try, catch and throw are not allowed in BTrace scripts",
                );
            }
            "synchronized_statement" => {
                return fail(
                    node,
                    "synchronized blocks are not allowed in BTrace scripts",
                );
            }
            other => {
                return fail(
                    node,
                    format!("{} is not allowed in BTrace scripts", describe_kind(other)),
                );
            }
        }
        Ok(())
    }

    fn expr(&self, node: Node) -> Result<Expr> {
        let at = pos(node);
        let child = |field: &str| -> Result<Node> {
            node.child_by_field_name(field)
                .ok_or((at, format!("incomplete {}", describe_kind(node.kind()))))
        };
        let boxed = |field: &str| -> Result<Box<Expr>> { Ok(Box::new(self.expr(child(field)?)?)) };
        let kind = match node.kind() {
            "parenthesized_expression" => {
                let inner = named_children(node)
                    .into_iter()
                    .next()
                    .ok_or((at, "empty parentheses".to_string()))?;
                return self.expr(inner);
            }
            "identifier" => ExprKind::Name(self.text(node).to_string()),
            "true" => ExprKind::Literal(Literal::Bool(true)),
            "false" => ExprKind::Literal(Literal::Bool(false)),
            "null_literal" => ExprKind::Literal(Literal::Null),
            "decimal_integer_literal"
            | "hex_integer_literal"
            | "octal_integer_literal"
            | "binary_integer_literal" => ExprKind::Literal(Literal::Int(
                integer(self.text(node)).ok_or((at, "bad integer literal".to_string()))?,
            )),
            "decimal_floating_point_literal" | "hex_floating_point_literal" => {
                let t = self.text(node).replace('_', "");
                let t = t.trim_end_matches(['f', 'F', 'd', 'D']);
                ExprKind::Literal(Literal::Float(
                    t.parse()
                        .map_err(|_| (at, "bad floating-point literal".to_string()))?,
                ))
            }
            "string_literal" => ExprKind::Literal(Literal::Str(unquote(self.text(node)))),
            "character_literal" => {
                let c = unquote(self.text(node));
                ExprKind::Literal(Literal::Int(c.chars().next().map_or(0, |c| c as i64)))
            }
            "binary_expression" => {
                let op = self.text(child("operator")?).to_string();
                ExprKind::Binary(op, boxed("left")?, boxed("right")?)
            }
            "unary_expression" => {
                let op = self.text(child("operator")?).to_string();
                ExprKind::Unary(op, boxed("operand")?)
            }
            "update_expression" => {
                let operand = named_children(node)
                    .into_iter()
                    .next()
                    .ok_or((at, "bad ++/--".to_string()))?;
                let name = self.variable(operand)?;
                let whole = self.text(node);
                let step = if whole.contains("++") { 1 } else { -1 };
                let postfix = !whole.trim_start().starts_with(['+', '-']);
                ExprKind::Step(name, step, postfix)
            }
            "assignment_expression" => {
                let name = self.variable(child("left")?)?;
                let op = self.text(child("operator")?).to_string();
                ExprKind::Assign(name, op, boxed("right")?)
            }
            "ternary_expression" => ExprKind::Conditional(
                boxed("condition")?,
                boxed("consequence")?,
                boxed("alternative")?,
            ),
            "cast_expression" => ExprKind::Cast(self.ty(child("type")?), boxed("value")?),
            "instanceof_expression" => {
                let ty = child("right")?;
                ExprKind::InstanceOf(boxed("left")?, self.text(ty).to_string())
            }
            "array_access" => ExprKind::Index(boxed("array")?, boxed("index")?),
            "field_access" => {
                let whole = self.text(node);
                let object = self.text(child("object")?);
                if is_api_class(object.rsplit('.').next().unwrap_or(object))
                    || object.ends_with("Kind")
                {
                    ExprKind::Constant(whole.rsplit('.').next().unwrap_or(whole).to_string())
                } else {
                    let field = self.text(child("field")?).to_string();
                    ExprKind::FieldOf(boxed("object")?, field)
                }
            }
            "method_invocation" => self.call(node)?,
            "object_creation_expression" | "array_creation_expression" => {
                return fail(
                    node,
                    "creating objects (new) is not allowed in BTrace scripts",
                );
            }
            "lambda_expression" | "method_reference" => {
                return fail(
                    node,
                    "lambdas and method references are not allowed in BTrace scripts",
                );
            }
            "this" | "super" => {
                return fail(
                    node,
                    "a BTrace script has no instance: this and super are not allowed",
                )
            }
            other => {
                return fail(
                    node,
                    format!("{} is not allowed in BTrace scripts", describe_kind(other)),
                )
            }
        };
        Ok(Expr { kind, at })
    }

    /// The variable an assignment or `++` writes.
    fn variable(&self, node: Node) -> Result<String> {
        match node.kind() {
            "identifier" => Ok(self.text(node).to_string()),
            _ => fail(node, "only the script's fields and locals can be assigned"),
        }
    }

    fn call(&self, node: Node) -> Result<ExprKind> {
        let name = self.text(node.child_by_field_name("name").expect("calls have names"));
        let args = node
            .child_by_field_name("arguments")
            .map(named_children)
            .unwrap_or_default()
            .into_iter()
            .filter(|n| !n.kind().ends_with("comment"))
            .map(|n| self.expr(n))
            .collect::<Result<Vec<_>>>()?;
        match node.child_by_field_name("object") {
            None => Ok(ExprKind::Own(name.to_string(), args)),
            Some(object) => {
                let class = self.text(object);
                let simple = class.rsplit('.').next().unwrap_or(class);
                if !is_api_class(simple) {
                    return fail(node, format!("calls to application methods ({class}.{name}) are not allowed: only BTraceUtils functions and the script's own methods"));
                }
                if !builtins::exists(name) {
                    return fail(
                        node,
                        format!("{simple}.{name} is not a BTraceUtils function jtap knows"),
                    );
                }
                Ok(ExprKind::Builtin(name.to_string(), args))
            }
        }
    }
}

/// BTrace's API classes whose static functions and constants scripts use.
fn is_api_class(name: &str) -> bool {
    matches!(
        name,
        "BTraceUtils"
            | "Strings"
            | "Threads"
            | "Time"
            | "Sys"
            | "Collections"
            | "Atomic"
            | "Aggregations"
            | "AggregationFunction"
            | "Numbers"
            | "Reflective"
            | "Profiling"
            | "Kind"
            | "Where"
            | "Memory"
            | "Env"
            | "VM"
            | "Export"
    )
}

fn describe_kind(kind: &str) -> String {
    kind.replace('_', " ")
}

fn unquote(literal: &str) -> String {
    let inner = literal
        .strip_prefix(['"', '\''])
        .and_then(|t| t.strip_suffix(['"', '\'']))
        .unwrap_or(literal);
    let mut out = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('b') => out.push('\u{8}'),
            Some('f') => out.push('\u{c}'),
            Some('0') => out.push('\0'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                if let Some(c) = u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    out.push(c);
                }
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    out
}

fn integer(literal: &str) -> Option<i64> {
    let t = literal.replace('_', "");
    let t = t.trim_end_matches(['l', 'L']);
    if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        return u64::from_str_radix(hex, 16).ok().map(|n| n as i64);
    }
    if let Some(bin) = t.strip_prefix("0b").or_else(|| t.strip_prefix("0B")) {
        return u64::from_str_radix(bin, 2).ok().map(|n| n as i64);
    }
    if t.len() > 1 && t.starts_with('0') {
        return u64::from_str_radix(&t[1..], 8).ok().map(|n| n as i64);
    }
    t.parse().ok()
}

/// Whether statements call `jstack` (the probe then captures stacks).
fn calls_stack(body: &[Stmt]) -> bool {
    let mut found = false;
    visit_stmts(body, &mut |e| {
        if let ExprKind::Builtin(name, _) | ExprKind::Own(name, _) = &e.kind {
            found |= name == "jstack" || name == "jstackStr";
        }
    });
    found
}

/// Whether `method` calls `sizeof`, and checks that each call measures a parameter of a
/// handler that holds one of the probed method's objects (`@Self`, an argument, `@Return`,
/// `@TargetInstance`): the agent measures those as it captures them, and nothing else.
fn measures(method: &Method, handler: bool) -> Result<bool> {
    let mut found = Ok(false);
    visit_stmts(&method.body, &mut |e| {
        let (ExprKind::Builtin(name, args) | ExprKind::Own(name, args)) = &e.kind else {
            return;
        };
        if name != "sizeof" || found.is_err() {
            return;
        }
        let measured = match args.as_slice() {
            [Expr {
                kind: ExprKind::Name(arg),
                ..
            }] => method.params.iter().any(|p| {
                &p.name == arg
                    && matches!(
                        p.role,
                        Role::This | Role::Arg(_) | Role::Return | Role::TargetInstance
                    )
            }),
            _ => false,
        };
        found = match measured && handler {
            true => Ok(true),
            false => Err((
                e.at,
                "sizeof measures a handler's parameter holding one of the probed method's objects (@Self, an argument, @Return or @TargetInstance)".into(),
            )),
        };
    });
    found
}

fn visit_stmts(stmts: &[Stmt], f: &mut dyn FnMut(&Expr)) {
    for s in stmts {
        match s {
            Stmt::Local(_, _, e) | Stmt::Return(e) => {
                if let Some(e) = e {
                    visit_expr(e, f);
                }
            }
            Stmt::Expr(e) => visit_expr(e, f),
            Stmt::If(c, a, b) => {
                visit_expr(c, f);
                visit_stmts(a, f);
                visit_stmts(b, f);
            }
            Stmt::Block(b) => visit_stmts(b, f),
        }
    }
}

fn visit_expr(e: &Expr, f: &mut dyn FnMut(&Expr)) {
    f(e);
    match &e.kind {
        ExprKind::Binary(_, a, b) | ExprKind::Index(a, b) => {
            visit_expr(a, f);
            visit_expr(b, f);
        }
        ExprKind::Unary(_, a)
        | ExprKind::Assign(_, _, a)
        | ExprKind::Cast(_, a)
        | ExprKind::InstanceOf(a, _)
        | ExprKind::FieldOf(a, _) => visit_expr(a, f),
        ExprKind::Conditional(a, b, c) => {
            visit_expr(a, f);
            visit_expr(b, f);
            visit_expr(c, f);
        }
        ExprKind::Builtin(_, args) | ExprKind::Own(_, args) => {
            args.iter().for_each(|a| visit_expr(a, f))
        }
        ExprKind::Literal(_) | ExprKind::Name(_) | ExprKind::Constant(_) | ExprKind::Step(..) => {}
    }
}

/// The checks that need the whole script: names resolve, own methods exist and are not
/// recursive, writes go to fields or locals.
struct Checker<'a> {
    script: &'a Script,
    fields: HashSet<&'a str>,
    methods: HashMap<&'a str, &'a Method>,
}

impl<'a> Checker<'a> {
    fn new(script: &'a Script) -> Checker<'a> {
        Checker {
            script,
            fields: script.fields.iter().map(|f| f.name.as_str()).collect(),
            methods: script
                .methods
                .iter()
                .map(|m| (m.name.as_str(), m))
                .collect(),
        }
    }

    fn check(&self) -> Result<()> {
        let field_inits: Vec<Stmt> = self
            .script
            .fields
            .iter()
            .filter_map(|f| f.init.clone().map(Stmt::Expr))
            .collect();
        self.body(&field_inits, &[])?;
        self.body(&self.script.static_init, &[])?;
        for method in self
            .script
            .handlers
            .iter()
            .map(|h| &h.method)
            .chain(&self.script.methods)
        {
            let params: Vec<&str> = method.params.iter().map(|p| p.name.as_str()).collect();
            self.body(&method.body, &params)?;
        }
        for method in &self.script.methods {
            self.no_cycle(method, &mut Vec::new())?;
        }
        Ok(())
    }

    fn body(&self, stmts: &[Stmt], params: &[&str]) -> Result<()> {
        let mut scope: Vec<String> = params.iter().map(|p| p.to_string()).collect();
        self.stmts(stmts, &mut scope)
    }

    fn stmts(&self, stmts: &[Stmt], scope: &mut Vec<String>) -> Result<()> {
        let mark = scope.len();
        for s in stmts {
            match s {
                Stmt::Local(name, _, init) => {
                    if let Some(e) = init {
                        self.expr(e, scope)?;
                    }
                    scope.push(name.clone());
                }
                Stmt::Expr(e) => self.expr(e, scope)?,
                Stmt::Return(e) => {
                    if let Some(e) = e {
                        self.expr(e, scope)?;
                    }
                }
                Stmt::If(c, a, b) => {
                    self.expr(c, scope)?;
                    self.stmts(a, scope)?;
                    self.stmts(b, scope)?;
                }
                Stmt::Block(b) => self.stmts(b, scope)?,
            }
        }
        scope.truncate(mark);
        Ok(())
    }

    fn known(&self, name: &str, scope: &[String]) -> bool {
        scope.iter().any(|s| s == name) || self.fields.contains(name)
    }

    fn expr(&self, e: &Expr, scope: &[String]) -> Result<()> {
        let mut problem = None;
        visit_expr(e, &mut |e| {
            if problem.is_some() {
                return;
            }
            problem = match &e.kind {
                ExprKind::Name(n) | ExprKind::Assign(n, _, _) | ExprKind::Step(n, _, _)
                    if !self.known(n, scope) =>
                {
                    Some((e.at, format!("cannot find symbol: {n}")))
                }
                ExprKind::Own(name, _) if !self.methods.contains_key(name.as_str()) => {
                    if builtins::exists(name) {
                        None
                    } else {
                        Some((e.at, format!("{name} is neither a BTraceUtils function jtap knows nor a method of the script (calls to application methods are not allowed)")))
                    }
                }
                _ => None,
            };
        });
        problem.map_or(Ok(()), Err)
    }

    /// Fails when `method` calls itself, directly or through others.
    fn no_cycle(&self, method: &'a Method, path: &mut Vec<&'a str>) -> Result<()> {
        if path.contains(&method.name.as_str()) {
            return Err((
                method.at,
                format!("recursion is not allowed: {} calls itself", method.name),
            ));
        }
        path.push(&method.name);
        let mut callees = Vec::new();
        visit_stmts(&method.body, &mut |e| {
            if let ExprKind::Own(name, _) = &e.kind {
                if let Some(m) = self.methods.get(name.as_str()) {
                    callees.push(*m);
                }
            }
        });
        for callee in callees {
            self.no_cycle(callee, path)?;
        }
        path.pop();
        Ok(())
    }
}

/// Whether a parameter of type `ty` takes an exception (`Throwable`, `Exception`, …).
fn is_throwable(ty: &Type) -> bool {
    matches!(ty, Type::Object(t) if t.ends_with("Throwable") || t.ends_with("Exception"))
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let throw = error("@OnMethod(clazz=\"a.B\", method=\"run\", location=@Location(Kind.THROW))\npublic static void h() {}");
        assert!(throw.contains("location Kind.THROW is not supported yet (ENTRY, RETURN, ERROR, CALL, LINE, NEW, NEWARRAY, SYNC_ENTRY, SYNC_EXIT, FIELD_GET and FIELD_SET are)"), "{throw}");
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
        assert!(handler("x = 1;").contains("cannot find symbol: x"));
        assert!(
            handler("println(\"a\")").starts_with("S.java:6:"),
            "syntax error"
        );
        assert!(error("static void a() { b(); }\nstatic void b() { a(); }")
            .contains("recursion is not allowed"));
        assert!(error("int x;").contains("fields of a BTrace script must be static"));
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
                .contains("@Duration needs location")
        );
    }
}
