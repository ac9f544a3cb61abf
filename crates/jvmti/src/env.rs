//! The JVMTI environment: creation, phase, capabilities and event control.

use std::ffi::c_void;
use std::marker::PhantomData;
use std::ops::Deref;
use std::ptr;

use crate::capabilities::{Capabilities, CapabilityReport};
use crate::error::{Error, Result};
use crate::sys;

/// A JVMTI environment, owned: dropping it disposes of it (its capabilities, callbacks and
/// tags go away with it), as does [`Env::dispose`], which also reports a failure. JVMTI
/// functions are thread safe, so `&Env` can be shared freely.
///
/// An environment that lives for the process (the agent's own, kept in a static) is simply
/// never dropped. An environment one does not own — the `jvmti_env` argument of an event
/// callback, or one whose owner is elsewhere — is an [`EnvRef`], which derefs to `&Env` and
/// never disposes.
#[derive(Debug)]
#[repr(transparent)]
pub struct Env {
    raw: *mut sys::jvmtiEnv,
}

// SAFETY: a jvmtiEnv may be used from any thread; JVMTI functions are thread safe and the
// pointer itself is never written through by us.
unsafe impl Send for Env {}
// SAFETY: as above, shared references only pass the pointer to JVMTI functions.
unsafe impl Sync for Env {}

impl Drop for Env {
    fn drop(&mut self) {
        // SAFETY: an owned, valid env, disposed of once: this value is going away. A failure
        // (the VM is gone) leaves nothing to release.
        let _ = unsafe { jvmti_call!(self.raw, DisposeEnvironment()) };
    }
}

/// A JVMTI environment borrowed for `'a`: a callback's `jvmti_env` argument, or an owned
/// [`Env`] lent to code that keeps a copy. Derefs to [`Env`]; dropping it releases nothing.
#[derive(Debug, Clone, Copy)]
pub struct EnvRef<'a> {
    raw: *mut sys::jvmtiEnv,
    _env: PhantomData<&'a Env>,
}

// SAFETY: as for `Env`: only the pointer is shared, passed to thread-safe JVMTI functions.
unsafe impl Send for EnvRef<'_> {}
// SAFETY: as above.
unsafe impl Sync for EnvRef<'_> {}

impl Deref for EnvRef<'_> {
    type Target = Env;

    fn deref(&self) -> &Env {
        // SAFETY: `Env` is `repr(transparent)` over the same pointer, so a reference to the
        // pointer is a reference to an `Env`; it is only borrowed, so never dropped (disposed).
        unsafe { &*(&self.raw as *const *mut sys::jvmtiEnv).cast::<Env>() }
    }
}

impl<'a> From<&'a Env> for EnvRef<'a> {
    fn from(env: &'a Env) -> EnvRef<'a> {
        env.borrowed()
    }
}

impl Env {
    /// Gets a JVMTI environment of `version` (e.g. [`sys::JVMTI_VERSION_11`]) from the VM;
    /// `JVMTI_ERROR_WRONG_PHASE` before the live phase (but in `Agent_OnLoad`).
    ///
    /// # Safety
    /// `vm` must be the `JavaVM` the JVM passed to `Agent_OnLoad`/`Agent_OnAttach`.
    pub unsafe fn from_vm(vm: *mut sys::JavaVM, version: u32) -> Result<Env> {
        let mut raw: *mut c_void = ptr::null_mut();
        // SAFETY: the caller guarantees `vm` is the VM's invocation interface, whose table
        // has GetEnv since JNI 1.2.
        let code = unsafe {
            match (**vm).GetEnv {
                Some(get_env) => get_env(vm, &mut raw, version as sys::jint),
                None => sys::JNI_ERR,
            }
        };
        if code != sys::JNI_OK as sys::jint || raw.is_null() {
            let error = match code {
                sys::JNI_EVERSION => sys::JVMTI_ERROR_UNSUPPORTED_VERSION,
                // HotSpot's answer outside the OnLoad and live phases: an attach while the
                // JVM is still starting.
                sys::JNI_EDETACHED => sys::JVMTI_ERROR_WRONG_PHASE,
                _ => sys::JVMTI_ERROR_INTERNAL,
            };
            return Err(Error {
                code: error,
                function: "GetEnv",
            });
        }
        Ok(Env { raw: raw.cast() })
    }

    /// The environment an event callback was called with, borrowed: never disposed of
    /// through the result.
    ///
    /// # Safety
    /// `raw` is a live JVMTI environment of this VM (e.g. a callback's `jvmti_env` argument)
    /// and stays so for `'a`.
    pub unsafe fn from_raw<'a>(raw: *mut sys::jvmtiEnv) -> EnvRef<'a> {
        EnvRef {
            raw,
            _env: PhantomData,
        }
    }

