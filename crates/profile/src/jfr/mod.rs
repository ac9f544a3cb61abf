//! JFR (Java Flight Recorder) recordings, the format the JDK's `jfr` tool, JDK Mission
//! Control, IntelliJ and async-profiler share: jtap writes them ([`write`]) and reads its own,
//! the JDK's and async-profiler's ([`read`]).
//!
//! - [`encoding`]: varints and strings.
//! - [`types`]: the types jtap declares in the recordings it writes.
//! - [`chunk`]: a chunk's header, constant pools and metadata, written.
//! - [`traces`]: a chunk's stack traces, read straight from its pools.
//! - [`samples`]: the events profiles are made of, into profiles.
//! - [`declared`]: events of types declared at run time (BTrace scripts' `@Event`s).

mod chunk;
pub mod declared;
mod encoding;
mod read;
mod samples;
mod traces;
mod types;
mod write;

pub use read::{is_recording, read};
pub use write::render as write;

#[cfg(test)]
mod tests {
    use crate::model::{Frame, FrameKind, Metadata, Profile, StackCounts, TracedCall};
    use crate::select::Wanted;

    const TIMES: Wanted = Wanted {
        events: &[],
        times: true,
    };

    fn profile(event: &str, leaf: Option<&str>) -> Profile {
        let mut profile = Profile::new(Metadata {
            event: event.into(),
            engine: event.into(),
            interval: 1_000_000,
            start_time_ns: 1_700_000_000_000_000_000,
            ..Metadata::default()
        });
        let main = Frame::java(
            "app.Main.main",
            FrameKind::Interpreted,
            Some("([Ljava/lang/String;)V".into()),
            Some(3),
        );
        let work = Frame::java(
            "app.Main.work",
            FrameKind::Inlined,
            Some("()V".into()),
            Some(9),
        );
        // Under a request label (`profile --by`): a root frame, in JFR too.
        let label = Frame::request_label("GET /orders");
        let mut stack = vec![label, main, work, Frame::new("memcpy", FrameKind::Native)];
        if let Some(class) = leaf {
            stack.pop();
            stack.push(Frame::new(class, FrameKind::Class));
        }
        let ids: Vec<u32> = stack.into_iter().map(|f| profile.intern(f)).collect();
        profile.log(
            &ids,
            StackCounts::sampled(1, 64),
            1_700_000_000_100_000_000,
            42,
        );
        profile.log(
            &ids[..2],
            StackCounts::sampled(1, 32),
            1_700_000_000_200_000_000,
            crate::virtual_thread_key(5633),
        );
        profile.name_thread(42, "worker");
        profile.name_thread(
            crate::virtual_thread_key(5633),
            "VirtualThread[#5633,crowd-1]",
        );
        profile
    }

    #[test]
    fn a_written_recording_reads_back_with_its_frames_times_threads_and_labels() {
        let cpu = profile("cpu", None);
        let alloc = profile("alloc", Some("java.lang.String[]"));
        let lock = profile("lock", Some("java.lang.Object"));
        let nativemem = profile(crate::event::NATIVEMEM.name, None);
        let bytes = super::write(&[&cpu, &alloc, &lock, &nativemem]);
        let back = super::read(&bytes, &TIMES).unwrap();
        let events: Vec<&str> = back.iter().map(|p| p.metadata.event.as_str()).collect();
        assert_eq!(
            events,
            ["cpu", "alloc", "lock", crate::event::NATIVEMEM.name]
        );
        for (read, written) in back.iter().zip([&cpu, &alloc, &lock, &nativemem]) {
            assert_eq!(read.logged().len(), 2);
            assert_eq!(
                read.logged()
                    .iter()
                    .map(|s| (s.time_ns, s.tid))
                    .collect::<Vec<_>>(),
                written
                    .logged()
                    .iter()
                    .map(|s| (s.time_ns, s.tid))
                    .collect::<Vec<_>>()
            );
            assert_eq!(read.thread_names()[&42], "worker");
            assert_eq!(
                read.thread_names()[&crate::virtual_thread_key(5633)],
                "VirtualThread[#5633,crowd-1]",
                "a virtual thread keeps its key"
            );
            let frames: Vec<&Frame> = read
                .stack(read.logged()[0].stack)
                .iter()
                .map(|&f| read.frame(f))
                .collect();
            let written_frames: Vec<&Frame> = written
                .stack(written.logged()[0].stack)
                .iter()
                .map(|&f| written.frame(f))
                .collect();
            assert_eq!(frames, written_frames, "{}", read.metadata.event);
        }
        assert_eq!(
            back[0].metadata.interval, 1_000_000,
            "the period, from the settings"
        );
        assert_eq!(back[1].total_weight(), 96, "bytes");
        assert_eq!(back[2].total_weight(), 96, "time waited");
        assert_eq!(back[3].total_weight(), 96, "bytes malloc'ed");
        assert_eq!(back[3].metadata.weight_unit, "bytes");
        // Without times: the same counts per stack, no event log.
        let counted = super::read(&bytes, &Wanted::default()).unwrap();
        for (counted, timed) in counted.iter().zip(&back) {
            assert!(counted.logged().is_empty());
            assert_eq!(counted.stacks(), timed.stacks());
            assert_eq!(counted.total_weight(), timed.total_weight());
        }
    }

    #[test]
    fn traced_calls_go_as_method_trace_events_once_per_recording() {
        let mut cpu = profile("cpu", None);
        let call = TracedCall {
            time_ns: 1_700_000_000_050_000_000,
            duration_ns: 200_000_000,
            tid: 42,
            method: Frame::java(
                "app.Main.work",
                FrameKind::Compiled,
                Some("()V".into()),
                None,
            ),
        };
        cpu.add_call(call.clone());
        let mut wall = profile("wall", None);
        wall.add_call(call.clone());
        let back = super::read(&super::write(&[&cpu, &wall]), &TIMES).unwrap();
        assert_eq!(back.len(), 2);
        for profile in &back {
            assert_eq!(
                profile.calls(),
                std::slice::from_ref(&call),
                "one call, with both profiles"
            );
        }
        // --latency: the samples inside calls of at least 100 ms (thread 42's first).
        let slow = back[0].during_calls_over(100_000_000).unwrap();
        assert_eq!(slow.total_samples(), 1);
        assert_eq!(
            back[0]
                .during_calls_over(300_000_000)
                .unwrap()
                .total_samples(),
            0
        );
    }
}
