//! `jtap classes <pid> PATTERN [--methods] [--fields]`: the loaded classes whose names match,
//! with their class loader and the jar, directory or module they come from, and on request
//! their methods and fields with descriptors and modifiers — what to know before `trace`.
//!
//! No agent is loaded and no class is touched: the loaded classes and their loaders come
//! from the JVM's `VM.classloaders show-classes` diagnostic command; members from the class
//! files themselves, found on the JVM's class path (directories and jars, seen through
//! `/proc/<pid>/root` and `/proc/<pid>/cwd`) or in its runtime image (`lib/modules`) for
//! the JDK's own classes. Classes that were defined from bytes elsewhere (hidden classes,
//! custom loaders reading other places) are listed without members.

use jtap_classfile::descriptor::java_name;
use std::collections::HashMap;
use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use jtap_attach::process::Process;
use jtap_attach::{AttachOptions, Request, VirtualMachine};
use jtap_classfile::{ClassFile, Member};
use regex::Regex;
use serde::Serialize;

use super::jimage::RuntimeImage;
use crate::exit;

/// The command line of `jtap classes`.
#[derive(clap::Args, Debug, Clone)]
pub struct ClassesArgs {
    /// Pid of the target JVM
    pub pid: u32,
    /// Class name: exact (`com.acme.Cache` or `Cache`), a glob (`com.acme.*Service`), or
    /// `/regex/`
    pub pattern: String,
    /// List each class's methods with their descriptors and modifiers
    #[arg(long)]
    pub methods: bool,
    /// List each class's fields with their types and modifiers
    #[arg(long)]
    pub fields: bool,
    /// Print at most N classes (0: all)
    #[arg(short = 'n', long = "limit", default_value_t = 100)]
    pub limit: usize,
    /// Print JSON instead of text
    #[arg(long)]
    pub json: bool,
    /// Print bare names, one a line, for shell completion: the classes, or with --methods
    /// each `Class::method`
    #[arg(long, hide = true, conflicts_with_all = ["json", "fields"])]
    pub names: bool,
}

/// What `jtap classes` found.
#[derive(Debug, Serialize)]
pub struct ClassesReport {
    /// The JVM's pid.
    pub pid: u32,
    /// How many loaded classes match (more than `classes` holds when limited).
    pub matched: usize,
    /// The matching classes, by name.
    pub classes: Vec<ClassInfo>,
}

/// One loaded class.
#[derive(Debug, Serialize)]
pub struct ClassInfo {
    /// Java name (`workloads.OnCall`, `workloads.OnCall$$Lambda/0x…` for hidden classes).
    pub name: String,
    /// Its loader (`<bootstrap>`, `app (jdk.internal.loader.ClassLoaders$AppClassLoader)`).
    pub loader: String,
    /// The jar, directory or `jrt:/module` it was found in, if found.
    pub source: Option<String>,
    /// Modifiers and kind (`public final class`), when the class file was found.
    pub declaration: Option<String>,
    /// Its superclass, when the class file was found.
    pub super_class: Option<String>,
    /// Its methods (with `--methods`).
    pub methods: Vec<MemberInfo>,
    /// Its fields (with `--fields`).
    pub fields: Vec<MemberInfo>,
}

/// A method or field.
#[derive(Debug, Serialize)]
pub struct MemberInfo {
    /// Java modifiers (`public static final`).
    pub modifiers: String,
    /// The name (`<init>` for constructors).
    pub name: String,
    /// The JVM descriptor (`(J)J`, `Ljava/lang/Object;`).
    pub descriptor: String,
    /// The Java spelling (`long spin(long)`, `java.lang.Object MONITOR`).
    pub java: String,
}

