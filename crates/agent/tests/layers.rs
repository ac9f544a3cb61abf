//! The agent's top-level modules form layers, and references point down only:
//!
//! 0. FFI and plumbing: `thread`, `libjvm`, `gate`, `log`, `callback` (no panic into
//!    the JVM, the library kept mapped) and `channel` (the socket to a client, and the
//!    [`ClientSink`] trait engines stream through);
//! 1. mechanisms: `sampling`, `trace` (instrumentation), `heap`, `walk` (stacks), `hooks`
//!    (hooks on C functions), `label` (request labels), and for continuous profiling `rotation` (the period clock) and `push`
//!    (delivery to a server);
//! 2. engines: `engine`;
//! 3. commands: `agent` (with its session watchers), `session`, and `entry` (the entry points
//!    the JVM calls).
//!
//! This test reads `src/**/*.rs` (comments and literals blanked out), finds every reference
//! from one module to another — `crate::x::y` paths (also inside `use crate::{...}` groups),
//! `super::` chains, and macros of `#[macro_use]` modules — and fails on (a) a reference to a
//! higher layer, (b) a cycle between top-level modules, and (c) a cycle between the
//! submodules of any one module (`walk::code` and `walk::frames`, say). A module missing
//! from [`LAYERS`] fails too, so a new module has to be placed.
//!
//! [`ClientSink`]: ../jtap_agent/channel/trait.ClientSink.html

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Every top-level module of the agent and its layer (lower numbers are lower layers).
const LAYERS: &[(&str, u32)] = &[
    ("thread", 0),
    ("libjvm", 0),
    ("gate", 0),
    ("log", 0),
    ("callback", 0),
    ("channel", 0),
    ("sampling", 1),
    ("trace", 1),
    ("heap", 1),
    ("walk", 1),
    ("hooks", 1),
    ("label", 1),
    ("rotation", 1),
    ("push", 1),
    ("engine", 2),
    ("agent", 3),
    ("session", 3),
    ("entry", 3),
];

/// One reference from a file to another module.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Reference {
    /// Path of the referring file under `src/`, with `/` separators.
    file: String,
    /// 1-based line of the reference.
    line: usize,
    /// Module path of the referring file (`[walk, code]`).
    from: Vec<String>,
    /// Module path referred to, as deep as the modules go (`[walk, frames]`).
    to: Vec<String>,
}

#[test]
fn agent_modules_point_down_only() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let layer: BTreeMap<&str, u32> = LAYERS.iter().copied().collect();
    let lib = sanitize(&fs::read_to_string(src.join("lib.rs")).unwrap());
    let (modules, macro_use) = top_level_modules(&lib);

    let mut problems = Vec::new();
    for module in &modules {
        if !layer.contains_key(module.as_str()) {
            problems.push(format!(
                "module `{module}` has no layer: add it to LAYERS in {}",
                file!()
            ));
        }
    }
    for (name, _) in LAYERS {
        if !modules.contains(*name) {
            problems.push(format!(
                "LAYERS names `{name}`, which lib.rs does not declare"
            ));
        }
    }

    // Macros of `#[macro_use]` modules are references to those modules wherever used.
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut macros: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for path in &files {
        let module_path = module_path(&src, path);
        let Some(top) = module_path.first() else {
            continue;
        };
        if macro_use.contains(top) {
            let text = sanitize(&fs::read_to_string(path).unwrap());
            let tokens = tokenize(&text);
            for w in tokens.windows(3) {
                if w[0].text == "macro_rules" && w[1].text == "!" {
                    macros.insert(w[2].text.clone(), vec![top.clone()]);
                }
            }
        }
    }

    let known: BTreeSet<Vec<String>> = files.iter().map(|p| module_path(&src, p)).collect();
    let mut references = Vec::new();
    for path in &files {
        let from = module_path(&src, path);
        if from.is_empty() {
            continue; // lib.rs itself only declares the modules.
        }
        let file = path
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let text = sanitize(&fs::read_to_string(path).unwrap());
        for (line, to) in references_in(&tokenize(&text), &from, &known, &macros) {
            if to.first() != from.first() || to.len() > 1 && from.len() > 1 {
                references.push(Reference {
                    file: file.clone(),
                    line,
                    from: from.clone(),
                    to,
                });
            }
        }
    }
    references.sort();
    references.dedup();

    // (a) upward references.
    for r in references.iter().filter(|r| r.from[0] != r.to[0]) {
        let (Some(&from_layer), Some(&to_layer)) =
            (layer.get(r.from[0].as_str()), layer.get(r.to[0].as_str()))
        else {
            continue;
        };
        if to_layer > from_layer {
            problems.push(format!(
                "src/{}:{}: `{}` (layer {from_layer}) refers up to `{}` (layer {to_layer})",
                r.file, r.line, r.from[0], r.to[0]
            ));
        }
    }

    // (b, c) cycles among the children of each module (the crate's: the top-level modules):
    // a reference from a::b::x to a::c::y is an edge b -> c among a's children.
    let mut graphs: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    let mut witness: BTreeMap<(String, String, String), &Reference> = BTreeMap::new();
    for r in &references {
        let common = r.from.iter().zip(&r.to).take_while(|(a, b)| a == b).count();
        let (Some(from), Some(to)) = (r.from.get(common), r.to.get(common)) else {
            continue; // a module and one of its own submodules
        };
        let parent = r.from[..common].join("::");
        graphs
            .entry(parent.clone())
            .or_default()
            .entry(from.clone())
            .or_default()
            .insert(to.clone());
        witness
            .entry((parent, from.clone(), to.clone()))
            .or_insert(r);
    }
    for (parent, graph) in &graphs {
        let graph: BTreeMap<&str, BTreeSet<&str>> = graph
            .iter()
            .map(|(k, v)| (k.as_str(), v.iter().map(String::as_str).collect()))
            .collect();
        for cycle in cycles(&graph) {
            let witnesses: Vec<String> = cycle
                .windows(2)
                .map(|w| {
                    let r = witness[&(parent.clone(), w[0].to_string(), w[1].to_string())];
                    format!("src/{}:{}", r.file, r.line)
                })
                .collect();
            let place = if parent.is_empty() {
                "top-level modules".to_string()
            } else {
                format!("the submodules of `{parent}`")
            };
            problems.push(format!(
                "cycle between {place}: {} ({})",
                cycle.join(" -> "),
                witnesses.join(", ")
            ));
        }
    }

    // What the top-level graph looks like, for whoever reads the output (`--nocapture`).
    if let Some(top) = graphs.get("") {
        for (from, tos) in top {
            let tos: Vec<&str> = tos.iter().map(String::as_str).collect();
            println!("{from} -> {}", tos.join(", "));
        }
    }

    assert!(
        problems.is_empty(),
        "agent module layering (see {}):\n{}",
        file!(),
        problems.join("\n")
    );
}

