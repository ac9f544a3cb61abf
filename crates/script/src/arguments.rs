//! A script's arguments as BTrace keeps them (its `ArgsMap`): the words after the script,
//! `name=value` by name, and `${name}` in annotation values replaced by the value.

/// The words given after the script.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Arguments {
    /// Names and values in the order first given (a name given again takes the new value).
    pairs: Vec<(String, String)>,
}

impl Arguments {
    /// BTrace's reading of the words: `name=value` (one `=`) is a name with its value; any
    /// other word (no `=`, or several) is a name whose value is empty.
    pub fn new(words: &[String]) -> Arguments {
        let mut arguments = Arguments::default();
        for word in words {
            let (name, value) = match word.split('=').collect::<Vec<_>>()[..] {
                [name, value] => (name, value),
                _ => (word.as_str(), ""),
            };
            match arguments.pairs.iter_mut().find(|(n, _)| n == name) {
                Some(pair) => pair.1 = value.to_string(),
                None => arguments.pairs.push((name.to_string(), value.to_string())),
            }
        }
        arguments
    }

    /// The value given for `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// `text` with each `${name}` replaced by the value of argument `name`; one no argument
    /// names stays as written (BTrace's `ArgsMap.template`).
    pub fn template(&self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some((before, name, after)) = reference(rest) {
            out.push_str(before);
            match self.get(name) {
                Some(value) => out.push_str(value),
                None => {
                    out.push_str("${");
                    out.push_str(name);
                    out.push('}');
                }
            }
            rest = after;
        }
        out.push_str(rest);
        out
    }
}

/// The name of the first `${name}` left in `text`, if any.
pub fn unresolved(text: &str) -> Option<&str> {
    reference(text).map(|(_, name, _)| name)
}

/// The first `${name}` of `text` (shortest, on one line): the text before, the name, the
/// text after.
fn reference(text: &str) -> Option<(&str, &str, &str)> {
    let mut from = 0;
    loop {
        let start = from + text[from..].find("${")?;
        let body = &text[start + 2..];
        let end = body.find(['}', '\n', '\r'])?;
        if body.as_bytes()[end] == b'}' {
            return Some((&text[..start], &body[..end], &body[end + 1..]));
        }
        from = start + 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arguments(words: &[&str]) -> Arguments {
        Arguments::new(&words.iter().map(|w| w.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn words_are_names_and_values_as_btrace_reads_them() {
        let a = arguments(&["c=a.B", "m=run", "flag", "x=1=2", "m=stop"]);
        assert_eq!(a.get("c"), Some("a.B"));
        assert_eq!(a.get("m"), Some("stop"));
        assert_eq!(a.get("flag"), Some(""));
        assert_eq!(a.get("x=1=2"), Some(""));
        assert_eq!(a.get("x"), None);
    }

    #[test]
    fn references_are_replaced_and_unknown_ones_kept() {
        let a = arguments(&["c=a.B", "m=run"]);
        assert_eq!(a.template("${c}"), "a.B");
        assert_eq!(a.template("/${c}\\$.*/::${m}x"), "/a.B\\$.*/::runx");
        assert_eq!(a.template("${d}.${m}"), "${d}.run");
        assert_eq!(a.template("$c ${ no end"), "$c ${ no end");
        assert_eq!(unresolved(&a.template("${d}.${m}")), Some("d"));
        assert_eq!(unresolved("a.B"), None);
        assert_eq!(reference("${a\n${b}"), Some(("${a\n", "b", "")));
    }
}
