//! A recording: what one `start` runs — its engines, owner, deadline, period files, push
//! endpoint and request labels — and how its results are delivered.

use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use jtap_jvmti::Capabilities;
use jtap_protocol::{Event, Frame, Options};

use crate::channel::ClientSink;
use crate::engine::{Engine, Report, Resource};
use crate::push::{Contents, Period, Pusher, MOST_SERIES};
use crate::rotation::{Ended, Rotation};
use crate::session::Session;
use crate::trace::labels::Labelling;

/// What one `start` runs.
pub(super) struct Recording {
    pub(super) id: u64,
    /// In the order `start` named their events.
    pub(super) engines: Vec<Running>,
    /// The `start` options, kept for engines whose start waits for VMInit.
    pub(super) options: Options,
    pub(super) started: Instant,
    /// `duration=`: when the agent stops the recording itself and sends its owner the results.
    pub(super) deadline: Option<Instant>,
    pub(super) owner: Option<Arc<Session>>,
    pub(super) file: Option<String>,
    /// `loop=`: the files of its periods.
    pub(super) rotation: Option<Rotation>,
    /// `push=`: where its periods go.
    pub(super) pusher: Option<Pusher>,
    /// `by=`: the request labels its samples carry.
    pub(super) labels: Option<Labelling>,
}

/// Whether a recording's labels start after its engines and stop before them: with a trace,
/// so that the label probes wrap the trace's (a later JVMTI environment's class-file hook
/// rewrites the bytes an earlier one made). An entry method's own traced calls then end
/// inside their label, and each session's restore finds the class as it was at its start.
pub(super) fn labels_wrap_engines(events: &[Event]) -> bool {
    events.contains(&Event::Trace)
}

impl Recording {
    /// Ends its request labels, if it has any, and tells its owner.
    pub(super) fn stop_labels(&mut self) {
        if let Some(labels) = self.labels.take() {
            let summary = labels.stop();
            log!("recording {}: {summary}", self.id);
            if let Some(owner) = &self.owner {
                owner.send_frame(Frame::Note(summary));
            }
        }
    }

    /// Where its results go now, and since when they were recorded: `file=`, or with
    /// `loop=` the period's file (if any) and start; the next period starts now.
    pub(super) fn end_period(&mut self) -> Ended {
        match &mut self.rotation {
            Some(rotation) => rotation.end_period(),
            None => {
                let ended = SystemTime::now();
                Ended {
                    file: self.file.clone(),
                    began: ended - self.started.elapsed(),
                    ended,
                }
            }
        }
    }

    /// Delivers results: to `file` (rendered by its extension; with `loop=`, older files
    /// beyond `keep=` are deleted) and with `push=` as JFR to the endpoint. Failures go to
    /// the agent's log: nobody waits for them.
    pub(super) fn deliver(&mut self, period: Ended, reports: &[Report]) {
        if let Some(file) = &period.file {
            match write_reports(file, reports) {
                Ok(written) => {
                    if let Some(rotation) = &mut self.rotation {
                        rotation.written(&written).iter().for_each(|e| log!("{e}"));
                    }
                }
                Err(e) => log!("recording {}: {e}", self.id),
            }
        }
        if let Some(pusher) = &self.pusher {
            let seconds = |t: SystemTime| t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
            pusher.push(Period {
                from: seconds(period.began),
                until: seconds(period.ended).max(seconds(period.began) + 1),
                contents: match pusher.takes_jfr() {
                    true => Contents::Jfr(Report::render_jfr_by_label(reports, MOST_SERIES)),
                    false => Contents::Profiles(
                        reports
                            .iter()
                            .filter_map(|report| match report {
                                Report::Profile(profile) => Some(profile.as_ref().clone()),
                                _ => None,
                            })
                            .collect(),
                    ),
                },
            });
        }
    }
}

/// One engine of a recording.
pub(super) struct Running {
    pub(super) event: Event,
    pub(super) engine: Box<dyn Engine>,
    pub(super) holds: Vec<Resource>,
    /// What it added to the agent's environment (given back when no other engine needs it).
    pub(super) capabilities: Capabilities,
    /// False while the engine waits for the live phase (sampling engines given at start-up).
    pub(super) live: bool,
}

impl Recording {
    /// Its engines' names, as `cpu,alloc`.
    pub(super) fn names(&self) -> String {
        self.engines
            .iter()
            .map(|r| r.engine.name())
            .collect::<Vec<_>>()
            .join(",")
    }

    pub(super) fn owner_text(&self) -> String {
        match &self.owner {
            Some(owner) => format!("owned by the client of session {}", owner.id),
            None => "detached".into(),
        }
    }

    /// Each engine's results so far.
    pub(super) fn reports(&self) -> Vec<Report> {
        self.engines.iter().map(Running::report).collect()
    }
}

impl Running {
    /// The results so far (empty while waiting for VMInit).
    pub(super) fn report(&self) -> Report {
        if self.live {
            self.engine.dump()
        } else {
            Report::Text(format!(
                "{}: waiting for the JVM to finish starting",
                self.event
            ))
        }
    }
}

/// Writes the results of one or more engines to `file`, rendered by its extension.
pub(super) fn write_reports(file: &str, reports: &[Report]) -> Result<Vec<String>, String> {
    let mut written = Vec::new();
    for (path, bytes) in Report::render_all_for(reports, file) {
        jtap_profile::write_atomically(&path, &bytes)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        written.push(path.display().to_string());
    }
    Ok(written)
}
