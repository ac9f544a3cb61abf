//! Old objects a leak report found, with their paths from a GC root: JFR carries each as a
//! `jdk.OldObjectSample` event, which JDK Mission Control's memory leak page shows.

use crate::model::StackId;

/// One old object: where it was allocated, when, and what holds it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OldObject {
    /// The allocation stack, in its profile (ending in the object's class).
    pub stack: StackId,
    /// Java name of its class.
    pub class: String,
    /// When it was allocated, in nanoseconds since the Unix epoch.
    pub allocated_ns: u64,
    /// How old it was when the path was taken, in nanoseconds.
    pub age_ns: u64,
    /// Its size in bytes.
    pub bytes: u64,
    /// Its length, for an array.
    pub array_length: Option<u32>,
    /// The objects from a GC root to it, root first (the last is the object itself).
    pub path: Vec<PathStep>,
}

/// One object on a path from a GC root, and how it is reached.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PathStep {
    /// How the previous object (or, first, the root) refers to it.
    pub via: Via,
    /// Java name of its class (`class app.Cache` for a class object).
    pub class: String,
}

/// How an object on a path is reached.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Via {
    /// A GC root of this kind (`system class`, `local variable of app.Main.run`, …).
    Root(String),
    /// An instance field.
    Field(String),
    /// A static field (the previous object is the class).
    StaticField(String),
    /// An element of an array.
    Element(u32),
    /// Any other reference (`its class loader`, `its constant pool`, …).
    Other(String),
}

impl PathStep {
    /// A step as leak reports print it, `how: class` (`static CACHE: java.util.ArrayList`,
    /// `.elementData: java.lang.Object[]`, `[12]: byte[]`); `first` says whether it is the
    /// root's.
    pub fn parse(text: &str, first: bool) -> PathStep {
        let (how, class) = text.split_once(": ").unwrap_or((text, ""));
        let via = if first {
            Via::Root(how.into())
        } else if let Some(name) = how.strip_prefix("static ") {
            Via::StaticField(name.into())
        } else if let Some(name) = how.strip_prefix('.') {
            Via::Field(name.into())
        } else if let Some(index) = how
            .strip_prefix('[')
            .and_then(|i| i.strip_suffix(']'))
            .and_then(|i| i.parse().ok())
        {
            Via::Element(index)
        } else {
            Via::Other(how.into())
        };
        PathStep {
            via,
            class: class.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_read_back_as_the_report_prints_them() {
        let path = [
            "system class: class app.Main",
            "static CACHE: java.util.ArrayList",
            ".elementData: java.lang.Object[]",
            "[12]: byte[]",
            "its class loader: jdk.internal.loader.ClassLoaders$AppClassLoader",
        ];
        let steps: Vec<PathStep> = path
            .iter()
            .enumerate()
            .map(|(i, s)| PathStep::parse(s, i == 0))
            .collect();
        assert_eq!(steps[0].via, Via::Root("system class".into()));
        assert_eq!(steps[0].class, "class app.Main");
        assert_eq!(steps[1].via, Via::StaticField("CACHE".into()));
        assert_eq!(steps[2].via, Via::Field("elementData".into()));
        assert_eq!(steps[3].via, Via::Element(12));
        assert_eq!(steps[3].class, "byte[]");
        assert_eq!(steps[4].via, Via::Other("its class loader".into()));
    }
}
