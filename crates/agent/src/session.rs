//! A client session: the connection of the client that started an engine. A `jtap-session-N`
//! thread watches it; when the client goes away (exit, Ctrl-C, SIGKILL all close the socket)
//! the engine it started is stopped.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use jtap_protocol::Frame;

use crate::agent::Agent;
use crate::channel::Channel;
use crate::thread::spawn_attached;

/// How often the watcher checks for the end of the session.
const POLL: Duration = Duration::from_millis(100);

/// One client's connection, kept while its engine runs.
pub struct Session {
    /// Numbers sessions for thread names and logs.
    pub id: u64,
    channel: Channel,
    ended: AtomicBool,
}

impl Session {
    /// A session over `channel`.
    pub fn new(id: u64, channel: Channel) -> Arc<Session> {
        Arc::new(Session { id, channel, ended: AtomicBool::new(false) })
    }

    /// Streams text to the client; a failure means the client is gone, which the watcher sees.
    pub fn send_text(&self, text: String) {
        if !self.is_ended() {
            if let Err(e) = self.channel.send(&Frame::Out(text)) {
                log!("session {}: {e}", self.id);
            }
        }
    }

    /// Ends the session with a final status (once; later calls do nothing).
    pub fn end(&self, code: i32, message: &str) {
        if !self.ended.swap(true, Ordering::SeqCst) {
            let _ = self.channel.send(&Frame::Done { code, message: message.to_string() });
        }
    }

    /// Whether the session has ended.
    pub fn is_ended(&self) -> bool {
        self.ended.load(Ordering::SeqCst)
    }
}

/// Starts the session's watcher thread, which returns once the session ends or its client
/// goes away (then telling the agent).
pub fn watch(agent: &'static Agent, session: Arc<Session>) {
    let name = format!("jtap-session-{}", session.id);
    let ticket = agent.watcher_started();
    let result = spawn_attached(agent.vm(), name, move || {
        let _ticket = ticket;
        while !session.is_ended() {
            if session.channel.hung_up(POLL) {
                agent.client_gone(&session);
                break;
            }
        }
    });
    if let Err(e) = result {
        log!("session: cannot start its thread: {e}");
    }
}
