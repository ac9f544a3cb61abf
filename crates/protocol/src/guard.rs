//! The text form of a [`Guard`] in a tracing plan (`if:` after the `p:` it applies to):
//! prefix calls without spaces, e.g. `all(gt(a0,100),nonnull(a1))`.
//!
//! - comparisons `eq`, `ne`, `lt`, `le`, `gt`, `ge` of two operands: `aN` (argument N),
//!   a decimal integer, or `r` and the 16 hex digits of a double's IEEE 754 bits (exact);
//! - `null(aN)`, `nonnull(aN)`; `not(g)`, `all(g,…)`, `any(g,…)`.

use jtap_classfile::guard::{Comparison, Guard, Operand};

const COMPARISONS: [(Comparison, &str); 6] = [
    (Comparison::Eq, "eq"),
    (Comparison::Ne, "ne"),
    (Comparison::Lt, "lt"),
    (Comparison::Le, "le"),
    (Comparison::Gt, "gt"),
    (Comparison::Ge, "ge"),
];

/// Writes `guard` in its text form.
pub fn to_text(guard: &Guard) -> String {
    let list = |guards: &[Guard]| guards.iter().map(to_text).collect::<Vec<_>>().join(",");
    match guard {
        Guard::Compare(left, comparison, right) => {
            let name = COMPARISONS
                .iter()
                .find(|(c, _)| c == comparison)
                .map_or("eq", |(_, n)| n);
            format!("{name}({},{})", operand_text(left), operand_text(right))
        }
        Guard::Null(n, true) => format!("null(a{n})"),
        Guard::Null(n, false) => format!("nonnull(a{n})"),
        Guard::Not(inner) => format!("not({})", to_text(inner)),
        Guard::All(guards) => format!("all({})", list(guards)),
        Guard::Any(guards) => format!("any({})", list(guards)),
    }
}

fn operand_text(operand: &Operand) -> String {
    match operand {
        Operand::Arg(n) => format!("a{n}"),
        Operand::Integer(v) => v.to_string(),
        Operand::Real(bits) => format!("r{bits:016x}"),
    }
}

/// Reads a guard from its text form; the error says what is wrong.
pub fn parse(text: &str) -> Result<Guard, String> {
    let (guard, rest) = guard(text).map_err(|e| format!("bad guard {text:?}: {e}"))?;
    match rest {
        "" => Ok(guard),
        _ => Err(format!("bad guard {text:?}: {rest:?} after its end")),
    }
}

/// Guards nest at most this deep.
const MAX_DEPTH: usize = 64;

fn guard(text: &str) -> Result<(Guard, &str), String> {
    nested(text, 0)
}

fn nested(text: &str, depth: usize) -> Result<(Guard, &str), String> {
    if depth > MAX_DEPTH {
        return Err("nested too deep".into());
    }
    let (name, rest) = text
        .split_once('(')
        .ok_or_else(|| format!("{text:?} is not a call"))?;
    let mut args: Vec<&str> = Vec::new();
    let mut guards: Vec<Guard> = Vec::new();
    let takes_guards = matches!(name, "not" | "all" | "any");
    let mut rest = rest;
    loop {
        if let Some(after) = rest.strip_prefix(')') {
            rest = after;
            break;
        }
        if takes_guards {
            let (g, after) = nested(rest, depth + 1)?;
            guards.push(g);
            rest = after;
        } else {
            let end = rest
                .find([',', ')'])
                .ok_or_else(|| format!("{name}( is not closed"))?;
            args.push(&rest[..end]);
            rest = &rest[end..];
        }
        rest = rest.strip_prefix(',').unwrap_or(rest);
    }
    let arg = |n: &str| -> Result<u16, String> {
        n.strip_prefix('a')
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| format!("{n:?} is not an argument"))
    };
    let guard = match (name, args.as_slice(), guards.len()) {
        ("null" | "nonnull", [a], 0) => Guard::Null(arg(a)?, name == "null"),
        ("not", [], 1) => Guard::Not(Box::new(guards.remove(0))),
        ("all", [], _) => Guard::All(guards),
        ("any", [], _) => Guard::Any(guards),
        (_, [left, right], 0) => {
            let comparison = COMPARISONS
                .iter()
                .find(|(_, n)| *n == name)
                .map(|(c, _)| *c)
                .ok_or_else(|| format!("unknown test {name:?}"))?;
            Guard::Compare(operand(left)?, comparison, operand(right)?)
        }
        _ => return Err(format!("{name} takes other arguments")),
    };
    Ok((guard, rest))
}

fn operand(text: &str) -> Result<Operand, String> {
    if let Some(n) = text.strip_prefix('a') {
        return n
            .parse()
            .map(Operand::Arg)
            .map_err(|_| format!("{text:?} is not an argument"));
    }
    if let Some(bits) = text.strip_prefix('r') {
        return u64::from_str_radix(bits, 16)
            .map(Operand::Real)
            .map_err(|_| format!("{text:?} is not a double's bits"));
    }
    text.parse()
        .map(Operand::Integer)
        .map_err(|_| format!("{text:?} is not an operand"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guards_read_back_what_they_write() {
        let guards = [
            Guard::Compare(Operand::Arg(0), Comparison::Gt, Operand::Integer(-100)),
            Guard::All(vec![
                Guard::Null(2, false),
                Guard::Not(Box::new(Guard::Any(vec![
                    Guard::Compare(
                        Operand::Real(2.5f64.to_bits()),
                        Comparison::Le,
                        Operand::Arg(1),
                    ),
                    Guard::Null(0, true),
                ]))),
                Guard::All(Vec::new()),
            ]),
        ];
        for g in guards {
            let text = to_text(&g);
            assert!(!text.contains(' ') && !text.is_empty(), "{text}");
            assert_eq!(parse(&text), Ok(g), "{text}");
        }
        assert_eq!(
            to_text(&Guard::Compare(
                Operand::Arg(0),
                Comparison::Gt,
                Operand::Integer(100)
            )),
            "gt(a0,100)"
        );
    }

    #[test]
    fn malformed_guards_are_refused() {
        for bad in [
            "",
            "gt(a0)",
            "gt(a0,1",
            "bogus(a0,1)",
            "null(5)",
            "not()",
            "gt(a0,x)",
            "gt(a0,1)x",
            "all(gt(a0,1)",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} accepted");
        }
        let deep = "not(".repeat(100) + "gt(a0,1)" + &")".repeat(100);
        assert!(parse(&deep).is_err());
    }
}
