//! A client session: the connection of the client that started an engine. A `jtap-session-N`
//! thread watches it and ends the engine, on this thread (never the JVM's Attach Listener):
//! - when the client sends `Stop`, sending it the results;
//! - when the engine's `duration=` elapsed or the engine is done on its own (the tracer's
//!   `-n`), sending the results too: the agent keeps to what the user asked for even when
//!   the client is stuck;
//! - when the client goes away (exit, Ctrl-C, SIGKILL all close the socket), silently.
//!
//! While a sampling engine runs, the watcher also sends the client a progress frame (samples
//! so far) every second.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jtap_protocol::Frame;

use crate::agent::Agent;
use crate::channel::{Channel, ClientSaid};
use crate::engine::Report;
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
    /// A write failed: the stream is cut mid-frame.
    broken: AtomicBool,
}

impl Session {
    /// A session over `channel`.
    pub fn new(id: u64, channel: Channel) -> Arc<Session> {
        Arc::new(Session {
            id,
            channel,
            sending: Mutex::new(()),
            ended: AtomicBool::new(false),
            broken: AtomicBool::new(false),
        })
    }

    /// Sends one frame whole. A write that fails or times out (a client that stopped
    /// reading) leaves the stream cut mid-frame: nothing more is written to it, so a stuck
    /// client costs one write timeout, not one per frame.
    pub fn send_frame(&self, frame: Frame) {
        if self.is_ended() || self.broken.load(Ordering::SeqCst) {
            return;
        }
        let _sending = self.sending.lock().unwrap_or_else(|e| e.into_inner());
        if self.broken.load(Ordering::SeqCst) {
            return;
        }
        if let Err(e) = self.channel.send(&frame) {
            log!("session {}: {e}; no more writes to its client", self.id);
            self.broken.store(true, Ordering::SeqCst);
        }
    }

    /// Sends an engine's results: a profile, a record, a text report (stdout) or notes (stderr).
    pub fn send_report(&self, report: &Report) {
        self.send_frame(match report {
            Report::Profile(profile) => {
                Frame::Profile(jtap_protocol::wire::encode_profile(profile))
            }
            Report::Text(text) => Frame::Out(text.clone()),
            Report::Notes(text) => Frame::Note(text.clone()),
            Report::Record(record) => Frame::Record(record.encode()),
        });
    }

    /// Ends the session with a final status (once; later calls do nothing).
    pub fn end(&self, code: i32, message: &str) {
        if !self.ended.swap(true, Ordering::SeqCst) && !self.broken.load(Ordering::SeqCst) {
            let _sending = self.sending.lock().unwrap_or_else(|e| e.into_inner());
            let _ = self.channel.send(&Frame::Done {
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
        // Ends run on the agent's thread, like the commands (see `Agent::on_agent_thread`).
        let end = |how: fn(&Agent, &Arc<Session>, &str), why: String| {
            let session = session.clone();
            agent.on_agent_thread(Box::new(move || how(agent, &session, &why)));
        };
        while !session.is_ended() {
            match session.channel.poll_client(POLL) {
                ClientSaid::Gone => {
                    end(Agent::client_gone, String::new());
                    break;
                }
                ClientSaid::Stop => {
                    end(Agent::end_session, "stopped by its client".into());
                    break;
                }
                ClientSaid::Nothing => {}
            }
            if let Some(why) = agent.session_due(&session) {
                end(Agent::end_session, why);
                break;
            }
            polls += 1;
            if polls.is_multiple_of(PROGRESS_EVERY) {
                if let Some((samples, dropped)) = agent.progress_of(&session) {
                    session.send_frame(Frame::Progress { samples, dropped });
                }
            }
        }
    });
    if let Err(e) = result {
        log!("session: cannot start its thread: {e}");
    }
}