    /// This environment lent out as a copyable handle that cannot outlive it.
    pub fn borrowed(&self) -> EnvRef<'_> {
        EnvRef {
            raw: self.raw,
            _env: PhantomData,
        }
    }

    /// The raw environment pointer, for calls that have no wrapper.
    pub fn raw(&self) -> *mut sys::jvmtiEnv {
        self.raw
    }

    /// The VM's current phase (`JVMTI_PHASE_ONLOAD`, `..._LIVE`, `..._DEAD`, ...).
    pub fn phase(&self) -> Result<sys::jvmtiPhase> {
        let mut phase: sys::jvmtiPhase = 0;
        // SAFETY: valid env, pointer to a local out-parameter.
        unsafe { jvmti_call!(self.raw, GetPhase(&mut phase)) }?;
        Ok(phase)
    }

    /// The JVMTI version the VM implements (`0x30000000 | major << 16 | minor << 8`).
    pub fn version_number(&self) -> Result<u32> {
        let mut version: sys::jint = 0;
        // SAFETY: valid env, pointer to a local out-parameter.
        unsafe { jvmti_call!(self.raw, GetVersionNumber(&mut version)) }?;
        Ok(version as u32)
    }

    /// A system property of the VM (`java.vm.version`, ...), as the VM was started with it.
    pub fn system_property(&self, name: &std::ffi::CStr) -> Result<String> {
        let mut value = std::ptr::null_mut();
        // SAFETY: valid env, a NUL-terminated name, a local out-parameter.
        unsafe { jvmti_call!(self.raw, GetSystemProperty(name.as_ptr(), &mut value)) }?;
        // SAFETY: JVMTI allocated the string for us.
        Ok(unsafe { self.take_string(value) })
    }

    /// Capabilities this environment could get now (depends on the phase and other agents).
    pub fn potential_capabilities(&self) -> Result<Capabilities> {
        let mut caps = Capabilities::default();
        // SAFETY: valid env, pointer to a local capabilities struct.
        unsafe { jvmti_call!(self.raw, GetPotentialCapabilities(&mut caps.0)) }?;
        Ok(caps)
    }

    /// Capabilities this environment holds.
    pub fn capabilities(&self) -> Result<Capabilities> {
        let mut caps = Capabilities::default();
        // SAFETY: valid env, pointer to a local capabilities struct.
        unsafe { jvmti_call!(self.raw, GetCapabilities(&mut caps.0)) }?;
        Ok(caps)
    }

    /// Adds those of `wanted` the VM can give and reports which it refused. Fails only if the
    /// VM refuses even the potentially available ones (e.g. another agent took one meanwhile).
    pub fn add_capabilities(&self, wanted: &Capabilities) -> Result<CapabilityReport> {
        let potential = self.potential_capabilities()?;
        let granted = wanted.intersection(&potential);
        let refused = wanted.difference(&potential);
        if !granted.is_empty() {
            // SAFETY: valid env, pointer to a capabilities struct that outlives the call.
            unsafe { jvmti_call!(self.raw, AddCapabilities(&granted.0)) }?;
        }
        Ok(CapabilityReport { granted, refused })
    }

    /// Gives capabilities back, so the VM can drop what they cost.
    pub fn relinquish_capabilities(&self, caps: &Capabilities) -> Result<()> {
        if caps.is_empty() {
            return Ok(());
        }
        // SAFETY: valid env, pointer to a capabilities struct that outlives the call.
        unsafe { jvmti_call!(self.raw, RelinquishCapabilities(&caps.0)) }
    }

    /// Installs the environment's event callbacks (replacing all previous ones).
    pub fn set_event_callbacks(&self, callbacks: &sys::jvmtiEventCallbacks) -> Result<()> {
        let size = std::mem::size_of::<sys::jvmtiEventCallbacks>() as sys::jint;
        // SAFETY: valid env; JVMTI copies the struct, whose size we pass. The callbacks are
        // `extern "C"` functions with the signatures jvmti.h declares.
        unsafe { jvmti_call!(self.raw, SetEventCallbacks(callbacks, size)) }
    }

    /// Enables or disables delivery of `event` for all threads.
    pub fn set_event_enabled(&self, event: sys::jvmtiEvent, enabled: bool) -> Result<()> {
        let mode = if enabled {
            sys::JVMTI_ENABLE
        } else {
            sys::JVMTI_DISABLE
        };
        // SAFETY: valid env; a null thread means "all threads"; no variadic arguments follow.
        unsafe {
            jvmti_call!(
                self.raw,
                SetEventNotificationMode(mode, event, ptr::null_mut())
            )
        }
        .map_err(|e| Error {
            function: if enabled {
                "SetEventNotificationMode(ENABLE)"
            } else {
                "SetEventNotificationMode(DISABLE)"
            },
            ..e
        })
    }

    /// Sends this environment the events that describe the VM's current state: a
    /// CompiledMethodLoad for every compiled method (needs
    /// `can_generate_compiled_method_load_events`), a DynamicCodeGenerated for every stub.
    pub fn generate_events(&self, event: sys::jvmtiEvent) -> Result<()> {
        // SAFETY: valid env; the event type is a plain value JVMTI checks.
        unsafe { jvmti_call!(self.raw, GenerateEvents(event)) }
    }

    /// Disposes of the environment: its capabilities and callbacks go away with it. Dropping
    /// it does the same but ignores a failure.
    pub fn dispose(self) -> Result<()> {
        let raw = std::mem::ManuallyDrop::new(self).raw;
        // SAFETY: valid env, consumed here (and not dropped) so it is disposed of once and
        // cannot be used afterwards through this value.
        unsafe { jvmti_call!(raw, DisposeEnvironment()) }
    }
}

