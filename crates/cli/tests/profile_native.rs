//! Native and kernel frames of `jtap profile -e cpu` on every JDK of the matrix: zlib frames
//! under the JNI method `Deflater.deflateBytes*`, kernel frames under the `read` system call
//! of a thread reading /dev/urandom, and none of them with `--all-user`.

mod common;

use std::time::Duration;

use common::{agent_library, collapsed_file, jtap};
use jtap_testkit::{jdks, JavaProcess};

/// Samples of stacks where the JNI method `Deflater.deflateBytes*` (JDK 11+: deflateBytesBytes)
/// is followed by a frame of zlib: `libz` (Debian's JDK uses the system's), `libzip` (Temurin
/// links zlib into it) or `libjvm`.
fn deflate_into_native(stacks: &[(Vec<String>, u64)]) -> u64 {
    let native = |frame: &String| {
        ["libz", "libzip", "libjvm"]
            .iter()
            .any(|lib| frame.starts_with(lib))
    };
    stacks
        .iter()
        .filter(|(frames, _)| {
            frames.windows(2).any(|pair| {
                pair[0].starts_with("java.util.zip.Deflater.deflateBytes") && native(&pair[1])
            })
        })
        .map(|(_, n)| n)
        .sum()
}

/// Samples of stacks with the given frame and a kernel frame (`_[k]` with `--annotate`).
fn kernel_under(stacks: &[(Vec<String>, u64)], name: &str) -> u64 {
    stacks
        .iter()
        .filter(|(frames, _)| {
            frames.iter().any(|f| f.starts_with(name)) && frames.iter().any(|f| f.ends_with("_[k]"))
        })
        .map(|(_, n)| n)
        .sum()
}

#[test]
fn cpu_profiles_show_native_frames_under_java_and_kernel_frames_at_the_leaf() {
    agent_library();
    let dir = tempfile::tempdir().unwrap();
    for jdk in jdks() {
        let mut jvm = JavaProcess::start(jdk, "workloads.NativeWork");
        let pid = jvm.pid().to_string();
        std::thread::sleep(Duration::from_millis(500));

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
