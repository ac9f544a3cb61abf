//! JFR events declared in BTrace scripts, on every JDK of the matrix: a script in the style
//! of BTrace's FileTrackerJfr sample commits an event per file `workloads.FileOpener` opens
//! (a read's begun at the constructor's entry and ended at its return), and periodic events
//! every 100 ms and at the end. With `--jfr` they go to a recording that the JDK's own `jfr
//! print` reads back with their types, fields and durations; without it, one line each on
//! stdout.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{agent_library, Background};
use jtap_testkit::{jdks, JavaProcess, Jdk};

const SCRIPT: &str = r#"import org.openjdk.btrace.core.annotations.*;
import org.openjdk.btrace.core.jfr.JfrEvent;
import java.io.File;
import static org.openjdk.btrace.core.BTraceUtils.*;
import static org.openjdk.btrace.core.BTraceUtils.Jfr.*;

@BTrace
public class Opened {
    @Event(name = "jtap.FileOpened", label = "File Opened", description = "A file the workload opened",
           category = {"jtap", "tests"},
           fields = {
               @Event.Field(type = Event.FieldType.STRING, name = "path", label = "Path"),
               @Event.Field(type = Event.FieldType.STRING, name = "mode"),
               @Event.Field(type = Event.FieldType.BOOLEAN, name = "append"),
               @Event.Field(type = Event.FieldType.LONG, name = "nth", kind = @Event.Field.Kind(name = Event.FieldKind.UNSIGNED))
           })
    private static JfrEvent.Factory opened;

    @TLS private static JfrEvent reading;
    private static long files;
    private static int ticks;

    @OnMethod(clazz = "java.io.FileOutputStream", method = "<init>", type = "void (java.io.File, boolean)")
    public static void write(File f, boolean append) {
        files++;
        JfrEvent e = prepareEvent(opened);
        setEventField(e, "path", str(f));
        setEventField(e, "mode", "write");
        setEventField(e, "append", append);
        setEventField(e, "nth", files);
        commit(e);
    }

    @OnMethod(clazz = "java.io.FileInputStream", method = "<init>", type = "void (java.io.File)")
    public static void read(File f) {
        files++;
        reading = prepareEvent(opened);
        begin(reading);
        setEventField(reading, "path", str(f));
        setEventField(reading, "mode", "read");
        setEventField(reading, "nth", files);
    }

    @OnMethod(clazz = "java.io.FileInputStream", method = "<init>", type = "void (java.io.File)", location = @Location(Kind.RETURN))
    public static void readDone() {
        end(reading);
        if (shouldCommit(reading)) {
            commit(reading);
        }
    }

    @PeriodicEvent(name = "jtap.Tick", fields = @Event.Field(type = Event.FieldType.INT, name = "n"), period = "100 ms")
    public static void tick(JfrEvent e) {
        ticks++;
        setEventField(e, "n", ticks);
        commit(e);
    }

    @PeriodicEvent(name = "jtap.Files", label = "Files Opened", fields = @Event.Field(type = Event.FieldType.LONG, name = "files"), period = "endChunk")
    public static void total(JfrEvent e) {
        setEventField(e, "files", files);
        commit(e);
    }
}
"#;

/// Runs the script against `jvm` for its round `n` (with `extra` options): its stdout.
fn round(jvm: &mut JavaProcess, dir: &Path, n: u32, extra: &[&str]) -> String {
    let pid = jvm.pid().to_string();
    let mut args = vec!["btrace", &pid, "Opened.java", "-d", "60s"];
    args.extend_from_slice(extra);
    let run = Background::tracing(&args, dir);
    std::fs::write(dir.join(format!("go{n}")), b"").unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !jvm.stdout.text().contains(&format!("DONE {n}")) {
        assert!(Instant::now() < deadline, "round {n} did not finish");
        std::thread::sleep(Duration::from_millis(10));
    }
    // The round's calls reach the handlers, and a tick or two runs, before Ctrl-C.
    std::thread::sleep(Duration::from_millis(400));
    run.interrupt();
    let (code, out, err) = run.finish(Duration::from_secs(60));
    assert_eq!(code, 0, "{err}");
    if !extra.is_empty() {
        assert!(err.contains("JFR events written to events.jfr"), "{err}");
    }
    out
}

/// `jfr print --events NAME` of `jdk` on the recording: the events' blocks.
fn jfr_print(jdk: &Jdk, recording: &Path, name: &str) -> Vec<String> {
    let output = Command::new(jdk.home.join("bin/jfr"))
        .args(["print", "--events", name])
        .arg(recording)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout).to_string();
    assert!(
        output.status.success(),
        "JDK {}: {text}{}",
        jdk.version,
        String::from_utf8_lossy(&output.stderr)
    );
    text.split(&format!("{name} {{"))
        .skip(1)
        .map(str::to_string)
        .collect()
}

#[test]
fn declared_events_go_to_a_recording_the_jdks_jfr_reads_or_to_stdout() {
    agent_library();
    for jdk in jdks() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("Opened.java"), SCRIPT).unwrap();
        let mut jvm = JavaProcess::builder(jdk, "workloads.FileOpener")
            .cwd(dir.path())
            .start();
        let v = jdk.version;
        let printed = round(&mut jvm, dir.path(), 1, &["--jfr", "events.jfr"]);
        assert!(!printed.contains("jtap.FileOpened"), "JDK {v}: {printed}");
        let recording = dir.path().join("events.jfr");
        let opened = jfr_print(jdk, &recording, "jtap.FileOpened");
        for i in 0..3 {
            let path = format!("path = \"out-1-{i}.txt\"");
            let of = |mode: &str| {
                opened
                    .iter()
                    .filter(|e| e.contains(&path) && e.contains(&format!("mode = \"{mode}\"")))
                    .collect::<Vec<_>>()
            };
            let (writes, reads) = (of("write"), of("read"));
            assert!(writes.len() == 1 && reads.len() == 1, "JDK {v}: {opened:?}");
            assert!(
                writes[0].contains("append = false"),
                "JDK {v}: {}",
                writes[0]
            );
            // A read began at the constructor's entry and ended at its return.
            assert!(reads[0].contains("duration = "), "JDK {v}: {}", reads[0]);
            assert!(
                reads[0].contains("eventThread = \"main\""),
                "JDK {v}: {}",
                reads[0]
            );
        }
        assert_eq!(opened.len(), 6, "JDK {v}: {opened:?}");
        let files = jfr_print(jdk, &recording, "jtap.Files");
        assert!(
            files.len() == 1 && files[0].contains("files = 6"),
            "JDK {v}: {files:?}"
        );
        let ticks = jfr_print(jdk, &recording, "jtap.Tick");
        assert!(
            !ticks.is_empty() && ticks[0].contains("n = 1"),
            "JDK {v}: {ticks:?}"
        );
        // Without --jfr: one line per event on stdout.
        let printed = round(&mut jvm, dir.path(), 2, &[]);
        let lines: Vec<&str> = printed
            .lines()
            .filter(|l| l.starts_with("jtap.FileOpened {startTime = "))
            .collect();
        assert_eq!(lines.len(), 6, "JDK {v}: {printed}");
        assert!(
            lines.iter().any(|l| l.contains("eventThread = \"main\", path = \"out-2-0.txt\", mode = \"read\", append = false, nth = ")),
            "JDK {v}: {printed}"
        );
        assert!(
            printed
                .lines()
                .any(|l| l.starts_with("jtap.Files {") && l.ends_with("files = 6}")),
            "JDK {v}: {printed}"
        );
    }
}
