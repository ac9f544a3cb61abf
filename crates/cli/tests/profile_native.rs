//! Native and kernel frames of `jtap profile -e cpu` on every JDK of the matrix: zlib frames
//! under the JNI method `Deflater.deflateBytes*`, kernel frames under the `read` system call
//! of a thread reading /dev/urandom, and none of them with `--all-user`; and native threads
//! the JVM never saw, sampled by every engine while they are inside `malloc`.

mod common;

use std::time::Duration;

use common::{agent_library, agent_stalls, collapsed_file, jtap};
use jtap_testkit::{compiled_native_library, jdks, JavaProcess};

/// Samples of stacks where the JNI method `Deflater.deflateBytes*` (JDK 11+: deflateBytesBytes)
/// is followed by a frame of zlib: `libz` (Debian's JDK uses the system's), `libzip` (Temurin
/// links zlib into it) or `libjvm`.
fn deflate_into_native(stacks: &[(Vec<String>, u64)]) -> u64 {
    let native = |frame: &String| {
        ["libz", "libzip", "libjvm"]
            .iter()
            .any(|lib| frame.starts_with(lib))
    };
    samples_where(stacks, |frames| {
        frames.windows(2).any(|pair| {
            pair[0].starts_with("java.util.zip.Deflater.deflateBytes") && native(&pair[1])
        })
    })
}

/// Samples of stacks with the given frame and a kernel frame (`_[k]` with `--annotate`).
fn kernel_under(stacks: &[(Vec<String>, u64)], name: &str) -> u64 {
    samples_where(stacks, |frames| {
        frames.iter().any(|f| f.starts_with(name)) && frames.iter().any(|f| f.ends_with("_[k]"))
    })
}

/// `workloads.NativeWork` running, with its pid, past its start.
fn native_work(jdk: &jtap_testkit::Jdk) -> (JavaProcess, String) {
    let mut jvm = JavaProcess::start(jdk, "workloads.NativeWork");
    let pid = jvm.pid().to_string();
    std::thread::sleep(Duration::from_millis(500));
    (jvm, pid)
}

/// Samples of the stacks `keep` accepts.
fn samples_where(stacks: &[(Vec<String>, u64)], keep: impl Fn(&[String]) -> bool) -> u64 {
    stacks
        .iter()
        .filter(|(frames, _)| keep(frames))
        .map(|(_, n)| n)
        .sum()
}

#[test]
fn cpu_profiles_show_native_frames_under_java_and_kernel_frames_at_the_leaf() {
    agent_library();
    let dir = tempfile::tempdir().unwrap();
    for jdk in jdks() {
        let (mut jvm, pid) = native_work(jdk);

        let out = dir.path().join(format!("{}-native.collapsed", jdk.version));
        jtap([
            "profile",
            &pid,
            "-e",
            "cpu",
            "-d",
            "4s",
            "-i",
            "5ms",
            "--annotate",
            "-o",
            out.to_str().unwrap(),
        ])
        .ok();
        let stacks = collapsed_file(&out);
        let total: u64 = stacks.iter().map(|(_, n)| n).sum();
        let deflate = deflate_into_native(&stacks);
        let kernel = kernel_under(&stacks, "java.io.FileInputStream.readBytes");
        eprintln!("JDK {}: {total} samples, {deflate} in zlib under Deflater, {kernel} in the kernel under read", jdk.version);
        let example = stacks
            .iter()
            .max_by_key(|(_, n)| *n)
            .map(|(s, _)| s.join(";"))
            .unwrap_or_default();
        assert!(
            deflate >= 20,
            "JDK {}: too few zlib samples under the JNI method; heaviest stack: {example}",
            jdk.version
        );
        assert!(
            kernel >= 5,
            "JDK {}: too few kernel samples under FileInputStream.readBytes",
            jdk.version
        );
        // The reading thread's kernel frames sit at the leaf, under native frames (libjava,
        // libc's system call wrapper).
        let reads = stacks.iter().filter(|(f, _)| {
            f.iter()
                .any(|f| f.starts_with("java.io.FileInputStream.readBytes"))
        });
        for (frames, _) in reads.filter(|(f, _)| f.iter().any(|f| f.ends_with("_[k]"))) {
            let first_kernel = frames.iter().position(|f| f.ends_with("_[k]")).unwrap();
            assert!(
                frames[first_kernel..].iter().all(|f| f.ends_with("_[k]")),
                "JDK {}: {frames:?}",
                jdk.version
            );
            assert!(
                !["_[j]", "_[i]", "_[0]"]
                    .iter()
                    .any(|java| frames[first_kernel - 1].ends_with(java)),
                "JDK {}: no native frame above the kernel: {frames:?}",
                jdk.version
            );
        }
        // No sample of the agent's own threads.
        assert!(
            stacks
                .iter()
                .all(|(f, _)| !f.iter().any(|f| f.contains("libjtap_agent"))),
            "JDK {}",
            jdk.version
        );

        let out = dir.path().join(format!("{}-user.collapsed", jdk.version));
        let result = jtap([
            "profile",
            &pid,
            "-e",
            "cpu",
            "--all-user",
            "-d",
            "4s",
            "-i",
            "5ms",
            "--annotate",
            "-o",
            out.to_str().unwrap(),
        ]);
        assert!(
            result.stderr.contains("(cpu engine"),
            "JDK {}: {result:?}",
            jdk.version
        );
        let stacks = collapsed_file(&out);
        let kernel_frames: Vec<&String> = stacks
            .iter()
            .flat_map(|(f, _)| f)
            .filter(|f| f.ends_with("_[k]"))
            .collect();
        assert!(
            kernel_frames.is_empty(),
            "JDK {}: kernel frames with --all-user: {kernel_frames:?}",
            jdk.version
        );
        let deflate = deflate_into_native(&stacks);
        eprintln!(
            "JDK {} --all-user: {} samples, {deflate} in zlib, no kernel frames",
            jdk.version,
            stacks.iter().map(|(_, n)| n).sum::<u64>()
        );
        assert!(
            deflate >= 20,
            "JDK {}: --all-user lost the native frames",
            jdk.version
        );
        assert!(jvm.is_running(), "JDK {}: the JVM died", jdk.version);
    }
}

