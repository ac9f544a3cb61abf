//! What the plan's `+` and `@` patterns need to know of the classes loaded before the
//! session: which extend or implement their bases (the JVM's `IsAssignableFrom`), and which
//! may carry their annotations (their constant pools spell the annotation's type; the
//! class-file hook reads the annotations themselves when the class is retransformed).

use jtap_jvmti::sys;

use super::Tracing;
use crate::trace::ffi::{self, Jni};
use crate::trace::select;

impl Tracing {
    /// Tells the selector what it needs of the loaded classes `named` (internal names).
    pub(super) fn learn_loaded(&self, jni: Jni, named: &[(sys::jclass, String)]) {
        // `+` patterns: every loaded subtype of a loaded base is selected.
        for (base, base_name) in named {
            for index in self.selector.is_subtype_base(&select::dotted(base_name)) {
                for (class, name) in named {
                    if jni.is_assignable(*class, *base) {
                        self.selector.add_subtype(index, &select::dotted(name));
                    }
                }
            }
        }
        if self.selector.by_class_annotation() {
            for (class, name) in named {
                if select::refusal(name).is_some() {
                    continue;
                }
                if let Some(types) = ffi::pool_types(&self.env, *class) {
                    self.selector
                        .may_be_annotated(&select::dotted(name), &types);
                }
            }
        }
    }
}
