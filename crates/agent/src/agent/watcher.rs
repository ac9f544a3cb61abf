//! Session watchers: a `jtap-session-N` thread per owned recording that watches its client
//! and ends the recording on the agent's thread (never the JVM's Attach Listener):
//! - when the client sends `Stop`, sending it the results;
//! - when the recording's `duration=` elapsed or an engine is done on its own (the tracer's
//!   `-n`), sending the results too: the agent keeps to what the user asked for even when
//!   the client is stuck;
//! - when the client goes away (exit, Ctrl-C, SIGKILL all close the socket), silently.
//!
//! While a sampling engine runs, the watcher also sends the client a progress frame (samples
//! so far) every second.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jtap_protocol::{Ended, Frame, AGENT_RETURN_OK};

use super::Agent;
use crate::channel::{ClientSaid, ClientSink};
use crate::session::Session;
use crate::thread::spawn_attached;

/// How often the watcher checks for the end of the session.
const POLL: Duration = Duration::from_millis(100);
/// How often the watcher reports a sampling engine's progress.
const PROGRESS_EVERY: u32 = 10;

/// Keeps the count of live watcher threads; dropping it counts one down.
pub struct WatcherTicket(&'static Agent);

impl Drop for WatcherTicket {
    fn drop(&mut self) {
        self.0.live_watchers.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Agent {
    /// Counts a watcher thread about to start.
    pub fn watcher_started(&'static self) -> WatcherTicket {
        self.live_watchers.fetch_add(1, Ordering::SeqCst);
        WatcherTicket(self)
    }

    /// Starts the session's watcher thread, which returns once the session ends or its client
    /// goes away (then telling the agent).
    pub fn watch(&'static self, session: Arc<Session>) {
        let agent = self;
        let name = format!("jtap-session-{}", session.id);
        let ticket = agent.watcher_started();
        let result = spawn_attached(agent.vm(), name, move || {
            let _ticket = ticket;
            let mut polls = 0u32;
            // Ends run on the agent's thread, like the commands (see `Agent::on_agent_thread`).
            let end = |how: fn(&Agent, &Arc<Session>, &Ended), why: Ended| {
                let session = session.clone();
                agent.on_agent_thread(Box::new(move || how(agent, &session, &why)));
            };
            while !session.is_ended() {
                match session.poll_client(POLL) {
                    ClientSaid::Gone => {
                        end(Agent::client_gone, Ended::ClientGone);
                        break;
                    }
                    ClientSaid::Stop => {
                        end(Agent::end_session, Ended::Stopped);
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

    /// Stops the recording `session` owns, if it still runs, and sends the results to it;
    /// then ends the session with `why`: its client asked (`Stop`), or [`Agent::session_due`].
    pub fn end_session(&self, session: &Arc<Session>, why: &Ended) {
        let mut state = self.state();
        let reports = state
            .take_recording_of(session)
            .map(|recording| self.stop_recording(&state, recording).0);
        drop(state);
        for report in reports.iter().flatten() {
            session.send_report(report);
        }
        session.end(AGENT_RETURN_OK, why.message());
    }

    /// Why the recording `session` owns should end now without being asked (its `duration=`
    /// elapsed, or an engine finished on its own), if it should.
    pub fn session_due(&self, session: &Arc<Session>) -> Option<Ended> {
        let state = self.state();
        let recording = state.recording_of(session)?;
        if recording.deadline.is_some_and(|d| Instant::now() >= d) {
            return Some(Ended::DurationElapsed);
        }
        recording
            .engines
            .iter()
            .filter(|r| r.live)
            .find_map(|r| r.engine.ended())
    }

    /// Samples recorded and dropped so far by the sampling engines `session` owns.
    pub fn progress_of(&self, session: &Arc<Session>) -> Option<(u64, u64)> {
        let state = self.state();
        state
            .recording_of(session)?
            .engines
            .iter()
            .filter_map(|r| r.engine.progress())
            .reduce(|(s1, d1), (s2, d2)| (s1 + s2, d1 + d2))
    }

    /// The watcher saw `session`'s client go away: stop what it started, silently.
    pub fn client_gone(&self, session: &Arc<Session>, _why: &Ended) {
        let mut state = self.state();
        if let Some(recording) = state.take_recording_of(session) {
            self.stop_recording(&state, recording);
        }
        drop(state);
        session.end(AGENT_RETURN_OK, Ended::ClientGone.message());
    }
}
