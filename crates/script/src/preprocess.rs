//! BTrace's C preprocessor (`btrace -I DIR`), for scripts written with `#include` and
//! `#define` (BTrace's `ThreadBean.java` sample and its `btracedefs.h`): `#include "file"`
//! (or `<file>`) from the include directories, object-like `#define NAME text` (continued
//! with `\` at a line's end), `#undef`, and `#ifdef`/`#ifndef`/`#else`/`#endif`. A defined
//! name is replaced, again and again while the replacement holds defined names, wherever it
//! stands as a whole identifier outside string and character literals and comments.
//!
//! Hand-written: the subset is BTrace's (its own preprocessor handles no more), and a C
//! preprocessor crate would accept what BTrace's refuses.
//!
//! The script keeps its line numbers, so that compile errors point into it: each directive
//! becomes an empty line, and the text an included file adds (besides its directives) is
//! joined onto the `#include` line.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Deepest nesting of includes, and of a name's expansion.
const MOST_NESTED: usize = 16;

/// A preprocessing error: the line it is on (1-based) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreprocessError {
    /// The line, in the script (an error in an included file is on its `#include` line).
    pub line: usize,
    /// The message.
    pub message: String,
}

/// Whether `source` has preprocessor directives (a line starting with `#`).
pub fn has_directives(source: &str) -> bool {
    source
        .lines()
        .any(|line| line.trim_start().starts_with('#'))
}

/// `source` preprocessed, includes looked up in `include_dirs` in order.
pub fn preprocess(source: &str, include_dirs: &[PathBuf]) -> Result<String, PreprocessError> {
    let mut state = State {
        defines: HashMap::new(),
        include_dirs,
    };
    let lines = state
        .run(source, 0)
        .map_err(|(line, message)| PreprocessError {
            line: line + 1,
            message,
        })?;
    Ok(lines.join("\n") + "\n")
}

struct State<'d> {
    defines: HashMap<String, String>,
    include_dirs: &'d [PathBuf],
}

/// An error on a line (0-based) of the text being read.
type Failure = (usize, String);

impl State<'_> {
    /// The lines of `source`, one for each of its lines.
    fn run(&mut self, source: &str, depth: usize) -> Result<Vec<String>, Failure> {
        let lines = joined_continuations(source);
        let mut out = Vec::with_capacity(lines.len());
        // Whether each enclosing #ifdef's branch is taken, and whether an #else was seen.
        let mut branches: Vec<(bool, bool)> = Vec::new();
        for (index, line) in lines.iter().enumerate() {
            let active = branches.iter().all(|&(taken, _)| taken);
            let Some(directive) = line.trim_start().strip_prefix('#') else {
                out.push(match active {
                    true => self.expand(line, 0).map_err(|e| (index, e))?,
                    false => String::new(),
                });
                continue;
            };
            let directive = directive.trim();
            let (word, rest) = directive
                .split_once(|c: char| c.is_whitespace() || c == '"' || c == '<')
                .map(|(w, _)| (w, directive[w.len()..].trim()))
                .unwrap_or((directive, ""));
            let fail = |message: String| (index, message);
            match word {
                "ifdef" | "ifndef" => {
                    let defined = self.defines.contains_key(name_of(rest).map_err(fail)?);
                    branches.push((defined == (word == "ifdef"), false));
                }
                "else" => match branches.last_mut() {
                    Some((taken, seen_else @ false)) => {
                        *taken = !*taken;
                        *seen_else = true;
                    }
                    _ => return Err(fail("#else without #ifdef or #ifndef".into())),
                },
                "endif" => {
                    branches
                        .pop()
                        .ok_or_else(|| fail("#endif without #ifdef or #ifndef".into()))?;
                }
                _ if !active => {}
                "define" => {
                    let name = name_of(rest).map_err(fail)?;
                    let body = rest[name.len()..].trim();
                    if body.starts_with('(') && !rest[name.len()..].starts_with(' ') {
                        return Err(fail(format!(
                            "#define {name}(...): macros with parameters are not supported (nor by BTrace)"
                        )));
                    }
                    self.defines.insert(name.to_string(), body.to_string());
                }
                "undef" => {
                    self.defines.remove(name_of(rest).map_err(fail)?);
                }
                "include" => {
                    let text = self.include(rest, depth).map_err(fail)?;
                    out.push(text);
                    continue;
                }
                "" => {}
                other => return Err(fail(format!("#{other} is not supported"))),
            }
            out.push(String::new());
        }
        if !branches.is_empty() {
            return Err((
                lines.len().saturating_sub(1),
                "#ifdef without #endif".into(),
            ));
        }
        Ok(out)
    }

    /// The text an included file adds, on one line (its directives take effect).
    fn include(&mut self, target: &str, depth: usize) -> Result<String, String> {
        let name = target
            .strip_prefix('"')
            .and_then(|t| t.strip_suffix('"'))
            .or_else(|| target.strip_prefix('<').and_then(|t| t.strip_suffix('>')))
            .ok_or_else(|| format!("#include {target}: write #include \"file\""))?;
        if depth >= MOST_NESTED {
            return Err(format!(
                "#include \"{name}\": includes nest deeper than {MOST_NESTED}"
            ));
        }
        let path = self
            .include_dirs
            .iter()
            .map(|dir| dir.join(name))
            .find(|path| path.is_file())
            .ok_or_else(|| {
                format!(
                    "#include \"{name}\": not found in {}",
                    shown(self.include_dirs)
                )
            })?;
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("#include \"{name}\": {}: {e}", path.display()))?;
        let lines = self
            .run(&text, depth + 1)
            .map_err(|(line, message)| format!("{}:{}: {message}", path.display(), line + 1))?;
        Ok(lines
            .iter()
            .map(|l| l.trim())
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join(" "))
    }

    /// `line` with every defined name replaced, outside literals and comments.
    fn expand(&self, line: &str, depth: usize) -> Result<String, String> {
        if self.defines.is_empty() {
            return Ok(line.to_string());
        }
        let mut out = String::with_capacity(line.len());
        let mut replaced = false;
        let mut chars = line.char_indices().peekable();
        while let Some((at, c)) = chars.next() {
            match c {
                '"' | '\'' => {
                    // A literal, escapes included, as it is.
                    out.push(c);
                    let mut escaped = false;
                    for (_, d) in chars.by_ref() {
                        out.push(d);
                        match (escaped, d) {
                            (false, '\\') => escaped = true,
                            (false, d) if d == c => break,
                            _ => escaped = false,
                        }
                    }
                }
                '/' if line[at..].starts_with("//") => {
                    out.push_str(&line[at..]);
                    break;
                }
                c if c.is_alphabetic() || c == '_' || c == '$' => {
                    let mut end = at + c.len_utf8();
                    while let Some(&(i, d)) = chars.peek() {
                        if !(d.is_alphanumeric() || d == '_' || d == '$') {
                            break;
                        }
                        end = i + d.len_utf8();
                        chars.next();
                    }
                    let word = &line[at..end];
                    match self.defines.get(word) {
                        Some(body) => {
                            out.push_str(body);
                            replaced = true;
                        }
                        None => out.push_str(word),
                    }
                }
                c => out.push(c),
            }
        }
        match (replaced, depth) {
            (false, _) => Ok(out),
            (true, MOST_NESTED) => Err(format!(
                "a #define expands into itself (more than {MOST_NESTED} times)"
            )),
            (true, _) => self.expand(&out, depth + 1),
        }
    }
}

