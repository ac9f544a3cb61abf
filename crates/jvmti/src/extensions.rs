//! Extension events: events a VM offers beyond the specification, by id (HotSpot's
//! `com.sun.hotspot.events.VirtualThreadMount`, …).

use std::ffi::CStr;
use std::ptr;

use crate::env::Env;
use crate::error::Result;
use crate::memory::Allocation;
use crate::sys;

impl Env {
    /// The index of the extension event `id` and its parameter count, if the VM has it.
    pub fn extension_event(&self, id: &str) -> Result<Option<(sys::jint, usize)>> {
        let (mut count, mut events) = (0, ptr::null_mut());
        // SAFETY: valid env, local out-parameters.
        unsafe { jvmti_call!(self.raw(), GetExtensionEvents(&mut count, &mut events)) }?;
        // SAFETY: JVMTI allocated `count` descriptions for us.
        let events = unsafe { Allocation::from_raw(self.raw(), events, count as usize) };
        let mut found = None;
        for event in events.iter() {
            // Each description's strings and parameter array are JVMTI-allocated as well.
            // SAFETY: as above; `params` holds `param_count` entries.
            let params = unsafe {
                Allocation::from_raw(self.raw(), event.params, event.param_count as usize)
            };
            for param in params.iter() {
                // SAFETY: a name JVMTI allocated, freed once.
                drop(unsafe { Allocation::from_raw(self.raw(), param.name, 1) });
            }
            if !event.id.is_null()
                // SAFETY: a NUL-terminated id JVMTI allocated, read before it is freed.
                && unsafe { CStr::from_ptr(event.id) }.to_bytes() == id.as_bytes()
            {
                found = Some((event.extension_event_index, params.len()));
            }
            // SAFETY: strings JVMTI allocated, freed once.
            drop(unsafe { Allocation::from_raw(self.raw(), event.id, 1) });
            // SAFETY: as above.
            drop(unsafe { Allocation::from_raw(self.raw(), event.short_description, 1) });
        }
        Ok(found)
    }

    /// Sets (enabling the event) or clears (disabling it) the callback of extension event
    /// `index`.
    ///
    /// # Safety
    /// `callback` takes the parameters the VM documents for that event.
    pub unsafe fn set_extension_event_callback(
        &self,
        index: sys::jint,
        callback: sys::jvmtiExtensionEvent,
    ) -> Result<()> {
        // SAFETY: valid env; the caller vouches for the callback's signature.
        unsafe { jvmti_call!(self.raw(), SetExtensionEventCallback(index, callback)) }
    }
}
