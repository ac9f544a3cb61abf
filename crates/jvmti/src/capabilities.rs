//! Capabilities by name: what jtap asks for, what the VM can give, and what it refused.

use std::fmt;

use crate::sys;

macro_rules! capability_table {
    ($($name:ident $setter:ident,)*) => {
        /// Every capability of `jvmtiCapabilities` (JDK 25), in `jvmti.h` order.
        pub const NAMES: &[&str] = &[$(stringify!($name)),*];

        fn get(caps: &sys::jvmtiCapabilities, name: &str) -> Option<bool> {
            match name {
                $(stringify!($name) => Some(caps.$name() != 0),)*
                _ => None,
            }
        }

        fn set(caps: &mut sys::jvmtiCapabilities, name: &str, on: bool) -> bool {
            match name {
                $(stringify!($name) => { caps.$setter(u32::from(on)); true })*
                _ => false,
            }
        }
    };
}

capability_table! {
    can_tag_objects set_can_tag_objects,
    can_generate_field_modification_events set_can_generate_field_modification_events,
    can_generate_field_access_events set_can_generate_field_access_events,
    can_get_bytecodes set_can_get_bytecodes,
    can_get_synthetic_attribute set_can_get_synthetic_attribute,
    can_get_owned_monitor_info set_can_get_owned_monitor_info,
    can_get_current_contended_monitor set_can_get_current_contended_monitor,
    can_get_monitor_info set_can_get_monitor_info,
    can_pop_frame set_can_pop_frame,
    can_redefine_classes set_can_redefine_classes,
    can_signal_thread set_can_signal_thread,
    can_get_source_file_name set_can_get_source_file_name,
    can_get_line_numbers set_can_get_line_numbers,
    can_get_source_debug_extension set_can_get_source_debug_extension,
    can_access_local_variables set_can_access_local_variables,
    can_maintain_original_method_order set_can_maintain_original_method_order,
    can_generate_single_step_events set_can_generate_single_step_events,
    can_generate_exception_events set_can_generate_exception_events,
    can_generate_frame_pop_events set_can_generate_frame_pop_events,
    can_generate_breakpoint_events set_can_generate_breakpoint_events,
    can_suspend set_can_suspend,
    can_redefine_any_class set_can_redefine_any_class,
    can_get_current_thread_cpu_time set_can_get_current_thread_cpu_time,
    can_get_thread_cpu_time set_can_get_thread_cpu_time,
    can_generate_method_entry_events set_can_generate_method_entry_events,
    can_generate_method_exit_events set_can_generate_method_exit_events,
    can_generate_all_class_hook_events set_can_generate_all_class_hook_events,
    can_generate_compiled_method_load_events set_can_generate_compiled_method_load_events,
    can_generate_monitor_events set_can_generate_monitor_events,
    can_generate_vm_object_alloc_events set_can_generate_vm_object_alloc_events,
    can_generate_native_method_bind_events set_can_generate_native_method_bind_events,
    can_generate_garbage_collection_events set_can_generate_garbage_collection_events,
    can_generate_object_free_events set_can_generate_object_free_events,
    can_force_early_return set_can_force_early_return,
    can_get_owned_monitor_stack_depth_info set_can_get_owned_monitor_stack_depth_info,
    can_get_constant_pool set_can_get_constant_pool,
    can_set_native_method_prefix set_can_set_native_method_prefix,
    can_retransform_classes set_can_retransform_classes,
    can_retransform_any_class set_can_retransform_any_class,
    can_generate_resource_exhaustion_heap_events set_can_generate_resource_exhaustion_heap_events,
    can_generate_resource_exhaustion_threads_events set_can_generate_resource_exhaustion_threads_events,
    can_generate_early_vmstart set_can_generate_early_vmstart,
    can_generate_early_class_hook_events set_can_generate_early_class_hook_events,
    can_generate_sampled_object_alloc_events set_can_generate_sampled_object_alloc_events,
    can_support_virtual_threads set_can_support_virtual_threads,
}

/// A set of JVMTI capabilities.
#[derive(Clone, Copy, Default)]
pub struct Capabilities(pub sys::jvmtiCapabilities);

impl Capabilities {
    /// The set holding the named capabilities. Unknown names are a programming error: panics.
    pub fn of(names: &[&str]) -> Capabilities {
        let mut caps = Capabilities::default();
        for name in names {
            assert!(
                set(&mut caps.0, name, true),
                "unknown JVMTI capability {name}"
            );
        }
        caps
    }

    /// Whether the named capability is in the set (false for unknown names).
    pub fn has(&self, name: &str) -> bool {
        get(&self.0, name).unwrap_or(false)
    }

    /// The names of the capabilities in the set.
    pub fn names(&self) -> Vec<&'static str> {
        NAMES.iter().copied().filter(|n| self.has(n)).collect()
    }

    /// The capabilities in both sets.
    pub fn intersection(&self, other: &Capabilities) -> Capabilities {
        Capabilities::of(
            &self
                .names()
                .into_iter()
                .filter(|n| other.has(n))
                .collect::<Vec<_>>(),
        )
    }

    /// The capabilities of `self` that `other` lacks.
    pub fn difference(&self, other: &Capabilities) -> Capabilities {
        Capabilities::of(
            &self
                .names()
                .into_iter()
                .filter(|n| !other.has(n))
                .collect::<Vec<_>>(),
        )
    }

    /// True when the set is empty.
    pub fn is_empty(&self) -> bool {
        self.names().is_empty()
    }
}

impl fmt::Debug for Capabilities {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.names()).finish()
    }
}

/// What [`Env::add_capabilities`](crate::Env::add_capabilities) got: granted and refused names.
#[derive(Debug, Clone, Default)]
pub struct CapabilityReport {
    /// Capabilities now held.
    pub granted: Capabilities,
    /// Capabilities asked for that the VM cannot give in this phase (or another agent holds).
    pub refused: Capabilities,
}

impl fmt::Display for CapabilityReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "granted: {}", list(&self.granted))?;
        if !self.refused.is_empty() {
            write!(f, "; refused by the VM: {}", list(&self.refused))?;
        }
        Ok(())
    }
}

fn list(caps: &Capabilities) -> String {
    let names = caps.names();
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_by_name_and_reports() {
        assert_eq!(NAMES.len(), 45);
        let wanted = Capabilities::of(&["can_tag_objects", "can_retransform_classes"]);
        assert!(wanted.has("can_tag_objects") && !wanted.has("can_suspend"));
        let potential = Capabilities::of(&["can_tag_objects", "can_suspend"]);
        let report = CapabilityReport {
            granted: wanted.intersection(&potential),
            refused: wanted.difference(&potential),
        };
        assert_eq!(
            report.to_string(),
            "granted: can_tag_objects; refused by the VM: can_retransform_classes"
        );
        assert_eq!(Capabilities::default().names(), Vec::<&str>::new());
    }
}