/// The lines of `source` with `\`-continued lines joined, and as many empty lines after each
/// joined one as it took in, so that lines keep their numbers.
fn joined_continuations(source: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut pending: Option<(String, usize)> = None;
    for line in source.lines() {
        let (mut text, taken) = pending.take().unwrap_or_default();
        text.push_str(line.strip_suffix('\\').unwrap_or(line));
        match line.ends_with('\\') {
            true => pending = Some((text + " ", taken + 1)),
            false => {
                lines.push(text);
                lines.extend(std::iter::repeat_n(String::new(), taken));
            }
        }
    }
    if let Some((text, taken)) = pending {
        lines.push(text);
        lines.extend(std::iter::repeat_n(String::new(), taken));
    }
    lines
}

/// The name a directive starts with.
fn name_of(rest: &str) -> Result<&str, String> {
    let end = rest
        .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$'))
        .unwrap_or(rest.len());
    match &rest[..end] {
        "" => Err("a directive without its name".into()),
        name => Ok(name),
    }
}

fn shown(dirs: &[PathBuf]) -> String {
    let dirs: Vec<String> = dirs
        .iter()
        .map(|d| Path::new(d).display().to_string())
        .collect();
    match dirs.is_empty() {
        true => "no directory (give -I DIR)".into(),
        false => dirs.join(", "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defines_expand_as_whole_words_outside_literals_and_keep_the_lines() {
        let source = "#define ACTION public static void\n#define TWICE ACTION ACTION\nTWICE f() { print(\"ACTION\"); } // ACTION\nACTIONS\n";
        let out = preprocess(source, &[]).unwrap();
        assert_eq!(
            out,
            "\n\npublic static void public static void f() { print(\"ACTION\"); } // ACTION\nACTIONS\n"
        );
    }

    #[test]
    fn includes_conditionals_and_continuations() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("defs.h"),
            "#define A import x.*; \\\n  import y.*;\n#define B class\n",
        )
        .unwrap();
        let source = "#include \"defs.h\"\nA\n#ifdef B\nB One {}\n#else\nnot this\n#endif\n#ifndef B\nnor this\n#endif\n";
        let out = preprocess(source, &[dir.path().to_path_buf()]).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 10);
        assert_eq!(lines[1], "import x.*;    import y.*;");
        assert_eq!(lines[3], "class One {}");
        assert_eq!(lines[5], "");
        assert_eq!(lines[8], "");
    }

    #[test]
    fn bad_directives_say_where_and_why() {
        let error = |source: &str| preprocess(source, &[]).unwrap_err();
        assert_eq!(error("x\n#include \"no.h\"\n").line, 2);
        assert!(error("#include \"no.h\"\n").message.contains("give -I DIR"));
        assert!(error("#define F(x) x\n").message.contains("parameters"));
        assert!(error("#ifdef A\n").message.contains("without #endif"));
        assert!(error("#endif\n").message.contains("without #ifdef"));
        assert!(error("#pragma once\n")
            .message
            .contains("#pragma is not supported"));
        assert!(error("#define A A B\nA\n")
            .message
            .contains("expands into itself"));
    }
}
