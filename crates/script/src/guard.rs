//! The part of a handler's condition the agent can test in the traced method itself, before
//! anything is captured: comparisons of the method's primitive arguments with each other and
//! with constants, null tests of its reference arguments, and `&&`, `||`, `!` of those. A
//! call the [`Guard`] rejects is never reported, so a false condition on a hot method costs
//! it a few instructions instead of a capture and a trip to the client. The client still
//! evaluates the whole condition: the guard only has to hold whenever the condition does.

use jtap_classfile::guard::{Comparison, Guard, Operand};

use crate::ast::{Expr, ExprKind, Handler, Literal, Param, Role, Stmt, Type};

impl Handler {
    /// A guard on the probed method's arguments that holds whenever this handler does
    /// anything: its body is one `if` without `else` whose condition (or a part of it that
    /// must hold, under `&&`) tests only arguments and constants.
    pub fn argument_guard(&self) -> Option<Guard> {
        self.guard_of_condition(false)
    }

    /// A guard true exactly when the handler's condition is (its body as for
    /// [`Handler::argument_guard`]), when the condition tests nothing but arguments.
    pub fn exact_argument_guard(&self) -> Option<Guard> {
        self.guard_of_condition(true)
    }

    fn guard_of_condition(&self, exact: bool) -> Option<Guard> {
        // Locals first are fine if setting them does nothing else.
        let mut body = self.method.body.iter().skip_while(|s| match s {
            Stmt::Local(_, _, init) => init.as_ref().is_none_or(is_pure),
            _ => false,
        });
        let (Some(Stmt::If(condition, _, otherwise)), None) = (body.next(), body.next()) else {
            return None;
        };
        if !otherwise.is_empty() {
            return None;
        }
        let tests = Tests {
            params: &self.method.params,
        };
        match exact {
            true => tests.exact(condition),
            false => tests.implied(condition),
        }
    }
}

/// Whether evaluating `e` has no effect but its value: literals, names and the functions
/// that only read (a one-liner's `thread`).
fn is_pure(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Literal(_) | ExprKind::Name(_) => true,
        // Unqualified `BTraceUtils` functions are parsed as calls of the script's own.
        ExprKind::Builtin(name, args) | ExprKind::Own(name, args) => {
            matches!(name.as_str(), "name" | "currentThread" | "str" | "strcat")
                && args.iter().all(is_pure)
        }
        _ => false,
    }
}

struct Tests<'a> {
    params: &'a [Param],
}

/// What a name or literal is, for a guard.
enum Term {
    /// A number: an argument or a constant.
    Number(Operand),
    /// A reference argument.
    Reference(u16),
    /// An argument of a type not declared (`args[n]`): the agent tests it as the method
    /// declares it.
    Untyped(u16),
    /// `null`.
    Null,
}

