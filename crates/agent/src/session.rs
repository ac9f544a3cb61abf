//! A client session: the connection of the client that started an engine. A `jtap-session-N`
//! thread watches it; when the client goes away (exit, Ctrl-C, SIGKILL all close the socket)
//! the engine it started is stopped. While a sampling engine runs, the watcher also sends
//! the client a progress frame (samples so far) every second.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jtap_protocol::Frame;

use crate::agent::Agent;
use crate::channel::Channel;
use crate::thread::spawn_attached;

/// How often the watcher checks for the end of the session.
const POLL: Duration = Duration::from_millis(100);
/// How often the watcher reports a sampling engine's progress.
const PROGRESS_EVERY: u32 = 10;

/// One client's connection, kept while its engine runs.
pub struct Session {
    /// Numbers sessions for thread names and logs.
    pub id: u64,
    channel: Channel,
    /// Frames from the watcher (progress) and from commands (results) must not interleave.
    sending: Mutex<()>,
    ended: AtomicBool,
}

impl Session {
    /// A session over `channel`.
    pub fn new(id: u64, channel: Channel) -> Arc<Session> {
        Arc::new(Session {
            id,
            channel,
            sending: Mutex::new(()),
            ended: AtomicBool::new(false),
        })
    }

    /// Sends one frame whole.
    fn send(&self, frame: &Frame) -> std::io::Result<()> {
        let _sending = self.sending.lock().unwrap_or_else(|e| e.into_inner());
        self.channel.send(frame)
    }

    /// Streams text to the client; a failure means the client is gone, which the watcher sees.
    pub fn send_text(&self, text: String) {
        if !self.is_ended() {
            if let Err(e) = self.send(&Frame::Out(text)) {
                log!("session {}: {e}", self.id);
            }
        }
    }

    /// Sends a profile (the engine's results) to the client.
    pub fn send_profile(&self, profile: &jtap_profile::Profile) {
        if !self.is_ended() {
            if let Err(e) = self.send(&Frame::Profile(jtap_protocol::wire::encode_profile(
                profile,
            ))) {
                log!("session {}: {e}", self.id);
            }
        }
    }

    /// Ends the session with a final status (once; later calls do nothing).
    pub fn end(&self, code: i32, message: &str) {
        if !self.ended.swap(true, Ordering::SeqCst) {
            let _ = self.send(&Frame::Done {
                code,
                message: message.to_string(),
            });
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
        let mut polls = 0u32;
        while !session.is_ended() {
            if session.channel.hung_up(POLL) {
                agent.client_gone(&session);
                break;
            }
            polls += 1;
            if polls.is_multiple_of(PROGRESS_EVERY) {
                if let Some((samples, dropped)) = crate::sampling::progress() {
                    if !session.is_ended() {
                        let _ = session.send(&Frame::Progress { samples, dropped });
                    }
                }
            }
        }
    });
    if let Err(e) = result {
        log!("session: cannot start its thread: {e}");
    }
}
