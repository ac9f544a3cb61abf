//! One-liners for `jtap trace`: `--if 'args[0] > 100 && duration > 10ms'` and `--print
//! 'args[0], this.name, return'`, compiled by the same compiler as scripts, as one handler
//! of a script jtap writes around them, so they obey the same rules (no calls but
//! `BTraceUtils` functions, nothing that changes the application).
//!
//! Names: `args` (the arguments), `this`, `return` (the value returned), `duration` (ns),
//! `method`, `clazz` (the class), `thread` (its name). Durations may carry a unit: `10ms`,
//! `2s`, `500us`, `100ns`.

use regex::Regex;

use crate::ast::Script;
use crate::compile::compile;

/// The handler's parameters and locals, which the expressions see by these names.
const HEAD: &str = "import static com.sun.btrace.BTraceUtils.*;
@BTrace public class OneLiner {
@OnMethod(clazz = \"-\", method = \"-\", location = @Location(Kind.RETURN))
public static void call(@Self Object self, AnyType[] args, @Return Object retval, @Duration long duration, @ProbeMethodName String method, @ProbeClassName String clazz) {
String thread = name(currentThread());
if (";

/// Compiles a condition (default: every call) and a comma-separated list of values to print
/// (default: nothing). Run the script's handler 0 on a call: it prints the values (joined
/// by `, `, then a newline) when the condition holds, and nothing otherwise.
pub fn one_liner(condition: Option<&str>, print: Option<&str>) -> Result<Script, String> {
    let condition_text = rewrite(condition.unwrap_or("true"));
    let print_text = rewrite(print.unwrap_or(""));
    // Each expression starts a line of its own, so that an error's line says which option
    // it is in and its column where.
    let source = format!("{HEAD}\n{condition_text}\n) {{ __print(\n{print_text}\n); }}\n}}\n}}\n");
    let condition_line = HEAD.lines().count() + 1;
    let print_line = condition_line + 2;
    compile(&source, "one-liner").map_err(|e| {
        let option = if e.at.line == print_line {
            "--print"
        } else if e.at.line == condition_line {
            "--if"
        } else {
            // An error the wrapping shows (an unbalanced parenthesis): name both.
            return format!("--if/--print: {}", e.message);
        };
        format!("{option}: column {}: {}", e.at.col, e.message)
    })
}

/// A run-time error of a one-liner's handler (`one-liner:LINE:COL: message (in call)`) as
/// the option and column it comes from.
pub fn one_liner_error(error: &str) -> String {
    let condition_line = HEAD.lines().count() + 1;
    let parsed = error.strip_prefix("one-liner:").and_then(|rest| {
        let (line, rest) = rest.split_once(':')?;
        let (col, message) = rest.split_once(": ")?;
        let option = match line.parse::<usize>().ok()? {
            l if l == condition_line => "--if",
            l if l == condition_line + 2 => "--print",
            _ => return None,
        };
        let message = message.strip_suffix(" (in call)").unwrap_or(message);
        Some(format!("{option}: column {col}: {message}"))
    });
    parsed.unwrap_or_else(|| error.to_string())
}

/// The one-liner's words as Java: `this` and `return` (keywords) become the handler's
/// `self` and `retval`; `10ms` becomes nanoseconds. String literals are left alone.
fn rewrite(text: &str) -> String {
    let words = Regex::new(r#""(?:[^"\\]|\\.)*"|\b(this|return)\b|\b(\d+)(ns|us|ms|s)\b"#)
        .expect("a valid regular expression");
    words
        .replace_all(text, |c: &regex::Captures| {
            if let Some(word) = c.get(1) {
                return match word.as_str() {
                    "this" => "self".to_string(),
                    _ => "retval".to_string(),
                };
            }
            if let (Some(n), Some(unit)) = (c.get(2), c.get(3)) {
                let scale: u64 = match unit.as_str() {
                    "ns" => 1,
                    "us" => 1_000,
                    "ms" => 1_000_000,
                    _ => 1_000_000_000,
                };
                let n: u64 = n.as_str().parse().unwrap_or(0);
                return format!("{}L", n.saturating_mul(scale));
            }
            c[0].to_string()
        })
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::firing::Fired;
    use crate::machine::Machine;

    fn run(condition: Option<&str>, print: Option<&str>, call: &Fired) -> String {
        let script = one_liner(condition, print).unwrap_or_else(|e| panic!("{e}"));
        let mut machine = Machine::new(&script, "one-liner", Vec::new(), None);
        machine.fire(0, call);
        let errors = machine.take_errors();
        assert!(errors.is_empty(), "{errors:?}");
        machine.take_output()
    }

    #[test]
    fn conditions_and_projections_over_a_call() {
        let call = Fired {
            class: "app.Cache".into(),
            method: "get".into(),
            duration_ns: 15_000_000,
            values: vec![
                "app.Cache@1f{name=\"main, hot\", size=3}".into(),
                "120".into(),
                "\"key\"".into(),
            ],
            returned: Some("7".into()),
            thread: "worker-1".into(),
            ..Fired::default()
        };
        let when = |c| run(Some(c), None, &call);
        assert_eq!(when("args[0] > 100 && duration > 10ms"), "\n");
        assert_eq!(when("args[0] > 100 && duration > 20ms"), "");
        assert_eq!(when("this.size == 3 && method == \"get\""), "\n");
        assert_eq!(
            run(
                None,
                Some("args[0], this.name, return, thread, clazz + \".\" + method"),
                &call
            ),
            "120, main, hot, 7, worker-1, app.Cache.get\n"
        );
        assert_eq!(
            run(
                Some("args[1] == \"this return 5ms\""),
                Some("args[1]"),
                &call
            ),
            "",
            "words inside strings stay as written"
        );
    }

    #[test]
    fn a_duration_condition_becomes_a_floor_the_agent_applies() {
        let floor = |c: &str| one_liner(Some(c), None).unwrap().handlers[0].duration_floor();
        assert_eq!(floor("args[0] > 1 && duration > 10ms"), Some(10_000_001));
        assert_eq!(
            floor("duration >= 2ms && (duration > 5ms || args[0] == 1)"),
            Some(2_000_000)
        );
        assert_eq!(floor("duration > 1ms || args[0] > 1"), None);
        assert_eq!(floor("duration > 1ms || duration >= 3ms"), Some(1_000_001));
        assert_eq!(floor("args[0] > 1"), None);
    }

    #[test]
    fn run_time_errors_name_the_option_too() {
        let script = one_liner(Some("args[0] / 0 > 1"), Some("this.missing")).unwrap();
        let mut machine = Machine::new(&script, "one-liner", Vec::new(), None);
        let call = Fired {
            values: vec!["a.B@1{x=1}".into(), "5".into()],
            ..Fired::default()
        };
        machine.fire(0, &call);
        let errors: Vec<String> = machine
            .take_errors()
            .iter()
            .map(|e| one_liner_error(e))
            .collect();
        assert_eq!(errors, ["--if: column 1: division by zero"]);
        let script = one_liner(None, Some("this.missing")).unwrap();
        let mut machine = Machine::new(&script, "one-liner", Vec::new(), None);
        machine.fire(0, &call);
        let errors: Vec<String> = machine
            .take_errors()
            .iter()
            .map(|e| one_liner_error(e))
            .collect();
        assert!(
            errors[0].starts_with("--print: column 1: a.B shows no field missing"),
            "{errors:?}"
        );
    }

    #[test]
    fn errors_name_the_option_and_column() {
        assert_eq!(
            one_liner(Some("args[0] >"), None).unwrap_err(),
            "--if: column 10: syntax error: missing identifier"
        );
        assert!(one_liner(None, Some("System.exit(0)"))
            .unwrap_err()
            .starts_with("--print: column 1: calls to application methods"));
        assert!(one_liner(Some("x > 1"), None)
            .unwrap_err()
            .contains("cannot find symbol: x"));
    }
}