impl Tests<'_> {
    /// A guard that holds whenever `e` is true (parts of an `&&` it cannot test are left
    /// out), or None.
    fn implied(&self, e: &Expr) -> Option<Guard> {
        match &e.kind {
            ExprKind::Binary(op, left, right) if op == "&&" => {
                let parts: Vec<Guard> = [left, right]
                    .into_iter()
                    .filter_map(|side| self.implied(side))
                    .collect();
                match parts.len() {
                    0 => None,
                    1 => parts.into_iter().next(),
                    _ => Some(Guard::All(parts)),
                }
            }
            ExprKind::Binary(op, left, right) if op == "||" => {
                Some(Guard::Any(vec![self.implied(left)?, self.implied(right)?]))
            }
            _ => self.exact(e),
        }
    }

    /// A guard true exactly when `e` is, or None.
    fn exact(&self, e: &Expr) -> Option<Guard> {
        match &e.kind {
            ExprKind::Binary(op, left, right) => match op.as_str() {
                "&&" => Some(Guard::All(vec![self.exact(left)?, self.exact(right)?])),
                "||" => Some(Guard::Any(vec![self.exact(left)?, self.exact(right)?])),
                _ => self.comparison(op, left, right),
            },
            ExprKind::Unary(op, inner) if op == "!" => {
                Some(Guard::Not(Box::new(self.exact(inner)?)))
            }
            ExprKind::Literal(Literal::Bool(true)) => Some(Guard::All(Vec::new())),
            ExprKind::Literal(Literal::Bool(false)) => Some(Guard::Any(Vec::new())),
            // A boolean argument on its own.
            ExprKind::Name(name) => match self.param(name)? {
                (n, Type::Boolean) => Some(Guard::Compare(
                    Operand::Arg(n),
                    Comparison::Ne,
                    Operand::Integer(0),
                )),
                _ => None,
            },
            _ => None,
        }
    }

    fn comparison(&self, op: &str, left: &Expr, right: &Expr) -> Option<Guard> {
        let comparison = match op {
            "==" => Comparison::Eq,
            "!=" => Comparison::Ne,
            "<" => Comparison::Lt,
            "<=" => Comparison::Le,
            ">" => Comparison::Gt,
            ">=" => Comparison::Ge,
            _ => return None,
        };
        match (self.term(left)?, self.term(right)?) {
            (Term::Number(a), Term::Number(b)) => Some(Guard::Compare(a, comparison, b)),
            (Term::Number(a), Term::Untyped(n)) => {
                Some(Guard::Compare(a, comparison, Operand::Arg(n)))
            }
            (Term::Untyped(n), Term::Number(b)) => {
                Some(Guard::Compare(Operand::Arg(n), comparison, b))
            }
            (Term::Reference(n) | Term::Untyped(n), Term::Null)
            | (Term::Null, Term::Reference(n) | Term::Untyped(n)) => match comparison {
                Comparison::Eq => Some(Guard::Null(n, true)),
                Comparison::Ne => Some(Guard::Null(n, false)),
                _ => None,
            },
            _ => None,
        }
    }

    fn term(&self, e: &Expr) -> Option<Term> {
        Some(match &e.kind {
            ExprKind::Literal(Literal::Int(v)) => Term::Number(Operand::Integer(*v)),
            ExprKind::Literal(Literal::Float(v)) => Term::Number(Operand::Real(v.to_bits())),
            ExprKind::Literal(Literal::Null) => Term::Null,
            ExprKind::Unary(op, inner) if op == "-" => match &inner.kind {
                ExprKind::Literal(Literal::Int(v)) => {
                    Term::Number(Operand::Integer(v.checked_neg()?))
                }
                ExprKind::Literal(Literal::Float(v)) => Term::Number(Operand::Real((-v).to_bits())),
                _ => return None,
            },
            // `args[n]` of an `AnyType[]` parameter.
            ExprKind::Index(array, index) => {
                let (ExprKind::Name(name), ExprKind::Literal(Literal::Int(n))) =
                    (&array.kind, &index.kind)
                else {
                    return None;
                };
                let param = self.params.iter().find(|p| &p.name == name)?;
                if param.role != Role::AllArgs {
                    return None;
                }
                Term::Untyped(u16::try_from(*n).ok()?)
            }
            ExprKind::Name(name) => match self.param(name)? {
                (n, Type::Integral(_) | Type::Floating(_)) => Term::Number(Operand::Arg(n)),
                (n, Type::String | Type::Object(_)) => Term::Reference(n),
                _ => return None,
            },
            _ => return None,
        })
    }

    /// The argument a parameter receives (its position) and its declared type.
    fn param(&self, name: &str) -> Option<(u16, Type)> {
        let param = self.params.iter().find(|p| p.name == name)?;
        match param.role {
            Role::Arg(n) => Some((u16::try_from(n).ok()?, param.ty.clone())),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use jtap_classfile::guard::{Comparison, Guard, Operand};

    fn guard_of(body: &str, params: &str) -> Option<Guard> {
        let source = format!(
            "import com.sun.btrace.annotations.*;\nimport static com.sun.btrace.BTraceUtils.*;\n\
             @BTrace public class G {{\n\
             @OnMethod(clazz = \"a.B\", method = \"m\", location = @Location(Kind.RETURN))\n\
             public static void h({params}) {{ {body} }}\n}}\n"
        );
        let script = crate::compile(&source, "G.java").unwrap();
        script.handlers[0].argument_guard()
    }

    #[test]
    fn conditions_on_arguments_become_guards() {
        use Operand::{Arg, Integer};
        assert_eq!(
            guard_of("if (x == -1) { println(\"x\"); }", "int x"),
            Some(Guard::Compare(Arg(0), Comparison::Eq, Integer(-1)))
        );
        assert_eq!(
            guard_of(
                "if (s != null && (n > 2 || !(d < 0.5))) { println(s); }",
                "String s, long n, double d"
            ),
            Some(Guard::All(vec![
                Guard::Null(0, false),
                Guard::Any(vec![
                    Guard::Compare(Arg(1), Comparison::Gt, Integer(2)),
                    Guard::Not(Box::new(Guard::Compare(
                        Arg(2),
                        Comparison::Lt,
                        Operand::Real(0.5f64.to_bits())
                    ))),
                ]),
            ]))
        );
        // The duration is the agent's threshold; the argument part still guards.
        assert_eq!(
            guard_of(
                "if (d > 1000 && flag) { println(d); }",
                "@Duration long d, boolean flag"
            ),
            Some(Guard::Compare(Arg(0), Comparison::Ne, Integer(0)))
        );
    }

    #[test]
    fn one_liners_test_their_arguments_too() {
        let script = crate::one_liner(Some("args[0] > 100 && duration > 10ms"), None).unwrap();
        assert_eq!(
            script.handlers[0].argument_guard(),
            Some(Guard::Compare(
                Operand::Arg(0),
                Comparison::Gt,
                Operand::Integer(100)
            ))
        );
        let script = crate::one_liner(Some("args[1] != null || thread == \"main\""), None).unwrap();
        assert_eq!(script.handlers[0].argument_guard(), None);
        // Exactly: a part it cannot test leaves no exact guard.
        let script = crate::one_liner(Some("args[0] > 100 && duration > 10ms"), None).unwrap();
        assert_eq!(script.handlers[0].exact_argument_guard(), None);
        let script = crate::one_liner(Some("args[0] > 100 || args[1] == null"), None).unwrap();
        assert!(script.handlers[0].exact_argument_guard().is_some());
    }

    #[test]
    fn conditions_it_cannot_test_give_no_guard() {
        for (body, params) in [
            // Something else runs first, or always.
            ("println(x); if (x > 1) { println(x); }", "int x"),
            ("if (x > 1) { println(x); } else { println(0); }", "int x"),
            // Arithmetic, the duration alone, a string's content.
            ("if (x > 3 + x) { println(x); }", "int x"),
            ("if (d > 10) { println(d); }", "@Duration long d"),
            ("if (s == \"a\") { println(s); }", "String s"),
            // Under `||` or `!`, every part must be testable.
            (
                "if (x > 1 || d > 10) { println(x); }",
                "int x, @Duration long d",
            ),
            (
                "if (!(x > 1 && d > 10)) { println(x); }",
                "int x, @Duration long d",
            ),
        ] {
            assert_eq!(guard_of(body, params), None, "{body}");
        }
    }
}
