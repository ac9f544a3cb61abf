//! Profiles on the control channel: a [`Profile`] as compact JSON — its metadata, its frame
//! table and its stacks as lists of frame indices — carried by a [`crate::Frame::Profile`].

use jtap_profile::{Frame, FrameId, Metadata, Profile, StackCounts};
use serde::{Deserialize, Serialize};

/// The serialised shape of a profile.
#[derive(Serialize, Deserialize)]
struct WireProfile {
    metadata: Metadata,
    frames: Vec<Frame>,
    /// `(frame ids root first, samples, weight, events)`.
    stacks: Vec<(Vec<FrameId>, u64, u64, u64)>,
}

/// Serialises a profile for a [`crate::Frame::Profile`].
pub fn encode_profile(profile: &Profile) -> Vec<u8> {
    let wire = WireProfile {
        metadata: profile.metadata.clone(),
        frames: profile.frames().to_vec(),
        stacks: profile
            .stacks()
            .into_iter()
            .map(|(ids, c)| (ids.to_vec(), c.samples, c.weight, c.events))
            .collect(),
    };
    serde_json::to_vec(&wire).expect("a profile always serialises")
}

/// Reads back a profile [`encode_profile`] wrote; rejects frame ids out of range.
pub fn decode_profile(bytes: &[u8]) -> Result<Profile, String> {
    let wire: WireProfile =
        serde_json::from_slice(bytes).map_err(|e| format!("malformed profile: {e}"))?;
    let mut profile = Profile::new(wire.metadata);
    let ids: Vec<FrameId> = wire.frames.into_iter().map(|f| profile.intern(f)).collect();
    for (stack, samples, weight, events) in wire.stacks {
        let stack: Option<Vec<FrameId>> = stack
            .iter()
            .map(|&i| ids.get(i as usize).copied())
            .collect();
        let stack =
            stack.ok_or_else(|| "malformed profile: frame index out of range".to_string())?;
        profile.add_counts(
            &stack,
            StackCounts {
                samples,
                weight,
                events,
            },
        );
    }
    Ok(profile)
}

#[cfg(test)]
mod tests {
    use super::*;
    use jtap_profile::FrameKind;

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