/// The modules `lib.rs` declares, and those of them marked `#[macro_use]`.
fn top_level_modules(lib: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let tokens = tokenize(lib);
    let mut modules = BTreeSet::new();
    let mut macro_use = BTreeSet::new();
    for (i, w) in tokens.windows(3).enumerate() {
        if w[0].text == "mod" && w[2].text == ";" {
            modules.insert(w[1].text.clone());
            // `# [ macro_use ]` right before `mod` (or before `pub mod`).
            let before: Vec<&str> = tokens[i.saturating_sub(5)..i]
                .iter()
                .map(|t| t.text.as_str())
                .collect();
            if before.contains(&"macro_use") {
                macro_use.insert(w[1].text.clone());
            }
        }
    }
    (modules, macro_use)
}

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module path of a source file: `lib.rs` is `[]`, `engine/mod.rs` and `engine.rs` are
/// `[engine]`, `engine/lock/park.rs` is `[engine, lock, park]`.
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

/// A token of sanitized source: an identifier (or keyword) or one punctuation character,
/// with `::` kept as one token.
#[derive(Debug, Clone)]
struct Token {
    text: String,
    line: usize,
}

fn tokenize(text: &str) -> Vec<Token> {
    let chars: Vec<char> = text.chars().collect();
    let mut tokens = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            tokens.push(Token {
                text: chars[start..i].iter().collect(),
                line,
            });
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            tokens.push(Token {
                text: "::".into(),
                line,
            });
            i += 2;
        } else {
            tokens.push(Token {
                text: c.to_string(),
                line,
            });
            i += 1;
        }
    }
    tokens
}

