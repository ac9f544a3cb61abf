//! One round of the search: a calltree session timing the entry and a window of the path's
//! levels (or the call sites of its last level), beside a wall profile of the JVM.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use jtap_profile::Profile;
use jtap_protocol::records::{CallTree, Record};
use jtap_protocol::trace::{MethodPattern, Mode, Plan, DISCARDED_ALL_COMPILED_CODE};
use jtap_protocol::{Action, Event, Options};

use super::super::{beside_profile, run_session};
use super::path::Method;
use super::Auto;

/// The calltree plan timing the entry and the levels of `window`.
pub(super) fn timing_plan(entry: &str, window: &[Method]) -> anyhow::Result<Plan> {
    let mut inner = vec![MethodPattern::parse(entry).map_err(crate::exit::usage)?];
    for method in window {
        inner.push(MethodPattern::parse(&method.pattern()).map_err(crate::exit::usage)?);
    }
    Ok(Plan {
        mode: Mode::Calltree,
        targets: vec![MethodPattern::parse(entry).map_err(crate::exit::usage)?],
        // The entry among the inner methods makes a tree of inner methods only (no call
        // sites); as the target, it is timed as the entry.
        inner,
        ..Plan::default()
    })
}

/// The calltree plan timing the call sites of the path's last level: the level as the target,
/// no inner methods.
pub(super) fn call_site_plan(last: &Method) -> anyhow::Result<Plan> {
    Ok(Plan {
        mode: Mode::Calltree,
        targets: vec![MethodPattern::parse(&last.pattern()).map_err(crate::exit::usage)?],
        ..Plan::default()
    })
}

/// One round: a calltree session of `plan` for `length`, beside a wall profile of the JVM at
/// `interval`.
pub(super) fn round(
    auto: &Auto,
    plan: Plan,
    length: Duration,
    interval: Duration,
) -> anyhow::Result<Round> {
    let options = Options {
        action: Some(Action::Start),
        event: Some(Event::Trace),
        duration: Some(length),
        trace: Some(plan),
        ..Options::default()
    };
    let profile_options = Options {
        action: Some(Action::Start),
        event: Some(Event::Wall),
        interval: Some(interval),
        ..Options::default()
    };
    let trees = Mutex::new(Vec::new());
    let discarded = AtomicBool::new(false);
    let mut on_frame = |frame: jtap_protocol::Frame| {
        match &frame {
            jtap_protocol::Frame::Record(bytes) => {
                if let Ok(Record::Tree(tree)) = Record::decode(bytes) {
                    trees.lock().unwrap_or_else(|e| e.into_inner()).push(tree);
                }
            }
            jtap_protocol::Frame::Note(text) if text.starts_with(DISCARDED_ALL_COMPILED_CODE) => {
                discarded.store(true, Ordering::Relaxed);
            }
            _ => {}
        }
        Ok(())
    };
    let (pid, timeout) = (auto.pid, auto.timeout);
    let profiles = beside_profile(pid, &profile_options, timeout, || {
        run_session(pid, &options, timeout, &|| false, |conversation| {
            conversation.finish(&mut io::sink(), Some(&mut on_frame))
        })
    })?
    .1;
    let mut profiles = profiles.into_iter();
    let merged = profiles.next().map(|mut all| {
        profiles.for_each(|profile| all.merge(&profile));
        all
    });
    Ok(Round {
        trees: trees.into_inner().unwrap_or_else(|e| e.into_inner()),
        profile: merged,
        discarded_compiled_code: discarded.into_inner(),
    })
}

/// What one round brought back.
pub(super) struct Round {
    /// The trees of the entry calls that ended in it.
    pub trees: Vec<CallTree>,
    /// The wall profile of the JVM beside it.
    pub profile: Option<Profile>,
    /// Its class changes made HotSpot discard all the JVM's compiled code.
    pub discarded_compiled_code: bool,
}
