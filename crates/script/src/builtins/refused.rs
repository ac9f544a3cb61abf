//! The `BTraceUtils` functions jtap refuses on purpose, each with why: what would let a
//! script change the application or run its code, and what needs the JVM at the probe
//! while jtap's handlers run in the client after it.

/// Why a function needs the probed thread itself.
const AT_THE_PROBE: &str = "it asks the probed thread at the probe, and jtap's handlers run in the client after the probe fired";
/// Why a function needs a class object.
const CLASS_OBJECT: &str = "it needs the class object in the JVM; jtap's handlers see classes by name and objects as their descriptions";
/// Why static fields cannot be read.
const STATIC_STATE: &str = "it reads static fields in the JVM; the agent captures no static state";
/// Why object graphs cannot be exported.
const OBJECT_GRAPH: &str =
    "it writes object graphs to files; jtap's handlers see objects as descriptions, not graphs";

/// Refused functions: `Class.name` for one nested class's, a bare name for every class's.
const REFUSED: &[(&str, &str)] = &[
    ("runFinalization", "it runs the application's finalizers (application code) in the JVM"),
    ("hash", "it calls the object's own hashCode() in the JVM (identityHashCode runs no code)"),
    ("finalizationCount", "the JVM tells it only to Java code (MemoryMXBean), no counter or diagnostic command has it"),
    ("bootClassPath", "JDK 9 and later have no boot class path (isBootClassPathSupported() is false)"),
    ("holdsLock", AT_THE_PROBE),
    ("isInteruppted", AT_THE_PROBE),
    ("threadState", AT_THE_PROBE),
    ("currentThreadCpuTime", AT_THE_PROBE),
    ("currentThreadUserTime", AT_THE_PROBE),
    ("accessFlags", CLASS_OBJECT),
    ("contextClassLoader", CLASS_OBJECT),
    ("declaringClass", CLASS_OBJECT),
    ("getSuperclass", CLASS_OBJECT),
    ("instanceOf", CLASS_OBJECT),
    ("isAssignableFrom", CLASS_OBJECT),
    ("isInstance", CLASS_OBJECT),
    ("isInterface", CLASS_OBJECT),
    ("loader", CLASS_OBJECT),
    ("parentLoader", CLASS_OBJECT),
    ("type", CLASS_OBJECT),
    ("getStatic", STATIC_STATE),
    ("getBooleanStatic", STATIC_STATE),
    ("getByteStatic", STATIC_STATE),
    ("getCharStatic", STATIC_STATE),
    ("getShortStatic", STATIC_STATE),
    ("getIntStatic", STATIC_STATE),
    ("getLongStatic", STATIC_STATE),
    ("getFloatStatic", STATIC_STATE),
    ("printStaticFields", STATIC_STATE),
    ("serialize", OBJECT_GRAPH),
    ("toXML", OBJECT_GRAPH),
    ("writeXML", OBJECT_GRAPH),
    ("writeDOT", OBJECT_GRAPH),
];

/// Why jtap refuses `name` called on `class` (a nested class's simple name, or none when
/// called unqualified), if it does.
pub fn refusal(class: Option<&str>, name: &str) -> Option<&'static str> {
    REFUSED.iter().find_map(|&(refused, why)| {
        let matches = match refused.split_once('.') {
            Some((refused_class, refused_name)) => {
                // Unqualified, the name is another class's when jtap runs one of that name.
                refused_name == name && class.map_or(!super::exists(name), |c| c == refused_class)
            }
            None => refused == name,
        };
        matches.then_some(why)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtins::exists;

    /// BTrace's list: `Nested.Class.name` or a top-level `name` per line.
    fn btrace_functions() -> impl Iterator<Item = (Option<&'static str>, &'static str)> {
        include_str!("../../data/btraceutils.txt")
            .lines()
            .filter(|line| !line.is_empty() && !line.starts_with('#'))
            .map(|line| match line.rsplit_once('.') {
                Some((classes, name)) => (classes.rsplit('.').next(), name),
                None => (None, line),
            })
    }

    #[test]
    fn every_btraceutils_function_is_run_or_refused_with_a_reason() {
        let unaccounted: Vec<String> = btrace_functions()
            .filter(|&(class, name)| refusal(class, name).is_none() && !exists(name))
            .map(|(class, name)| format!("{}.{name}", class.unwrap_or("BTraceUtils")))
            .collect();
        assert!(
            unaccounted.is_empty(),
            "neither run nor refused: {unaccounted:?}"
        );
        assert!(btrace_functions().count() > 300);
    }

    #[test]
    fn usages_table_says_what_jtap_does_with_each_function() {
        let usage =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/USAGE.md"))
                .expect("docs/USAGE.md");
        let list = include_str!("../../data/btraceutils.txt");
        for qualified in list
            .lines()
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
        {
            let (classes, name) = qualified
                .rsplit_once('.')
                .unwrap_or(("BTraceUtils", qualified));
            let class = classes
                .rsplit('.')
                .next()
                .filter(|_| classes != "BTraceUtils");
            let row = usage
                .lines()
                .find(|l| l.starts_with(&format!("| `{classes}` |")))
                .unwrap_or_else(|| panic!("USAGE has no row for {classes}"));
            let cells: Vec<&str> = row.trim_matches('|').split('|').collect();
            let column = if refusal(class, name).is_some() { 2 } else { 1 };
            assert!(
                cells[column]
                    .split(", ")
                    .any(|cell| cell.trim() == format!("`{name}`")),
                "USAGE's row for {classes} puts {name} in the wrong column"
            );
        }
        for &(refused, why) in REFUSED {
            let row = usage
                .lines()
                .find(|l| {
                    l.starts_with('|') && l.contains(&format!("`{refused}`")) && l.ends_with(". |")
                })
                .unwrap_or_else(|| panic!("USAGE does not say why {refused} is refused"));
            assert!(row.to_lowercase().contains(&why.to_lowercase()), "{row}");
        }
    }

    #[test]
    fn refusals_name_btrace_functions_jtap_does_not_run() {
        for &(refused, _) in REFUSED {
            let (class, name) = match refused.split_once('.') {
                Some((class, name)) => (Some(class), name),
                None => (None, refused),
            };
            assert!(
                btrace_functions().any(|f| f.1 == name && (class.is_none() || f.0 == class)),
                "{refused} is no BTraceUtils function"
            );
            assert!(
                class.is_some() || !exists(name),
                "{refused} is both run and refused"
            );
        }
    }
}
