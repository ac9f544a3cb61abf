//! A client session: the connection of the client that started a recording, over which its
//! results go and its `Stop` comes in. The agent's watcher thread for it (`agent::watcher`)
//! ends the recording when the client asks, goes away, or the recording is due.

#![deny(unsafe_code)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use jtap_protocol::Frame;

use crate::channel::{Channel, ClientSaid, ClientSink};
use crate::engine::Report;

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

    /// What the client did within `timeout` (see [`Channel::poll_client`]).
    pub fn poll_client(&self, timeout: std::time::Duration) -> ClientSaid {
        self.channel.poll_client(timeout)
    }

    /// Whether the session has ended.
    pub fn is_ended(&self) -> bool {
        self.ended.load(Ordering::SeqCst)
    }
}

impl ClientSink for Session {
    /// Sends one frame whole. A write that fails or times out (a client that stopped
    /// reading) leaves the stream cut mid-frame: nothing more is written to it, so a stuck
    /// client costs one write timeout, not one per frame.
    fn send_frame(&self, frame: Frame) {
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
}
