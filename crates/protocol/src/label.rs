//! Request labels (`by=`): while a thread runs inside an entry method, the samples every
//! engine takes on it carry a label: the entry method's name, or a key read from its
//! receiver or arguments (`arg1`, `this.sql`, `arg2.uri.path`) without running application
//! code. Several entries are separated by spaces (method patterns hold none):
//! `by=org.eclipse.jetty.server.Server::handle=arg1 org.h2.command.Command::executeQuery`.

use std::fmt;

use crate::trace::MethodPattern;

/// Where a key's value path starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Root {
    /// The entry method's receiver.
    This,
    /// Its argument of this number, from 1.
    Arg(u8),
}

/// A value read from an entry call: a root and the fields followed from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValuePath {
    /// Where the path starts.
    pub root: Root,
    /// Field names followed in turn (declared in the object's class or a superclass).
    pub fields: Vec<String>,
}

impl ValuePath {
    /// Parses `this`, `argN` (N from 1), each optionally followed by `.field` steps.
    pub fn parse(text: &str) -> Result<ValuePath, String> {
        let fail = |why: &str| format!("bad key {text:?}: {why}");
        let mut steps = text.split('.');
        let root = match steps.next().unwrap_or_default() {
            "this" => Root::This,
            arg => match arg.strip_prefix("arg").map(str::parse::<u8>) {
                Some(Ok(n)) if n >= 1 => Root::Arg(n),
                _ => {
                    return Err(fail(
                        "it starts with this or argN (arg1 is the first argument)",
                    ))
                }
            },
        };
        let fields: Vec<String> = steps.map(str::to_string).collect();
        if let Some(bad) = fields.iter().find(|f| !is_java_identifier(f)) {
            return Err(fail(&format!("{bad:?} is not a field name")));
        }
        Ok(ValuePath { root, fields })
    }
}

impl fmt::Display for ValuePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.root {
            Root::This => f.write_str("this")?,
            Root::Arg(n) => write!(f, "arg{n}")?,
        }
        self.fields
            .iter()
            .try_for_each(|field| write!(f, ".{field}"))
    }
}

fn is_java_identifier(text: &str) -> bool {
    let mut chars = text.chars();
    chars
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_alphanumeric() || c == '_' || c == '$')
}

/// One `by=` entry: the method whose calls label their thread, and the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelBy {
    /// The entry methods.
    pub entry: MethodPattern,
    /// The label's value; the entry method's name when absent.
    pub key: Option<ValuePath>,
}

impl LabelBy {
    /// Parses `ENTRY[=KEY]`.
    pub fn parse(text: &str) -> Result<LabelBy, String> {
        let (entry, key) = match text.split_once('=') {
            Some((entry, key)) => (entry, Some(ValuePath::parse(key)?)),
            None => (text, None),
        };
        let entry = MethodPattern::parse(entry)?;
        if entry.method.is_none() {
            return Err(format!(
                "bad entry {text:?}: name its method (Class::method), whose calls label the samples"
            ));
        }
        Ok(LabelBy { entry, key })
    }

    /// Parses entries separated by spaces.
    pub fn parse_list(text: &str) -> Result<Vec<LabelBy>, String> {
        let entries: Vec<LabelBy> = text
            .split(' ')
            .filter(|t| !t.is_empty())
            .map(LabelBy::parse)
            .collect::<Result<_, _>>()?;
        match entries.is_empty() {
            true => Err("an entry method: Class::method[=KEY]".into()),
            false => Ok(entries),
        }
    }
}

impl fmt::Display for LabelBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.entry)?;
        match &self.key {
            Some(key) => write!(f, "={key}"),
            None => Ok(()),
        }
    }
}

/// The text of a `by=` list, as [`LabelBy::parse_list`] reads it.
pub fn list_text(entries: &[LabelBy]) -> String {
    entries
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_entries_with_and_without_keys() {
        let list =
            LabelBy::parse_list("a.Server::handle=arg1 b.Cmd::run=this.sql.text c.X::y").unwrap();
        assert_eq!(list.len(), 3);
        assert_eq!(list[0].key.as_ref().unwrap().root, Root::Arg(1));
        assert_eq!(
            list[1].key.as_ref().unwrap().fields,
            vec!["sql".to_string(), "text".to_string()]
        );
        assert!(list[2].key.is_none());
        assert_eq!(
            list_text(&list),
            "a.Server::handle=arg1 b.Cmd::run=this.sql.text c.X::y"
        );
    }

    #[test]
    fn refuses_what_it_cannot_read() {
        for (text, says) in [
            ("a.B::c=arg0", "arg1 is the first"),
            ("a.B::c=that.x", "starts with this or argN"),
            ("a.B::c=this.1x", "not a field name"),
            ("a.B", "name its method"),
            ("", "an entry method"),
        ] {
            let error = LabelBy::parse_list(text).unwrap_err();
            assert!(error.contains(says), "{text}: {error}");
        }
    }
}