/// Finds and prints the classes of JVM `args.pid` that match `args.pattern`.
pub fn run(args: &ClassesArgs, timeout: Duration) -> anyhow::Result<i32> {
    let report = collect(args, timeout)?;
    if args.names {
        let mut out = io::stdout().lock();
        // Hidden classes (`Outer$$Lambda/0x...`) cannot be traced: not offered.
        for class in report.classes.iter().filter(|c| !c.name.contains('/')) {
            match args.methods {
                false => writeln!(out, "{}", class.name)?,
                true => {
                    let mut methods: Vec<&str> =
                        class.methods.iter().map(|m| m.name.as_str()).collect();
                    methods.dedup();
                    for method in methods {
                        writeln!(out, "{}::{method}", class.name)?;
                    }
                }
            }
        }
        return Ok(0);
    }
    super::print_report(&report, args.json, write_text)
}

/// Lists the matching classes and reads what was asked of each from its class file.
pub fn collect(args: &ClassesArgs, timeout: Duration) -> anyhow::Result<ClassesReport> {
    let matcher = ClassMatcher::new(&args.pattern)?;
    let mut vm = VirtualMachine::attach(args.pid, &AttachOptions { timeout })?;
    let listing = jcmd(&mut vm, "VM.classloaders show-classes")?;
    let mut loaded: Vec<(String, String)> = loaded_classes(&listing)
        .into_iter()
        .filter(|(name, _)| matcher.matches(name))
        .collect();
    loaded.sort();
    loaded.dedup();
    let matched = loaded.len();
    if args.limit > 0 {
        loaded.truncate(args.limit);
    }
    let properties = jcmd(&mut vm, "VM.system_properties")?;
    let mut finder = ClassFinder::new(vm.process(), &properties);
    let classes = loaded
        .into_iter()
        .map(|(name, loader)| describe(&mut finder, name, loader, args))
        .collect();
    Ok(ClassesReport {
        pid: args.pid,
        matched,
        classes,
    })
}

fn jcmd(vm: &mut VirtualMachine, command: &str) -> anyhow::Result<String> {
    let mut reply = vm.execute(&Request::new("jcmd", [command.to_string()]))?;
    let text = reply.output_to_string()?;
    if reply.status != 0 {
        anyhow::bail!(
            "the JVM refused `jcmd {command}`: {}",
            text.lines().next().unwrap_or("no reason given")
        );
    }
    Ok(text)
}

/// `(class, loader)` pairs from `VM.classloaders show-classes`: a tree of `+-- <loader>`
/// lines, each followed by `Classes:` (and `Anonymous Classes:`/`Hidden Classes:`) lists
/// that end with a `(N classes)` line. Array classes are left out.
fn loaded_classes(listing: &str) -> Vec<(String, String)> {
    let mut classes = Vec::new();
    let mut loader = String::new();
    let mut in_list = false;
    for line in listing.lines() {
        let content = line.trim_start_matches([' ', '|']).trim_end();
        if let Some(label) = content.strip_prefix("+-- ") {
            loader = loader_label(label);
            in_list = false;
            continue;
        }
        let name = match content.split_once("Classes: ") {
            Some((_, first)) => {
                in_list = true;
                first
            }
            None if in_list && !content.is_empty() && !content.starts_with('(') => content,
            None => {
                in_list = false;
                continue;
            }
        };
        if !name.starts_with('[') {
            classes.push((name.to_string(), loader.clone()));
        }
    }
    classes
}

/// `"app", jdk.internal.loader.ClassLoaders$AppClassLoader` → `app (jdk.…AppClassLoader)`.
fn loader_label(label: &str) -> String {
    match label.strip_prefix('"').and_then(|l| l.split_once("\", ")) {
        Some((name, class)) => format!("{name} ({class})"),
        None => label.to_string(),
    }
}

/// A class-name pattern: `/regex/`, a glob with `*` and `?`, or a name (full, or simple
/// without its package).
enum ClassMatcher {
    Regex(Regex),
    Name(String),
}

