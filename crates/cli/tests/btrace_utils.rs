//! BTraceUtils functions scripts call, on every JDK of the matrix: `Sys.VM`, `Sys.Memory`
//! and `Counters` read the JVM's properties, perf counters and code cache summary as its
//! MXBeans would report them, and `probeClass`/`probeMethod`/`probeLine` name where the
//! probe fired; an `@OnLowMemory` handler runs when its pool reaches the threshold.

mod common;

use std::time::Duration;

use common::{agent_library, Background};
use jtap_testkit::{jdks, JavaProcess};

const SCRIPT: &str = r#"import org.openjdk.btrace.core.annotations.*;
import static org.openjdk.btrace.core.BTraceUtils.*;
import org.openjdk.btrace.core.BTraceUtils.Sys;
import org.openjdk.btrace.core.BTraceUtils.Counters;
@BTrace public class Utils {
    @OnMethod(clazz = "workloads.Traced", method = "sleepy", location = @Location(Kind.RETURN))
    public static void probed() {
        println(probeClass() + "." + probeMethod() + " " + (probeLine() > 0));
        println(Sys.VM.vmVersion());
        println(Counters.perfString("java.property.java.vm.version"));
        println(Sys.VM.threadCount() > 0 && Sys.VM.peakThreadCount() >= Sys.VM.threadCount());
        println(Sys.Memory.used(Sys.Memory.nonHeapUsage()) > 0);
        println(Sys.Memory.getTotalGcTime() >= 0 && Sys.VM.processCPUTime() > 0);
        print(Sys.Memory.getMemoryPoolUsage("%1$s"));
        exit(0);
    }
}
"#;

#[test]
fn sys_vm_memory_and_counters_read_the_jvm_and_probe_functions_name_the_probe() {
    agent_library();
    for jdk in jdks() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("Utils.java");
        std::fs::write(&script, SCRIPT).unwrap();
        let mut jvm = JavaProcess::builder(jdk, "workloads.Traced")
            .cwd(dir.path())
            .start();
        let pid = jvm.pid().to_string();
        let script = script.to_str().unwrap();
        let run = Background::tracing(&["btrace", &pid, script, "-d", "60s"], dir.path());
        // A round of the workload calls sleepy().
        std::fs::write(dir.path().join("go1"), b"").unwrap();
        let (code, out, err) = run.finish(Duration::from_secs(60));
        let mut lines = out.lines();
        let context = format!("JDK {}: {out}{err}", jdk.version);
        assert_eq!(code, 0, "{context}");
        assert_eq!(
            lines.next(),
            Some("workloads.Traced.sleepy true"),
            "{context}"
        );
        let version = lines.next().unwrap_or_default();
        assert!(version.starts_with(&jdk.version.to_string()), "{context}");
        assert_eq!(lines.next(), Some(version), "the perf counter: {context}");
        assert_eq!(lines.next(), Some("true"), "threads: {context}");
        assert_eq!(lines.next(), Some("true"), "non-heap: {context}");
        assert_eq!(lines.next(), Some("true"), "GC and CPU time: {context}");
        let pools: Vec<&str> = lines.collect();
        for pool in [
            "Metaspace",
            "Compressed Class Space",
            "G1 Eden Space",
            "G1 Old Gen",
        ] {
            assert!(pools.contains(&pool), "{pool}: {context}");
        }
        assert!(
            pools.iter().any(|p| p.starts_with("CodeHeap '")),
            "{context}"
        );
        assert!(jvm.is_running(), "JDK {}", jdk.version);
    }
}

#[test]
fn a_low_memory_handler_runs_when_its_pool_reaches_the_threshold() {
    agent_library();
    let usage = regex::Regex::new(
        r"^init = \d+\(\d+K\) used = \d+\(\d+K\) committed = \d+\(\d+K\) max = -?\d+\(-?\d+K\)\n$",
    )
    .unwrap();
    for jdk in jdks() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("Low.java");
        std::fs::write(
            &script,
            r#"import org.openjdk.btrace.core.annotations.*;
import java.lang.management.MemoryUsage;
import static org.openjdk.btrace.core.BTraceUtils.*;
@BTrace public class Low {
    @OnLowMemory(pool = "Metaspace", threshold = 1000)
    public static void low(MemoryUsage mu) { println(mu); exit(3); }
}
"#,
        )
        .unwrap();
        let mut jvm = JavaProcess::builder(jdk, "workloads.Traced")
            .cwd(dir.path())
            .start();
        let pid = jvm.pid().to_string();
        let run = common::jtap(["btrace", &pid, script.to_str().unwrap(), "-d", "60s"]);
        let context = format!("JDK {}: {}{}", jdk.version, run.stdout, run.stderr);
        assert_eq!(run.code, 3, "{context}");
        assert!(usage.is_match(&run.stdout), "{context}");
    }
}
