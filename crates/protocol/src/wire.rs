//! Profiles on the control channel: a [`Profile`] as compact JSON — its metadata, its frame
//! table and its stacks as lists of frame indices — carried by a [`crate::Frame::Profile`].

use jtap_profile::{Frame, FrameId, LoggedSample, Metadata, Profile, StackCounts};
use serde::{Deserialize, Serialize};

/// The serialised shape of a profile.
#[derive(Serialize, Deserialize)]
struct WireProfile {
    metadata: Metadata,
    frames: Vec<Frame>,
    /// `(frame ids root first, samples, weight, events)`.
    stacks: Vec<(Vec<FrameId>, u64, u64, u64)>,
    /// The event log: `(time ns, thread id, index into stacks, samples, weight, events)`.
    #[serde(default)]
    log: Vec<(u64, u32, u32, u64, u64, u64)>,
    /// Names of the log's threads.
    #[serde(default)]
    threads: Vec<(u32, String)>,
}

/// Serialises a profile for a [`crate::Frame::Profile`].
pub fn encode_profile(profile: &Profile) -> Vec<u8> {
    let wire = WireProfile {
        metadata: profile.metadata.clone(),
        frames: profile.frames().to_vec(),
        stacks: profile
            .stacks_by_id()
            .map(|(ids, c)| (ids.to_vec(), c.samples, c.weight, c.events))
            .collect(),
        log: profile
            .logged()
            .iter()
            .map(|s| {
                let c = s.counts;
                (s.time_ns, s.tid, s.stack, c.samples, c.weight, c.events)
            })
            .collect(),
        threads: profile
            .thread_names()
            .iter()
            .map(|(&tid, name)| (tid, name.clone()))
            .collect(),
    };
    serde_json::to_vec(&wire).expect("a profile always serialises")
}

/// Reads back a profile [`encode_profile`] wrote; rejects frame and stack ids out of range.
pub fn decode_profile(bytes: &[u8]) -> Result<Profile, String> {
    let wire: WireProfile =
        serde_json::from_slice(bytes).map_err(|e| format!("malformed profile: {e}"))?;
    let mut profile = Profile::new(wire.metadata);
    let ids: Vec<FrameId> = wire.frames.into_iter().map(|f| profile.intern(f)).collect();
    let mut stacks = Vec::with_capacity(wire.stacks.len());
    for (stack, samples, weight, events) in wire.stacks {
        let stack: Option<Vec<FrameId>> = stack
            .iter()
            .map(|&i| ids.get(i as usize).copied())
            .collect();
        let stack =
            stack.ok_or_else(|| "malformed profile: frame index out of range".to_string())?;
        let counts = StackCounts {
            samples,
            weight,
            events,
        };
        stacks.push(profile.add_counts(&stack, counts));
    }
    for (time_ns, tid, stack, samples, weight, events) in wire.log {
        let stack = *stacks
            .get(stack as usize)
            .ok_or_else(|| "malformed profile: stack index out of range".to_string())?;
        profile.append_logged(LoggedSample {
            time_ns,
            tid,
            stack,
            counts: StackCounts {
                samples,
                weight,
                events,
            },
        });
    }
    for (tid, name) in wire.threads {
        profile.name_thread(tid, name);
    }
    Ok(profile)
}

#[cfg(test)]
mod tests {
    use super::*;
    use jtap_profile::FrameKind;

    #[test]
    fn event_logs_round_trip() {
        let mut profile = Profile::default();
        let a = [profile.intern(Frame::new("a", FrameKind::Compiled))];
        let b = [profile.intern(Frame::new("b", FrameKind::Compiled))];
        profile.log(&b, StackCounts::sampled(1, 5), 10, 3);
        profile.log(&a, StackCounts::sampled(1, 7), 20, 4);
        profile.name_thread(3, "worker");
        let back = decode_profile(&encode_profile(&profile)).unwrap();
        assert_eq!(back.logged(), profile.logged());
        assert_eq!(back.thread_names(), profile.thread_names());
        assert_eq!(back.total_weight(), 12, "logged samples are counted once");
        let bad = String::from_utf8(encode_profile(&profile))
            .unwrap()
            .replace("[10,3,0,", "[10,3,9,");
        assert!(decode_profile(bad.as_bytes()).is_err());
    }

    #[test]
    fn profiles_round_trip() {
        let mut profile = Profile::new(Metadata {
            event: "cpu".into(),
            engine: "ctimer".into(),
            interval: 10,
            ..Metadata::default()
        });
        profile.metadata.errors.insert("gc_active".into(), 2);
        let main = Frame::new("Main.main:3", FrameKind::Compiled);
        profile.add_frames(
            &[main.clone(), Frame::new("Main.burn:7", FrameKind::Inlined)],
            3,
            30,
        );
        profile.add_frames(&[main], 1, 10);
        profile.add_frames(&[Frame::new("[gc_active]", FrameKind::Error)], 2, 20);
        let back = decode_profile(&encode_profile(&profile)).unwrap();
        assert_eq!(back.metadata, profile.metadata);
        let names = |p: &Profile| {
            p.stacks()
                .into_iter()
                .map(|(ids, c)| {
                    (
                        ids.iter().map(|&i| p.frame(i).clone()).collect::<Vec<_>>(),
                        c,
                    )
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(names(&back), names(&profile));
        assert!(decode_profile(b"{}").is_err());
        assert!(decode_profile(br#"{"metadata":{"event":"","engine":"","interval":0,"weight_unit":"","duration_ns":0,"start_time_ns":0,"errors":{},"dropped":0},"frames":[],"stacks":[[[5],1,1,1]]}"#)
            .unwrap_err()
            .contains("out of range"));
    }
}