/// Samples whose stack goes from the JNI method `Deflater.deflateBytes*` through its C
/// function in libzip into zlib's `deflate` (in `libz`, or in libzip where Temurin links zlib
/// in), i.e. native frames with all their callers.
fn deflate_with_callers(stacks: &[(Vec<String>, u64)]) -> u64 {
    samples_where(stacks, |frames| {
        frames.windows(3).any(|w| {
            w[0].starts_with("java.util.zip.Deflater.deflateBytes")
                && w[1].starts_with("libzip.so!Java_java_util_zip_Deflater_deflateBytes")
                && w[2].starts_with("lib")
                && w[2].ends_with("!deflate")
        })
    })
}

/// DWARF unwinding in every sampling engine: the perf_events `cpu` engine (the kernel copies
/// the stack) and the timer and wall-clock engines (the handler copies it).
#[test]
fn dwarf_unwinding_keeps_the_callers_that_frame_pointers_lose() {
    agent_library();
    let dir = tempfile::tempdir().unwrap();
    for jdk in jdks() {
        let (mut jvm, pid) = native_work(jdk);
        let profile_with = |event: &str, cstack: &str| {
            let out = dir
                .path()
                .join(format!("{}-{event}-{cstack}.collapsed", jdk.version));
            let mut args = vec![
                "profile",
                &pid,
                "-e",
                event,
                "-d",
                "3s",
                "-i",
                "5ms",
                "-o",
                out.to_str().unwrap(),
            ];
            if cstack != "default" {
                args.extend(["--cstack", cstack]);
            }
            jtap(args).ok();
            collapsed_file(&out)
        };
        let profile = |cstack: &str| profile_with("cpu", cstack);
        // DWARF is the default.
        let stacks = profile("default");
        let under_deflater = deflate_into_native(&stacks);
        let complete = deflate_with_callers(&stacks);
        eprintln!(
            "JDK {}: {under_deflater} samples in native code under Deflater, {complete} with the JNI function and deflate",
            jdk.version
        );
        let example = stacks
            .iter()
            .max_by_key(|(_, n)| *n)
            .map(|(s, _)| s.join(";"))
            .unwrap_or_default();
        assert!(
            complete >= 20 && complete * 10 >= under_deflater * 9,
            "JDK {}: {complete} of {under_deflater} zlib samples keep their callers; heaviest stack: {example}",
            jdk.version
        );
        // With frame pointers only, Debian's zlib (built without them) hides its callers; a
        // zlib with frame pointers (Temurin's, inside libzip) keeps them either way.
        let stacks = profile("fp");
        eprintln!(
            "JDK {} --cstack fp: {} samples in native code under Deflater, {} with the JNI function and deflate",
            jdk.version,
            deflate_into_native(&stacks),
            deflate_with_callers(&stacks)
        );
        // The timer and wall-clock engines copy the stack in their signal handler.
        for event in ["itimer", "wall"] {
            let stacks = profile_with(event, "default");
            let complete = deflate_with_callers(&stacks);
            eprintln!(
                "JDK {} -e {event}: {complete} samples with the JNI function and deflate",
                jdk.version
            );
            assert!(
                complete >= 10,
                "JDK {}: -e {event} lost zlib's callers: {complete} samples",
                jdk.version
            );
        }
        let stacks = profile("no");
        let native: Vec<&String> = stacks
            .iter()
            .flat_map(|(f, _)| f)
            .filter(|f| f.contains(".so"))
            .collect();
        assert!(
            native.is_empty() && !stacks.is_empty(),
            "JDK {}: native frames with --cstack no: {native:?}",
            jdk.version
        );
        assert!(jvm.is_running(), "JDK {}: the JVM died", jdk.version);
    }
}

