//! What `inspect` found: the classes of a name, their instances (counted, the first few with
//! their fields or the value at a path of fields), or one static field of each.

use std::fmt::Write;

use serde::{Deserialize, Serialize};

/// The answer to `inspect,class=...`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Inspection {
    /// The class as asked, by its Java name.
    pub class: String,
    /// `path=`: each instance's value at this path of fields.
    pub path: Option<String>,
    /// `static=`: this static field of each class instead of instances.
    pub static_field: Option<String>,
    /// The loaded classes of that name, one per defining loader; empty when none is loaded.
    pub classes: Vec<InspectedClass>,
    /// When no class of that name is loaded: a few loaded classes with close names.
    pub similar: Vec<String>,
    /// How long the heap walks (one per class) paused the JVM, in milliseconds; none for a
    /// static.
    pub walk_ms: Option<f64>,
}

/// One loaded class of the name asked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InspectedClass {
    /// Its defining loader: `<bootstrap>` or the loader object (`Class@hash`).
    pub loader: String,
    /// Whether its static initialiser has run (before that, statics read as their defaults).
    pub initialized: bool,
    /// Instances of exactly this class in the heap (reachable or not yet collected).
    pub instances: u64,
    /// The first instances found, at most `limit=`.
    pub shown: Vec<Instance>,
    /// `static=`: the field's value, or None when the class has no such static field.
    pub static_value: Option<String>,
}

/// One instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Instance {
    /// `Class@identityhash`.
    pub object: String,
    /// Its fields, the class's own first, then each superclass's (without `path=`).
    pub fields: Vec<FieldValue>,
    /// `path=`: the value at the path (`null` where a step met null, `[no field X]`).
    pub value: Option<String>,
}

/// A field and its value, described.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldValue {
    /// The field's name.
    pub name: String,
    /// Its value: a primitive as Java prints it, a string quoted, other objects
    /// `Class@hash`, `null`.
    pub value: String,
}

impl Inspection {
    /// Why there is nothing to show (no class of that name, or no such static field in any
    /// of them), as one line; None when there is.
    pub fn problem(&self) -> Option<String> {
        if self.classes.is_empty() {
            let mut line = format!("class {} is not loaded", self.class);
            if !self.similar.is_empty() {
                let _ = write!(line, " (loaded: {})", self.similar.join(", "));
            }
            return Some(line);
        }
        match &self.static_field {
            Some(name) if self.classes.iter().all(|c| c.static_value.is_none()) => {
                Some(format!("{} has no static field {name}", self.class))
            }
            _ => None,
        }
    }

    /// The header line, then each class's instances with their fields (or values at the
    /// path), or each class's static; the loader named where several classes share the name.
    pub fn to_text(&self) -> String {
        if let Some(problem) = self.problem() {
            return problem;
        }
        let several = self.classes.len() > 1;
        let mut text = String::new();
        if several {
            let _ = writeln!(
                text,
                "{} classes named {}, one per class loader: each shown",
                self.classes.len(),
                self.class
            );
        }
        if let Some(name) = &self.static_field {
            for class in &self.classes {
                let Some(value) = &class.static_value else {
                    continue;
                };
                let _ = write!(text, "{}.{name} = {value}", self.class);
                if !class.initialized {
                    text.push_str(" (class not initialised yet: the field's default value)");
                }
                if several {
                    let _ = write!(text, "  [loader {}]", class.loader);
                }
                text.push('\n');
            }
            return text;
        }
        let total: u64 = self.classes.iter().map(|c| c.instances).sum();
        let _ = write!(
            text,
            "{total} instance{} of {}",
            if total == 1 { "" } else { "s" },
            self.class
        );
        if let Some(ms) = self.walk_ms {
            let _ = write!(text, "; heap walk paused the JVM {ms:.1} ms");
        }
        text.push('\n');
        for class in &self.classes {
            if several {
                let _ = writeln!(
                    text,
                    "-- loader {}: {} instance{}",
                    class.loader,
                    class.instances,
                    if class.instances == 1 { "" } else { "s" }
                );
            }
            for instance in &class.shown {
                match (&self.path, &instance.value) {
                    (Some(path), Some(value)) => {
                        let _ = writeln!(text, "{}.{path} = {value}", instance.object);
                    }
                    _ => {
                        let _ = writeln!(text, "{}", instance.object);
                        for field in &instance.fields {
                            let _ = writeln!(text, "    {} = {}", field.name, field.value);
                        }
                    }
                }
            }
            let more = class.instances.saturating_sub(class.shown.len() as u64);
            if more > 0 {
                let _ = writeln!(text, "... {more} more (-n shows more)");
            }
        }
        text
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn inspection() -> Inspection {
        Inspection {
            class: "workloads.OnCall".into(),
            path: None,
            static_field: None,
            classes: vec![InspectedClass {
                loader: "jdk.internal.loader.ClassLoaders$AppClassLoader@1b2c3d".into(),
                initialized: true,
                instances: 3,
                shown: vec![Instance {
                    object: "workloads.OnCall@6236a47f".into(),
                    fields: vec![FieldValue {
                        name: "owner".into(),
                        value: "\"main\"".into(),
                    }],
                    value: None,
                }],
                static_value: None,
            }],
            similar: Vec::new(),
            walk_ms: Some(2.26),
        }
    }

    #[test]
    fn instances_read_as_inspect_prints_them() {
        assert_eq!(
            inspection().to_text(),
            "3 instances of workloads.OnCall; heap walk paused the JVM 2.3 ms\n\
             workloads.OnCall@6236a47f\n    owner = \"main\"\n\
             ... 2 more (-n shows more)\n"
        );
    }

    #[test]
    fn paths_statics_and_problems_are_one_line_each() {
        let mut at_path = inspection();
        at_path.path = Some("owner".into());
        at_path.classes[0].shown[0].value = Some("\"main\"".into());
        assert!(at_path
            .to_text()
            .contains("\nworkloads.OnCall@6236a47f.owner = \"main\"\n"));

        let mut statics = inspection();
        statics.static_field = Some("requestsServed".into());
        statics.walk_ms = None;
        statics.classes[0].static_value = Some("42".into());
        assert_eq!(statics.to_text(), "workloads.OnCall.requestsServed = 42\n");
        statics.classes[0].initialized = false;
        assert!(statics.to_text().contains("not initialised"));
        statics.classes[0].static_value = None;
        assert_eq!(
            statics.problem().as_deref(),
            Some("workloads.OnCall has no static field requestsServed")
        );

        let mut missing = inspection();
        missing.classes.clear();
        missing.similar = vec!["workloads.OnCalls".into()];
        assert_eq!(
            missing.to_text(),
            "class workloads.OnCall is not loaded (loaded: workloads.OnCalls)"
        );
    }
}
