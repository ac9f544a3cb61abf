//! BTrace's instruction locations on every JDK of the matrix: `Kind.ARRAY_SET` and
//! `ARRAY_GET` pass the array, index and value (`@Return` the element read), `INSTANCEOF` and
//! `CHECKCAST` the type checked and the object, `THROW` and `CATCH` the exception, each where
//! the workload's one call of `Instructions.work` reaches it.

mod common;

use std::time::{Duration, Instant};

use common::{agent_library, Background};
use jtap_testkit::{jdks, JavaProcess};

const SCRIPT: &str = r#"import com.sun.btrace.annotations.*;
import static com.sun.btrace.BTraceUtils.*;
@BTrace public class Insns {
    @OnMethod(clazz = "workloads.Instructions", method = "work", location = @Location(Kind.ARRAY_SET))
    public static void set(@Self Object self, @TargetInstance int[] array, int index, int value) {
        println("set [" + index + "] = " + value + " of " + (array != null) + " in static " + (self == null));
    }

    @OnMethod(clazz = "workloads.Instructions", method = "work", location = @Location(value = Kind.ARRAY_GET, where = Where.AFTER))
    public static void get(@ProbeMethodName String method, int index, @Return int value) {
        println("get [" + index + "] = " + value + " in " + method);
    }

    @OnMethod(clazz = "workloads.Instructions", method = "work", location = @Location(Kind.INSTANCEOF))
    public static void test(String type, @TargetInstance Object thing) {
        println("instanceof " + type + " of " + thing);
    }

    @OnMethod(clazz = "workloads.Instructions", method = "work", location = @Location(Kind.CHECKCAST))
    public static void cast(String type) {
        println("checkcast " + type);
    }

    @OnMethod(clazz = "workloads.Instructions", method = "fail", location = @Location(Kind.THROW))
    public static void thrown(@ProbeMethodName String method, @TargetInstance Throwable t) {
        println("throw in " + method + ": " + str(t));
    }

    @OnMethod(clazz = "workloads.Instructions", method = "work", location = @Location(Kind.CATCH))
    public static void caught(@TargetInstance Throwable t) {
        println("catch " + str(t));
    }
}
"#;

#[test]
fn instruction_locations_pass_the_values_btrace_passes() {
    agent_library();
    for jdk in jdks() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("Insns.java");
        std::fs::write(&script, SCRIPT).unwrap();
        let mut jvm = JavaProcess::builder(jdk, "workloads.Instructions")
            .cwd(dir.path())
            .start();
        let pid = jvm.pid().to_string();
        let script = script.to_str().unwrap();
        let run = Background::tracing(&["btrace", &pid, script, "-d", "60s"], dir.path());
        std::fs::write(dir.path().join("go1"), b"").unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        while !jvm.stdout.text().contains("DONE 1 ") {
            assert!(Instant::now() < deadline, "JDK {}: no round", jdk.version);
            std::thread::sleep(Duration::from_millis(10));
        }
        std::thread::sleep(Duration::from_millis(300));
        run.interrupt();
        let (code, out, err) = run.finish(Duration::from_secs(60));
        assert_eq!(code, 0, "JDK {}: {err}", jdk.version);
        assert!(
            jvm.stdout.text().contains("DONE 1 16"),
            "JDK {}: {out}",
            jdk.version
        );
        assert_eq!(
            out,
            "set [2] = 9 of true in static true\n\
             get [2] = 9 in work\n\
             instanceof java.lang.String of text\n\
             checkcast java.lang.String\n\
             throw in fail: java.lang.IllegalStateException: n=9\n\
             catch java.lang.IllegalStateException: n=9\n",
            "JDK {}: {err}",
            jdk.version
        );
        assert!(jvm.is_running(), "JDK {}", jdk.version);
    }
}
