//! Method bodies: the statements and expressions BTrace allows, and their literals.

use tree_sitter::Node;

use super::{fail, named_children, pos, Compiler, Result};
use crate::ast::{Expr, ExprKind, Literal, Stmt};
use crate::builtins;

impl Compiler<'_> {
    pub(super) fn block(&self, node: Node) -> Result<Vec<Stmt>> {
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

    pub(super) fn expr(&self, node: Node) -> Result<Expr> {
        let at = pos(node);
        let child = |field: &str| part(node, field);
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
            "true"
            | "false"
            | "null_literal"
            | "decimal_integer_literal"
            | "hex_integer_literal"
            | "octal_integer_literal"
            | "binary_integer_literal"
            | "decimal_floating_point_literal"
            | "hex_floating_point_literal"
            | "string_literal"
            | "character_literal" => ExprKind::Literal(self.literal(node)?),
            "binary_expression" => {
                let op = self.text(child("operator")?).to_string();
                ExprKind::Binary(op, boxed("left")?, boxed("right")?)
            }
            "unary_expression" => {
                let op = self.text(child("operator")?).to_string();
                ExprKind::Unary(op, boxed("operand")?)
            }
            "update_expression" => self.update(node)?,
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
            "field_access" => self.field_access(node)?,
            "method_invocation" => self.call(node)?,
            _ => return refuse(node),
        };
        Ok(Expr { kind, at })
    }

    /// A literal: `true`, `false`, `null`, a number, a string or a character.
    fn literal(&self, node: Node) -> Result<Literal> {
        let at = pos(node);
        Ok(match node.kind() {
            "true" => Literal::Bool(true),
            "false" => Literal::Bool(false),
            "null_literal" => Literal::Null,
            "decimal_floating_point_literal" | "hex_floating_point_literal" => {
                let t = self.text(node).replace('_', "");
                let t = t.trim_end_matches(['f', 'F', 'd', 'D']);
                Literal::Float(
                    t.parse()
                        .map_err(|_| (at, "bad floating-point literal".to_string()))?,
                )
            }
            "string_literal" => Literal::Str(unquote(self.text(node))),
            "character_literal" => {
                let c = unquote(self.text(node));
                Literal::Int(c.chars().next().map_or(0, |c| c as i64))
            }
            _ => Literal::Int(
                integer(self.text(node)).ok_or((at, "bad integer literal".to_string()))?,
            ),
        })
    }

    /// `++` or `--` on a variable, prefix or postfix.
    fn update(&self, node: Node) -> Result<ExprKind> {
        let operand = named_children(node)
            .into_iter()
            .next()
            .ok_or((pos(node), "bad ++/--".to_string()))?;
        let name = self.variable(operand)?;
        let whole = self.text(node);
        let step = if whole.contains("++") { 1 } else { -1 };
        let postfix = !whole.trim_start().starts_with(['+', '-']);
        Ok(ExprKind::Step(name, step, postfix))
    }

    /// `a.b`: a constant of BTrace's API classes (or of a `…Kind` enum), else a field of an
    /// object.
    fn field_access(&self, node: Node) -> Result<ExprKind> {
        let whole = self.text(node);
        let object = self.text(part(node, "object")?);
        if is_api_class(object.rsplit('.').next().unwrap_or(object)) || object.ends_with("Kind") {
            Ok(ExprKind::Constant(
                whole.rsplit('.').next().unwrap_or(whole).to_string(),
            ))
        } else {
            let field = self.text(part(node, "field")?).to_string();
            let object = Box::new(self.expr(part(node, "object")?)?);
            Ok(ExprKind::FieldOf(object, field))
        }
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
                if self.printers.iter().any(|p| p == class) && matches!(name, "print" | "println") {
                    return Ok(ExprKind::Builtin(name.to_string(), args));
                }
                let simple = class.rsplit('.').next().unwrap_or(class);
                if !is_api_class(simple) {
                    return fail(node, format!("calls to application methods ({class}.{name}) are not allowed: only BTraceUtils functions and the script's own methods"));
                }
                if let Some(why) = builtins::refusal(Some(simple), name) {
                    return fail(node, format!("{simple}.{name} is refused: {why}"));
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

/// The child of `node` in grammar field `field`.
fn part<'t>(node: Node<'t>, field: &str) -> Result<Node<'t>> {
    node.child_by_field_name(field).ok_or((
        pos(node),
        format!("incomplete {}", describe_kind(node.kind())),
    ))
}

/// The error for an expression BTrace does not allow.
fn refuse<T>(node: Node) -> Result<T> {
    match node.kind() {
        "object_creation_expression" | "array_creation_expression" => fail(
            node,
            "creating objects (new) is not allowed in BTrace scripts",
        ),
        "lambda_expression" | "method_reference" => fail(
            node,
            "lambdas and method references are not allowed in BTrace scripts",
        ),
        "this" | "super" => fail(
            node,
            "a BTrace script has no instance: this and super are not allowed",
        ),
        other => fail(
            node,
            format!("{} is not allowed in BTrace scripts", describe_kind(other)),
        ),
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
            | "Counters"
            | "References"
            | "Speculation"
            | "Jfr"
            | "D"
    )
}

pub(super) fn describe_kind(kind: &str) -> String {
    kind.replace('_', " ")
}

pub(super) fn unquote(literal: &str) -> String {
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