/// The name of a JVMTI event, e.g. `GarbageCollectionStart`, for messages.
pub fn event_name(event: sys::jvmtiEvent) -> &'static str {
    match event {
        sys::JVMTI_EVENT_VM_INIT => "VMInit",
        sys::JVMTI_EVENT_VM_DEATH => "VMDeath",
        sys::JVMTI_EVENT_THREAD_START => "ThreadStart",
        sys::JVMTI_EVENT_THREAD_END => "ThreadEnd",
        sys::JVMTI_EVENT_CLASS_FILE_LOAD_HOOK => "ClassFileLoadHook",
        sys::JVMTI_EVENT_CLASS_LOAD => "ClassLoad",
        sys::JVMTI_EVENT_CLASS_PREPARE => "ClassPrepare",
        sys::JVMTI_EVENT_VM_START => "VMStart",
        sys::JVMTI_EVENT_EXCEPTION => "Exception",
        sys::JVMTI_EVENT_EXCEPTION_CATCH => "ExceptionCatch",
        sys::JVMTI_EVENT_SINGLE_STEP => "SingleStep",
        sys::JVMTI_EVENT_FRAME_POP => "FramePop",
        sys::JVMTI_EVENT_BREAKPOINT => "Breakpoint",
        sys::JVMTI_EVENT_FIELD_ACCESS => "FieldAccess",
        sys::JVMTI_EVENT_FIELD_MODIFICATION => "FieldModification",
        sys::JVMTI_EVENT_METHOD_ENTRY => "MethodEntry",
        sys::JVMTI_EVENT_METHOD_EXIT => "MethodExit",
        sys::JVMTI_EVENT_NATIVE_METHOD_BIND => "NativeMethodBind",
        sys::JVMTI_EVENT_COMPILED_METHOD_LOAD => "CompiledMethodLoad",
        sys::JVMTI_EVENT_COMPILED_METHOD_UNLOAD => "CompiledMethodUnload",
        sys::JVMTI_EVENT_DYNAMIC_CODE_GENERATED => "DynamicCodeGenerated",
        sys::JVMTI_EVENT_DATA_DUMP_REQUEST => "DataDumpRequest",
        sys::JVMTI_EVENT_MONITOR_WAIT => "MonitorWait",
        sys::JVMTI_EVENT_MONITOR_WAITED => "MonitorWaited",
        sys::JVMTI_EVENT_MONITOR_CONTENDED_ENTER => "MonitorContendedEnter",
        sys::JVMTI_EVENT_MONITOR_CONTENDED_ENTERED => "MonitorContendedEntered",
        sys::JVMTI_EVENT_RESOURCE_EXHAUSTED => "ResourceExhausted",
        sys::JVMTI_EVENT_GARBAGE_COLLECTION_START => "GarbageCollectionStart",
        sys::JVMTI_EVENT_GARBAGE_COLLECTION_FINISH => "GarbageCollectionFinish",
        sys::JVMTI_EVENT_OBJECT_FREE => "ObjectFree",
        sys::JVMTI_EVENT_VM_OBJECT_ALLOC => "VMObjectAlloc",
        sys::JVMTI_EVENT_SAMPLED_OBJECT_ALLOC => "SampledObjectAlloc",
        sys::JVMTI_EVENT_VIRTUAL_THREAD_START => "VirtualThreadStart",
        sys::JVMTI_EVENT_VIRTUAL_THREAD_END => "VirtualThreadEnd",
        _ => "UnknownEvent",
    }
}