/// `(line, module path)` for every reference in one file's tokens: the longest module path
/// in `known` that the referenced path starts with. `module_path` is the file's module;
/// inline `mod name { ... }` blocks nest below it.
fn references_in(
    tokens: &[Token],
    module_path: &[String],
    known: &BTreeSet<Vec<String>>,
    macros: &BTreeMap<String, Vec<String>>,
) -> Vec<(usize, Vec<String>)> {
    let mut found = Vec::new();
    let mut depth = 0usize;
    // Brace depth at which each open inline module's block started.
    let mut inline_modules: Vec<(usize, String)> = Vec::new();
    let mut pending_module: Option<String> = None;
    let text = |i: usize| tokens.get(i).map_or("", |t| t.text.as_str());
    let deepest_known = |path: &[String]| -> Option<Vec<String>> {
        (1..=path.len())
            .rev()
            .map(|n| path[..n].to_vec())
            .find(|p| known.contains(p))
    };
    let mut i = 0;
    while i < tokens.len() {
        match text(i) {
            "{" => {
                depth += 1;
                if let Some(name) = pending_module.take() {
                    inline_modules.push((depth, name));
                }
            }
            "}" => {
                if inline_modules.last().is_some_and(|(d, _)| *d == depth) {
                    inline_modules.pop();
                }
                depth = depth.saturating_sub(1);
            }
            "mod" if text(i + 2) == "{" => pending_module = Some(text(i + 1).to_string()),
            _ => {}
        }
        let starts_path = i == 0 || text(i - 1) != "::";
        // Inline modules (`mod tests`) are not files: references from them count as the
        // file's, and `super::` inside them climbs from their level.
        let here: Vec<String> = module_path
            .iter()
            .cloned()
            .chain(inline_modules.iter().map(|(_, n)| n.clone()))
            .collect();
        let mut resolved: Option<(usize, Vec<String>)> = None;
        if starts_path && text(i + 1) == "::" {
            match text(i) {
                "crate" => resolved = Some((i + 2, Vec::new())),
                "self" => resolved = Some((i + 2, here.clone())),
                "super" => {
                    let mut j = i;
                    let mut up = 0;
                    while text(j) == "super" && text(j + 1) == "::" {
                        up += 1;
                        j += 2;
                    }
                    let keep = here.len().saturating_sub(up);
                    resolved = Some((j, here[..keep].to_vec()));
                }
                _ => {}
            }
        }
        if let Some((mut next, mut base)) = resolved {
            // The path's segments: `a::b::{c, d::e}` gives [a, b] and then c and d.
            while is_ident(text(next)) && text(next + 1) == "::" {
                base.push(text(next).to_string());
                next += 2;
            }
            let mut leaves = Vec::new();
            if text(next) == "{" {
                let mut level = 0;
                let mut expect_item = true;
                for t in &tokens[next..] {
                    match t.text.as_str() {
                        "{" => {
                            level += 1;
                            expect_item = level == 1;
                        }
                        "}" => {
                            level -= 1;
                            if level == 0 {
                                break;
                            }
                        }
                        "," if level == 1 => expect_item = true,
                        name if level == 1 && expect_item => {
                            leaves.push((t.line, name.to_string()));
                            expect_item = false;
                        }
                        _ => {}
                    }
                }
            } else if is_ident(text(next)) {
                leaves.push((tokens[i].line, text(next).to_string()));
            }
            if leaves.is_empty() {
                leaves.push((tokens[i].line, String::new()));
            }
            for (line, leaf) in leaves {
                let mut path = base.clone();
                if !leaf.is_empty() && leaf != "self" {
                    path.push(leaf);
                }
                if let Some(module) = deepest_known(&path) {
                    found.push((line, module));
                }
            }
            i = next;
            continue;
        } else if text(i + 1) == "!" && text(i.wrapping_sub(1)) != "macro_rules" {
            if let Some(module) = macros.get(text(i)) {
                found.push((tokens[i].line, module.clone()));
            }
        }
        i += 1;
    }
    found
}

fn is_ident(text: &str) -> bool {
    text.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
}

