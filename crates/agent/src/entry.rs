//! The entry points the JVM calls. Each catches panics: nothing unwinds into the JVM.

use std::ffi::{c_char, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};

use jtap_jvmti::sys;
use jtap_protocol::{Options, AGENT_RETURN_BAD_OPTIONS, AGENT_RETURN_CHANNEL, AGENT_RETURN_PANIC};

use crate::agent;
use crate::channel::Channel;
use crate::thread::Vm;

/// `-agentpath:/path/libjtap_agent.so[=<options>]`: the agent starts with the JVM.
///
/// A non-zero return makes the JVM refuse to start, which is what a mistyped option at
/// start-up deserves; the reason goes to the channel, or else to stderr.
#[no_mangle]
pub extern "C" fn Agent_OnLoad(
    vm: *mut sys::JavaVM,
    options: *mut c_char,
    _reserved: *mut c_void,
) -> sys::jint {
    guard(|| {
        // SAFETY: the JVM passes a NUL-terminated option string or null.
        let text = unsafe { option_text(options) };
        start_command(Vm(vm), &text, true)
    })
}

/// The attach `load` operation. The first call creates the agent; later calls (the JVM calls
/// this again in the same library) only run their command.
#[no_mangle]
pub extern "C" fn Agent_OnAttach(
    vm: *mut sys::JavaVM,
    options: *mut c_char,
    _reserved: *mut c_void,
) -> sys::jint {
    guard(|| {
        // SAFETY: the JVM passes a NUL-terminated option string or null.
        let text = unsafe { option_text(options) };
        start_command(Vm(vm), &text, false)
    })
}

/// The JVM is done with the agent (at its exit); VMDeath already flushed everything.
#[no_mangle]
pub extern "C" fn Agent_OnUnload(_vm: *mut sys::JavaVM) {
    crate::callback::guard_callback(|| log!("unloaded"));
}

fn start_command(vm: Vm, text: &str, from_onload: bool) -> i32 {
    let options = match Options::parse(text) {
        Ok(options) => options,
        Err(e) => return reject_options(text, &e.to_string(), from_onload),
    };
    crate::log::configure(&options);
    let channel = match options.channel.as_deref().map(Channel::connect) {
        None => None,
        Some(Ok(channel)) => Some(channel),
        Some(Err(e)) => {
            let message = format!("jtap agent: cannot connect to the control channel: {e}");
            log!("{message}");
            if from_onload {
                eprintln!("{message}");
            }
            return AGENT_RETURN_CHANNEL;
        }
    };
    let agent = match agent::init(vm, from_onload) {
        Ok(agent) => agent,
        Err((code, message)) => {
            let message = format!("jtap agent: cannot initialise: {message}");
            log!("{message}");
            match &channel {
                Some(channel) => channel.fail(code, &message),
                None if from_onload => eprintln!("{message}"),
                None => {}
            }
            return code;
        }
    };
    match channel {
        Some(channel) if !from_onload => agent.handle_in_background(options, channel),
        channel => agent.handle(&options, channel, from_onload),
    }
}

/// Bad options: say why over the channel if one can be made out, else on stderr at start-up.
fn reject_options(text: &str, reason: &str, from_onload: bool) -> i32 {
    let message = format!("bad agent options \"{text}\": {reason}");
    log!("{message}");
    let channel = text
        .split(',')
        .find_map(|item| item.strip_prefix("channel="))
        .and_then(|path| Channel::connect(path).ok());
    match channel {
        Some(channel) => channel.fail(AGENT_RETURN_BAD_OPTIONS, &message),
        None if from_onload => eprintln!("jtap agent: {message}"),
        None => {}
    }
    AGENT_RETURN_BAD_OPTIONS
}

/// # Safety
/// `options` is null or a NUL-terminated string.
unsafe fn option_text(options: *const c_char) -> String {
    if options.is_null() {
        return String::new();
    }
    // SAFETY: the caller guarantees a NUL-terminated string.
    unsafe { CStr::from_ptr(options) }
        .to_string_lossy()
        .into_owned()
}

/// Runs an entry point, turning a panic into `AGENT_RETURN_PANIC`.
fn guard(body: impl FnOnce() -> i32) -> sys::jint {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(AGENT_RETURN_PANIC)
}