impl ClassMatcher {
    fn new(pattern: &str) -> anyhow::Result<ClassMatcher> {
        let bad = |e: regex::Error| exit::usage(format!("bad class pattern {pattern:?}: {e}"));
        if pattern.trim().is_empty() {
            return Err(exit::usage("the class pattern is empty"));
        }
        if let Some(regex) = pattern.strip_prefix('/').and_then(|p| p.strip_suffix('/')) {
            return Ok(ClassMatcher::Regex(Regex::new(regex).map_err(bad)?));
        }
        if pattern.contains(['*', '?']) {
            let glob = regex::escape(pattern)
                .replace("\\*", ".*")
                .replace("\\?", ".");
            return Ok(ClassMatcher::Regex(
                Regex::new(&format!("^{glob}$")).map_err(bad)?,
            ));
        }
        Ok(ClassMatcher::Name(pattern.replace('/', ".")))
    }

    fn matches(&self, class: &str) -> bool {
        match self {
            ClassMatcher::Regex(regex) => regex.is_match(class),
            ClassMatcher::Name(name) => {
                class == name || (!name.contains('.') && simple_name(class) == name)
            }
        }
    }
}

/// `com.acme.Outer$Inner` → `Outer$Inner`.
fn simple_name(class: &str) -> &str {
    class.rsplit('.').next().unwrap_or(class)
}

/// Finds class files where the JVM would have read them.
struct ClassFinder {
    /// Class path entries: as paths readable from here, and as the JVM names them.
    class_path: Vec<(PathBuf, String)>,
    /// The runtime image, for the JDK's classes (None when it cannot be read).
    image: Option<RuntimeImage>,
    /// Jars opened so far (None: not a readable jar).
    jars: HashMap<PathBuf, Option<zip::ZipArchive<fs::File>>>,
}

impl ClassFinder {
    fn new(process: &Process, properties: &str) -> ClassFinder {
        let property = |key: &str| {
            properties
                .lines()
                .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
                .map(unescape_property)
        };
        let root = process.root();
        let cwd = process.cwd();
        let visible = |path: &str| {
            if Path::new(path).is_absolute() {
                root.join(path.trim_start_matches('/'))
            } else {
                cwd.join(path)
            }
        };
        let class_path = property("java.class.path")
            .unwrap_or_default()
            .split(':')
            .filter(|e| !e.is_empty())
            .flat_map(|entry| {
                expand_wildcard(visible(entry))
                    .into_iter()
                    .map(move |(path, jar)| (path, format!("{}{jar}", entry.trim_end_matches('*'))))
            })
            .collect();
        let image = property("java.home")
            .and_then(|home| RuntimeImage::open(&visible(&home).join("lib/modules")).ok());
        ClassFinder {
            class_path,
            image,
            jars: HashMap::new(),
        }
    }

    /// The class file of `class` and where it was found.
    fn find(&mut self, class: &str) -> Option<(Vec<u8>, String)> {
        let internal = class.replace('.', "/");
        let file_name = format!("{internal}.class");
        for (entry, shown) in &self.class_path {
            if entry.is_dir() {
                if let Ok(bytes) = fs::read(entry.join(&file_name)) {
                    return Some((bytes, shown.clone()));
                }
                continue;
            }
            let jar = self
                .jars
                .entry(entry.clone())
                .or_insert_with(|| zip::ZipArchive::new(fs::File::open(entry).ok()?).ok());
            let Some(mut file) = jar.as_mut().and_then(|j| j.by_name(&file_name).ok()) else {
                continue;
            };
            let mut bytes = Vec::new();
            if file.read_to_end(&mut bytes).is_ok() {
                return Some((bytes, shown.clone()));
            }
        }
        let (module, bytes) = self.image.as_ref()?.class(&internal)?;
        Some((bytes, format!("jrt:/{module}")))
    }
}

/// `dir/*` on a class path: every jar of `dir`, with the text that replaces the `*` in
/// what the JVM calls it; any other entry as it is.
fn expand_wildcard(entry: PathBuf) -> Vec<(PathBuf, String)> {
    if entry.file_name().is_none_or(|n| n != "*") {
        return vec![(entry, String::new())];
    }
    let dir = entry.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut jars: Vec<(PathBuf, String)> = fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x.eq_ignore_ascii_case("jar")))
        .map(|p| {
            let jar = p
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            (p, jar)
        })
        .collect();
    jars.sort();
    jars
}