/// Source with comments, string, byte-string and char literals replaced by spaces (lines
/// kept), so only code is scanned. Lifetimes are left alone.
fn sanitize(source: &str) -> String {
    let chars: Vec<char> = source.chars().collect();
    let mut out = String::with_capacity(source.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        let ident_before = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut nesting = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    nesting += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    nesting -= 1;
                    out.push_str("  ");
                    i += 2;
                    if nesting == 0 {
                        break;
                    }
                } else {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
        } else if !ident_before
            && (c == 'r' || (c == 'b' && next == Some('r')))
            && raw_string_hashes(&chars, i + if c == 'b' { 2 } else { 1 }).is_some()
        {
            let open = i + if c == 'b' { 2 } else { 1 };
            let hashes = raw_string_hashes(&chars, open).unwrap();
            let body = open + hashes + 1;
            let mut end = body;
            while end < chars.len() {
                if chars[end] == '"' && (0..hashes).all(|k| chars.get(end + 1 + k) == Some(&'#')) {
                    end += 1 + hashes;
                    break;
                }
                end += 1;
            }
            out.extend(chars[i..end.min(chars.len())].iter().map(|&c| blank(c)));
            i = end;
        } else if c == '"' {
            out.push(' ');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < chars.len() {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
            out.push(' ');
            i += 1;
        } else if c == '\'' && (next == Some('\\') || chars.get(i + 2) == Some(&'\'')) {
            // A char literal ('a', '\n', '\u{..}', '\''); a lifetime has no closing quote.
            out.push(' ');
            i += 1;
            if chars.get(i) == Some(&'\\') {
                out.push_str("  ");
                i += 2;
            }
            while i < chars.len() && chars[i] != '\'' {
                out.push(blank(chars[i]));
                i += 1;
            }
            out.push(' ');
            i += 1;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// If a raw string's `#`s and opening quote start at `at`, how many `#`s there are.
fn raw_string_hashes(chars: &[char], at: usize) -> Option<usize> {
    let mut n = 0;
    while chars.get(at + n) == Some(&'#') {
        n += 1;
    }
    (chars.get(at + n) == Some(&'"')).then_some(n)
}

/// One cycle per strongly connected component of more than one node: the shortest way from
/// the component's smallest node back to itself, as a path that starts and ends there.
fn cycles<'a>(graph: &BTreeMap<&'a str, BTreeSet<&'a str>>) -> Vec<Vec<&'a str>> {
    let successors = |n: &str| graph.get(n).into_iter().flatten().copied();
    let reach = |from: &'a str| {
        let mut seen = BTreeSet::from([from]);
        let mut todo = vec![from];
        while let Some(n) = todo.pop() {
            for m in successors(n) {
                if seen.insert(m) {
                    todo.push(m);
                }
            }
        }
        seen
    };
    let nodes: BTreeSet<&str> = graph
        .iter()
        .flat_map(|(n, ms)| std::iter::once(*n).chain(ms.iter().copied()))
        .collect();
    let reachable: BTreeMap<&str, BTreeSet<&str>> = nodes.iter().map(|&n| (n, reach(n))).collect();
    let mut done = BTreeSet::new();
    let mut out = Vec::new();
    for &start in &nodes {
        if done.contains(start) {
            continue;
        }
        let component: BTreeSet<&str> = reachable[start]
            .iter()
            .copied()
            .filter(|n| reachable[n].contains(start))
            .collect();
        done.extend(component.iter().copied());
        if component.len() < 2 {
            continue;
        }
        // Breadth-first from `start` inside the component until an edge leads back to it.
        let mut parent: BTreeMap<&str, &str> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([start]);
        'search: while let Some(n) = queue.pop_front() {
            for m in successors(n) {
                if m == start {
                    let mut path = vec![n];
                    while let Some(&p) = parent.get(path.last().unwrap()) {
                        path.push(p);
                    }
                    path.reverse();
                    path.push(start);
                    out.push(path);
                    break 'search;
                }
                if m != start && component.contains(m) && !parent.contains_key(m) {
                    parent.insert(m, n);
                    queue.push_back(m);
                }
            }
        }
    }
    out
}

#[test]
fn the_scanner_sees_what_it_should() {
    let known: BTreeSet<Vec<String>> = [
        "agent",
        "engine",
        "engine::alloc",
        "engine::cpu",
        "gate",
        "log",
        "trace",
        "trace::probes",
        "trace::report",
    ]
    .map(|m| m.split("::").map(String::from).collect())
    .into();
    let macros: BTreeMap<String, Vec<String>> =
        [("log".to_string(), vec!["log".to_string()])].into();
    let source = r##"
// crate::agent in a comment
/* crate::agent /* nested */ crate::agent */
use crate::{gate::Gate, trace::{probes, report}};
fn f<'a>(x: &'a str) -> char { let _ = "crate::agent"; let _ = r#"crate::agent"#; '"' }
fn g() { crate::engine::alloc::x(); log!("crate::agent {}", 1); super::alloc::y(); }
pub(crate) fn h() {}
mod tests { use super::*; use super::super::agent::A; }
"##;
    let path: Vec<String> = vec!["engine".into(), "cpu".into()];
    let found = references_in(&tokenize(&sanitize(source)), &path, &known, &macros);
    let mut names: Vec<String> = found.into_iter().map(|(_, m)| m.join("::")).collect();
    names.sort();
    // `super::*` from engine::cpu::tests is engine::cpu; `super::super::agent` from there
    // is `engine::agent`, not the top-level `agent` (so: engine). `trace::{probes, report}`
    // names the trace module only (its first item is a module under it: `trace`).
    assert_eq!(
        names,
        [
            "engine",
            "engine::alloc",
            "engine::alloc",
            "engine::cpu",
            "gate",
            "log",
            "trace"
        ]
    );
}

#[test]
fn cycles_are_found_once_per_tangle() {
    let graph: BTreeMap<&str, BTreeSet<&str>> = [
        ("a", BTreeSet::from(["b"])),
        ("b", BTreeSet::from(["c", "d"])),
        ("c", BTreeSet::from(["a"])),
        ("d", BTreeSet::from(["e"])),
        ("e", BTreeSet::from(["d"])),
        ("f", BTreeSet::from(["a"])),
    ]
    .into();
    assert_eq!(
        cycles(&graph),
        [vec!["a", "b", "c", "a"], vec!["d", "e", "d"]]
    );
}
