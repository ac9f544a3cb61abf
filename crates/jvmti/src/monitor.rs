//! JVMTI raw monitors: locks usable from any thread, also inside callbacks where Java
//! monitors and most JVMTI functions are off limits.

use std::ffi::CString;
use std::ptr;

use crate::env::Env;
use crate::error::Result;
use crate::sys;

/// A raw monitor, destroyed on drop.
#[derive(Debug)]
pub struct RawMonitor {
    env: *mut sys::jvmtiEnv,
    id: sys::jrawMonitorID,
}

// SAFETY: raw monitors are designed to be entered from any thread.
unsafe impl Send for RawMonitor {}
// SAFETY: as above; all operations go through JVMTI, which synchronises them.
unsafe impl Sync for RawMonitor {}

/// Holds a [`RawMonitor`]; exits it on drop.
#[derive(Debug)]
pub struct MonitorGuard<'a> {
    monitor: &'a RawMonitor,
}

impl Env {
    /// Creates a raw monitor; `name` shows up in VM diagnostics.
    pub fn create_raw_monitor(&self, name: &str) -> Result<RawMonitor> {
        let name = CString::new(name.replace('\0', "?")).unwrap_or_default();
        let mut id: sys::jrawMonitorID = ptr::null_mut();
        // SAFETY: valid env, NUL-terminated name that outlives the call, local out-parameter.
        unsafe { jvmti_call!(self.raw(), CreateRawMonitor(name.as_ptr(), &mut id)) }?;
        Ok(RawMonitor {
            env: self.raw(),
            id,
        })
    }
}

impl RawMonitor {
    /// Enters the monitor, blocking until it is free.
    pub fn enter(&self) -> Result<MonitorGuard<'_>> {
        // SAFETY: valid env and a monitor it created that is not yet destroyed.
        unsafe { jvmti_call!(self.env, RawMonitorEnter(self.id)) }?;
        Ok(MonitorGuard { monitor: self })
    }
}

impl MonitorGuard<'_> {
    /// Waits up to `millis` (0: forever) for a notification, releasing the monitor meanwhile.
    pub fn wait(&self, millis: i64) -> Result<()> {
        // SAFETY: we own the monitor (the guard exists), as RawMonitorWait requires.
        unsafe { jvmti_call!(self.monitor.env, RawMonitorWait(self.monitor.id, millis)) }
    }

    /// Wakes every thread waiting on the monitor.
    pub fn notify_all(&self) -> Result<()> {
        // SAFETY: we own the monitor (the guard exists), as RawMonitorNotifyAll requires.
        unsafe { jvmti_call!(self.monitor.env, RawMonitorNotifyAll(self.monitor.id)) }
    }
}

impl Drop for MonitorGuard<'_> {
    fn drop(&mut self) {
        // SAFETY: the guard proves we entered the monitor; exit it once.
        let _ = unsafe { jvmti_call!(self.monitor.env, RawMonitorExit(self.monitor.id)) };
    }
}

impl Drop for RawMonitor {
    fn drop(&mut self) {
        // SAFETY: no guard can outlive the monitor (borrow), so nobody holds it; destroy once.
        let _ = unsafe { jvmti_call!(self.env, DestroyRawMonitor(self.id)) };
    }
}