/// The last "finished N" count `workloads.NativeThreads` printed.
fn native_threads_finished(jvm: &JavaProcess) -> u64 {
    jvm.stdout
        .text()
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("finished ")?.parse().ok())
        .unwrap_or(0)
}

/// Every engine signals threads the JVM never saw (itimer: whichever thread runs; wall: every
/// thread of the process; cpu and ctimer: the threads there at start), also inside `malloc`.
/// The handler must not call into the JVM there: its thread-local data does not exist yet on
/// such a thread, and creating it means `malloc`, which deadlocks on the allocator's lock the
/// interrupted `malloc` holds. The native threads must keep going, and no handler may be left
/// running when a profile stops.
#[test]
fn native_threads_in_malloc_are_sampled_without_hanging() {
    agent_library();
    let library = compiled_native_library("native_threads");
    let dir = tempfile::tempdir().unwrap();
    for jdk in jdks() {
        let mut jvm = JavaProcess::builder(jdk, "workloads.NativeThreads")
            .arg(&library)
            .start();
        let pid = jvm.pid().to_string();
        let log = dir.path().join(format!("{}-agent.log", jdk.version));
        jtap(["load", &pid, &format!("log={}", log.display())]).ok();
        for engine in ["cpu", "itimer", "ctimer", "wall"] {
            let out = dir
                .path()
                .join(format!("{}-{engine}.collapsed", jdk.version));
            let result = jtap([
                "profile",
                &pid,
                "-e",
                engine,
                "-d",
                "2s",
                "-i",
                "1ms",
                "-o",
                out.to_str().unwrap(),
            ]);
            assert_eq!(result.code, 0, "JDK {} {engine}: {result:?}", jdk.version);
            let stacks = collapsed_file(&out);
            // The native threads' samples: no Java frame (itimer, ctimer, wall), or native
            // frames from libc or the library (cpu, with call chains).
            let outside_java: u64 = stacks
                .iter()
                .filter(|(f, _)| {
                    ["[unknown_not_java]", "libc.so", "libnative_threads"]
                        .iter()
                        .any(|root| f[0].starts_with(root))
                })
                .map(|(_, n)| n)
                .sum();
            let before = native_threads_finished(&jvm);
            std::thread::sleep(Duration::from_millis(500));
            let after = native_threads_finished(&jvm);
            eprintln!(
                "JDK {} {engine}: {outside_java} samples outside Java; native threads finished {before} -> {after}",
                jdk.version
            );
            assert!(
                outside_java > 0,
                "JDK {} {engine}: the native threads were not sampled: {:?}",
                jdk.version,
                &stacks[..stacks.len().min(10)]
            );
            assert!(
                after > before,
                "JDK {} {engine}: the native threads stopped making progress",
                jdk.version
            );
            let stuck = agent_stalls(&log);
            assert!(stuck.is_empty(), "JDK {} {engine}: {stuck:?}", jdk.version);
        }
        assert!(jvm.is_running(), "JDK {}: the JVM died", jdk.version);
    }
}
