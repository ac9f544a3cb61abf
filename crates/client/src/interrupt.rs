//! The one Ctrl-C handler of the process. By default Ctrl-C ends jtap at once (exit code
//! given to [`install`]), after removing what it left in a target's `/tmp` and cwd (attach
//! trigger files, channel sockets, library copies). While a [`SessionTakes`] guard lives, the
//! first Ctrl-C is the session's instead: [`requested`] turns true and the session ends
//! cleanly (a profile is still written, traced classes are restored); a second one exits.

use std::sync::atomic::{AtomicBool, Ordering};

/// Set while a session takes Ctrl-C.
static SESSION_TAKES: AtomicBool = AtomicBool::new(false);
/// Ctrl-C was pressed while a session took it.
static REQUESTED: AtomicBool = AtomicBool::new(false);

/// Installs the handler; an uncaught Ctrl-C exits with `exit_code`.
pub fn install(exit_code: i32) {
    // Ctrl-C must not leave trigger files behind in the target's /tmp or cwd.
    let _ = ctrlc::set_handler(move || {
        // A profile being collected stops early and is still written.
        if session_took_it() {
            return;
        }
        jtap_attach::remove_pending_trigger_files();
        crate::files::remove_pending_files();
        std::process::exit(exit_code);
    });
}

/// True when a session takes this Ctrl-C; false means "exit now".
fn session_took_it() -> bool {
    SESSION_TAKES.load(Ordering::SeqCst) && !REQUESTED.swap(true, Ordering::SeqCst)
}

/// Whether Ctrl-C was pressed while a session took it.
pub fn requested() -> bool {
    REQUESTED.load(Ordering::SeqCst)
}

/// While it lives, the first Ctrl-C ends the running session instead of jtap.
#[must_use = "Ctrl-C is the session's only while the guard lives"]
pub struct SessionTakes(());

/// Hands Ctrl-C to the session until the guard drops.
pub fn session_takes() -> SessionTakes {
    SESSION_TAKES.store(true, Ordering::SeqCst);
    SessionTakes(())
}

impl Drop for SessionTakes {
    fn drop(&mut self) {
        SESSION_TAKES.store(false, Ordering::SeqCst);
    }
}
