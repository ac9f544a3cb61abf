//! A session this client owns, supervised to its end: the agent's frames are read on a
//! thread of their own while this thread asks for `Stop` on Ctrl-C, when the caller says so,
//! or when the engine runs past its expected end, and gives up on an agent that does not end
//! once asked.

use std::time::{Duration, Instant};

use crate::conversation::Conversation;
use crate::{interrupt, AgentError};

/// How long after its expected end (its `duration=`) an engine may take to end before this
/// client asks for the stop itself.
const END_GRACE: Duration = Duration::from_secs(5);
/// How long the agent gets, once asked to stop, to send the results and end.
const STOP_WAIT: Duration = Duration::from_secs(120);
/// How long an engine may take to start (a busy JVM, the first recording's symbol tables
/// and code map) before the time it took counts against its duration.
const START_WAIT: Duration = Duration::from_secs(60);

/// Why [`supervise`] asked the agent to stop, if it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asked {
    /// It did not: the agent ended the engine (its duration or count, the JVM's exit).
    Nothing,
    /// Ctrl-C.
    Interrupted,
    /// The engine ran `END_GRACE` past its expected end.
    Overdue,
    /// `stop_now` said so.
    Told,
}

/// Reads an engine-owning conversation to its end with `read` on a thread of its own, while
/// this thread keeps the end in hand: on Ctrl-C (taken while an [`interrupt::SessionTakes`] guard
/// lives), when `stop_now` says so, or
/// when the engine runs `END_GRACE` past `expected_end` (counted from its start; from the
/// conversation's opening, plus `START_WAIT`, while it has not started), it sends
/// `Stop`; if the agent then takes more than `STOP_WAIT` to end, it gives up with an error
/// rather than wait for ever.
/// `tick` runs every 50 ms (progress display). Returns what `read` returned and why a stop
/// was asked for.
pub fn supervise<T: Send>(
    conversation: Conversation,
    expected_end: Option<Duration>,
    stop_now: &dyn Fn() -> bool,
    tick: &mut dyn FnMut(Duration),
    read: impl FnOnce(Conversation) -> anyhow::Result<T> + Send,
) -> anyhow::Result<(T, Asked)> {
    let stopper = conversation.stopper()?;
    let engine_started = conversation.engine_started.clone();
    let opened = Instant::now();
    let started = || engine_started.get().copied().unwrap_or(opened);
    std::thread::scope(|scope| {
        let reader = scope.spawn(move || read(conversation));
        let mut asked = Asked::Nothing;
        let mut asked_at = None;
        while !reader.is_finished() {
            if asked == Asked::Nothing {
                asked = if interrupt::requested() {
                    Asked::Interrupted
                } else if expected_end.is_some_and(|end| match engine_started.get() {
                    Some(at) => at.elapsed() >= end + END_GRACE,
                    // A start slowed down by a busy JVM does not count against the duration.
                    None => opened.elapsed() >= end + END_GRACE + START_WAIT,
                }) {
                    Asked::Overdue
                } else if stop_now() {
                    Asked::Told
                } else {
                    Asked::Nothing
                };
                if asked != Asked::Nothing {
                    asked_at = Some(Instant::now());
                    // A failure means the agent is gone, which the reader sees.
                    let _ = stopper.stop();
                }
            }
            if asked_at.is_some_and(|at| at.elapsed() >= STOP_WAIT) {
                // Unblock the reader, so that the scope can end.
                let _ = stopper.0.shutdown(std::net::Shutdown::Both);
                let _ = reader.join();
                return Err(AgentError::Channel(format!(
                    "the agent did not end the session within {} s of being asked to stop",
                    STOP_WAIT.as_secs()
                ))
                .into());
            }
            tick(started().elapsed());
            std::thread::sleep(Duration::from_millis(50));
        }
        let result = reader
            .join()
            .unwrap_or_else(|_| Err(anyhow::anyhow!("the channel reader panicked")))?;
        Ok((result, asked))
    })
}
