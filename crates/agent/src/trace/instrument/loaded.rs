//! What the plan's `+` patterns (methods and callees) and `@` patterns need to know of the
//! classes loaded before the session: which extend or implement their bases (the JVM's
//! `IsAssignableFrom`), and which may carry their annotations (their constant pools spell
//! the annotation's type; the class-file hook reads the annotations themselves when the
//! class is retransformed).

use jtap_jvmti::sys;

use super::Tracing;
use crate::trace::ffi::{self, Jni};
use crate::trace::select;

impl Tracing {
    /// Tells the selector what it needs of the loaded classes `named` (internal names).
    pub(super) fn learn_loaded(&self, jni: Jni, named: &[(sys::jclass, String)]) {
        // `+` patterns: every loaded subtype of a loaded base is selected, or is an owner
        // whose methods a `+` callee names.
        for (base, base_name) in named {
            let base_name = select::dotted(base_name);
            let hosts = self.selector.is_subtype_base(&base_name);
            let callees = self.selector.callee_bases(&base_name);
            if hosts.is_empty() && callees.is_empty() {
                continue;
            }
            for (class, name) in named {
                if !jni.is_assignable(*class, *base) {
                    continue;
                }
                let name = select::dotted(name);
                hosts
                    .iter()
                    .for_each(|&i| self.selector.add_subtype(i, &name));
                callees
                    .iter()
                    .for_each(|&i| self.selector.add_callee_subtype(i, &name));
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