/// A value of `VM.system_properties` (properties-file escapes: `\:`, `\=`, `\\`).
fn unescape_property(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            out.extend(chars.next());
        } else {
            out.push(c);
        }
    }
    out
}

fn describe(
    finder: &mut ClassFinder,
    name: String,
    loader: String,
    args: &ClassesArgs,
) -> ClassInfo {
    let mut info = ClassInfo {
        name,
        loader,
        source: None,
        declaration: None,
        super_class: None,
        methods: Vec::new(),
        fields: Vec::new(),
    };
    if info.name.contains("/0x") {
        return info; // hidden: defined from bytes that exist nowhere else
    }
    let Some((bytes, source)) = finder.find(&info.name) else {
        return info;
    };
    info.source = Some(source);
    let Ok(class) = ClassFile::parse(&bytes) else {
        return info;
    };
    info.declaration = Some(class_declaration(class.access_flags));
    info.super_class = (class.super_class != 0)
        .then(|| class.constant_pool.class_name(class.super_class).ok())
        .flatten()
        .map(|n| String::from_utf8_lossy(n).replace('/', "."));
    let members = |list: &[Member], method: bool| -> Vec<MemberInfo> {
        list.iter()
            .filter_map(|m| member(&class, m, method))
            .collect()
    };
    if args.methods {
        info.methods = members(&class.methods, true);
    }
    if args.fields {
        info.fields = members(&class.fields, false);
    }
    info
}

fn member(class: &ClassFile, member: &Member, method: bool) -> Option<MemberInfo> {
    let pool = &class.constant_pool;
    let name = pool.utf8_str(member.name_index).ok()?.into_owned();
    let descriptor = pool.utf8_str(member.descriptor_index).ok()?.into_owned();
    let modifiers = modifiers(member.access_flags, method);
    let java = if method {
        let (params, result) = descriptor.strip_prefix('(')?.split_once(')')?;
        let params: Vec<String> = field_types(params).iter().map(|t| java_name(t)).collect();
        format!("{} {name}({})", java_name(result), params.join(", "))
    } else {
        format!("{} {name}", java_name(&descriptor))
    };
    Some(MemberInfo {
        modifiers,
        name,
        descriptor,
        java,
    })
}

/// `IJLjava/lang/String;[B` → `["I", "J", "Ljava/lang/String;", "[B"]`.
fn field_types(mut descriptors: &str) -> Vec<&str> {
    let mut types = Vec::new();
    while !descriptors.is_empty() {
        let dims = descriptors.bytes().take_while(|&b| b == b'[').count();
        let end = match descriptors.as_bytes().get(dims) {
            Some(b'L') => descriptors.find(';').map_or(descriptors.len(), |i| i + 1),
            _ => (dims + 1).min(descriptors.len()),
        };
        types.push(&descriptors[..end]);
        descriptors = &descriptors[end..];
    }
    types
}

/// Java modifiers of a method's or field's access flags (JVMS 4.5, 4.6).
fn modifiers(flags: u16, method: bool) -> String {
    let mut words = Vec::new();
    let table: &[(u16, &str)] = if method {
        &[
            (0x0001, "public"),
            (0x0002, "private"),
            (0x0004, "protected"),
            (0x0008, "static"),
            (0x0010, "final"),
            (0x0020, "synchronized"),
            (0x0040, "bridge"),
            (0x0080, "varargs"),
            (0x0100, "native"),
            (0x0400, "abstract"),
            (0x1000, "synthetic"),
        ]
    } else {
        &[
            (0x0001, "public"),
            (0x0002, "private"),
            (0x0004, "protected"),
            (0x0008, "static"),
            (0x0010, "final"),
            (0x0040, "volatile"),
            (0x0080, "transient"),
            (0x1000, "synthetic"),
            (0x4000, "enum"),
        ]
    };
    for (flag, word) in table {
        if flags & flag != 0 {
            words.push(*word);
        }
    }
    words.join(" ")
}

/// A class's access flags as a Java declaration (`public final class`, `interface`).
fn class_declaration(flags: u16) -> String {
    let mut words = Vec::new();
    if flags & 0x0001 != 0 {
        words.push("public");
    }
    let interface = flags & 0x0200 != 0;
    if flags & 0x0400 != 0 && !interface {
        words.push("abstract");
    }
    if flags & 0x0010 != 0 {
        words.push("final");
    }
    words.push(match () {
        _ if flags & 0x2000 != 0 => "@interface",
        _ if interface => "interface",
        _ if flags & 0x4000 != 0 => "enum",
        _ => "class",
    });
    words.join(" ")
}

/// The report as text: one line per class, its members indented under it.
pub fn write_text(report: &ClassesReport, out: &mut impl Write) -> io::Result<()> {
    for class in &report.classes {
        let declaration = class.declaration.as_deref().unwrap_or("class");
        let extends = class
            .super_class
            .as_ref()
            .filter(|s| *s != "java.lang.Object")
            .map_or(String::new(), |s| format!(" extends {s}"));
        writeln!(out, "{declaration} {}{extends}", class.name)?;
        writeln!(out, "    loader  {}", class.loader)?;
        let source = class.source.as_deref().unwrap_or("(class file not found)");
        writeln!(out, "    from    {source}")?;
        for (title, members) in [("fields", &class.fields), ("methods", &class.methods)] {
            if members.is_empty() {
                continue;
            }
            writeln!(out, "    {title}:")?;
            for m in members {
                let modifiers = if m.modifiers.is_empty() {
                    String::new()
                } else {
                    format!("{} ", m.modifiers)
                };
                writeln!(out, "      {modifiers}{}    {}", m.java, m.descriptor)?;
            }
        }
    }
    match report.matched {
        0 => writeln!(out, "no loaded class matches"),
        n if n > report.classes.len() => writeln!(
            out,
            "{n} classes match; {} shown (-n 0 shows all)",
            report.classes.len()
        ),
        n => writeln!(out, "{n} class{} matched", if n == 1 { "" } else { "es" }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_loaders_and_their_classes() {
        let listing = "+-- <bootstrap>\n      |               Classes: [Z\n      |                        java.lang.Object\n      |                        (2 classes)\n      +-- \"app\", jdk.internal.loader.ClassLoaders$AppClassLoader\n                        \n                                  Classes: workloads.OnCall\n                                           (1 class)\n                        Anonymous Classes: workloads.OnCall$$Lambda$1/0x0000000800060840\n";
        assert_eq!(
            loaded_classes(listing),
            [
                ("java.lang.Object".to_string(), "<bootstrap>".to_string()),
                (
                    "workloads.OnCall".into(),
                    "app (jdk.internal.loader.ClassLoaders$AppClassLoader)".into()
                ),
                (
                    "workloads.OnCall$$Lambda$1/0x0000000800060840".into(),
                    "app (jdk.internal.loader.ClassLoaders$AppClassLoader)".into()
                ),
            ]
        );
    }

    #[test]
    fn patterns_match_names_globs_and_regexes() {
        let matches = |p: &str, c: &str| ClassMatcher::new(p).unwrap().matches(c);
        assert!(matches("OnCall", "workloads.OnCall"));
        assert!(matches("workloads.OnCall", "workloads.OnCall"));
        assert!(!matches("workloads.On", "workloads.OnCall"));
        assert!(matches("work*.On?all", "workloads.OnCall"));
        assert!(matches("/On(Call|Duty)$/", "workloads.OnCall"));
        assert!(ClassMatcher::new("/(/").is_err());
    }

    #[test]
    fn descriptors_in_java_spelling() {
        assert_eq!(
            field_types("IJ[[Ljava/lang/String;B"),
            ["I", "J", "[[Ljava/lang/String;", "B"]
        );
        assert_eq!(java_name("[[Ljava/lang/String;"), "java.lang.String[][]");
        assert_eq!(modifiers(0x0009, true), "public static");
        assert_eq!(class_declaration(0x0601), "public interface");
    }
}
