//! `jtap inspect` on every JDK of the matrix, through jtap's agent: a workload's instance
//! with its fields (a string by its contents), its statics (a primitive, a reference), a JDK
//! class's instances, a Jetty handler's inherited fields and a path through them, an H2
//! setting's static (found by `jtap classes` in H2's jar first), one-line errors for an
//! unknown class or static; a second inspect in the same JVM, and no heap dump left in the
//! JVM's `/tmp`.

mod common;

use common::{jtap, real_program, JETTY_JARS};

use jtap_testkit::{debian_jar, jdks, JavaProcess};

#[test]
fn shows_instances_and_statics_of_a_workload_class() {
    for jdk in jdks() {
        let mut jvm = JavaProcess::start(jdk, "workloads.OnCall");
        let pid = jvm.pid().to_string();
        let v = jdk.version;
        let text = jtap(["inspect", &pid, "workloads.OnCall"]).ok();
        assert!(
            text.starts_with("1 instance of workloads.OnCall; heap walk paused the JVM "),
            "JDK {v}: {text}"
        );
        assert!(text.contains("\n    owner = \"main\"\n"), "JDK {v}: {text}");
        // The same instance again (its identity hash does not change), by a second action
        // of the agent loaded for the first.
        let again = jtap(["inspect", &pid, "workloads.OnCall"]).ok();
        let body = |t: &str| t.split_once('\n').map(|(_, rest)| rest.to_string());
        assert_eq!(body(&again), body(&text), "JDK {v}: {again}");

        let served = jtap([
            "inspect",
            &pid,
            "workloads.OnCall",
            "--static",
            "requestsServed",
        ])
        .ok();
        assert_eq!(served, "workloads.OnCall.requestsServed = 42\n", "JDK {v}");
        let current = jtap(["inspect", &pid, "workloads.OnCall", "--static", "current"]).ok();
        assert!(
            current.starts_with("workloads.OnCall.current = workloads.OnCall@"),
            "JDK {v}: {current}"
        );

        let owner = jtap(["inspect", &pid, "workloads.OnCall", "--path", "owner"]).ok();
        assert!(owner.contains(".owner = \"main\"\n"), "JDK {v}: {owner}");
        let groups = jtap([
            "inspect",
            &pid,
            "java.lang.Thread",
            "-n",
            "50",
            "--path",
            "name",
        ])
        .ok();
        assert!(
            groups.contains(".name = \"hot-worker\"\n"),
            "JDK {v}: {groups}"
        );
        jtap(["inspect", &pid, "java.lang.Thread", "--path", "a..b"])
            .fails_with(2, "bad field path");

        let threads = jtap(["inspect", &pid, "java.lang.Thread", "-n", "50"]).ok();
        assert!(
            threads.contains("name = \"hot-worker\""),
            "JDK {v}: {threads}"
        );

        let json: serde_json::Value =
            serde_json::from_str(&jtap(["inspect", &pid, "workloads.OnCall", "--json"]).ok())
                .expect("JSON");
        let class = &json["classes"][0];
        assert_eq!(
            (
                &class["instances"],
                &class["shown"][0]["fields"][0]["value"]
            ),
            (&serde_json::json!(1), &serde_json::json!("\"main\"")),
            "JDK {v}: {json}"
        );
        let missing = jtap(["inspect", &pid, "workloads.OnCall", "--path", "owner.nope"]).ok();
        assert!(
            missing.contains(".owner.nope = [no field nope]\n"),
            "JDK {v}: {missing}"
        );

        jtap(["inspect", &pid, "workloads.OnCall", "--static", "nope"])
            .fails_with(2, "has no static field nope");
        jtap(["inspect", &pid, "no.such.Class"]).fails_with(2, "is not loaded");
        jtap(["inspect", &pid, "workloads.OnCal"]).fails_with(2, "(loaded: workloads.OnCall");
        assert_eq!(heap_dumps(jvm.pid()), Vec::<String>::new(), "JDK {v}");
    }
}

/// Heap dumps (and anything else of `jtap inspect`'s) in the JVM's `/tmp`.
fn heap_dumps(pid: u32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/root/tmp"))
        .map(|entries| {
            entries
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|name| name.ends_with(".hprof") || name.starts_with("jtap-inspect"))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn shows_a_jetty_handlers_inherited_fields() {
    for jdk in jdks() {
        let mut jvm = real_program(jdk, "real.JettyLoad", &["2"], &JETTY_JARS);
        let pid = jvm.pid().to_string();
        let v = jdk.version;
        let class = "real.JettyLoad$WorkHandler";
        let text = jtap(["inspect", &pid, class]).ok();
        assert!(
            text.starts_with(&format!("1 instance of {class}; heap walk paused the JVM ")),
            "JDK {v}: {text}"
        );
        // AbstractHandler's server, and AbstractLifeCycle's state, read without a getter.
        assert!(
            text.contains("\n    _server = org.eclipse.jetty.server.Server@"),
            "JDK {v}: {text}"
        );
        let state = jtap(["inspect", &pid, class, "--path", "_server._state"]).ok();
        assert!(state.contains("._server._state = "), "JDK {v}: {state}");
        assert_eq!(heap_dumps(jvm.pid()), Vec::<String>::new(), "JDK {v}");
    }
}

#[test]
fn finds_an_h2_settings_static() {
    for jdk in jdks() {
        let mut jvm = real_program(jdk, "real.H2Load", &["3"], &["h2"]);
        let pid = jvm.pid().to_string();
        let v = jdk.version;
        let class = "org.h2.engine.SysProperties";
        let fields = jtap(["classes", &pid, class, "--fields"]).ok();
        let jar = debian_jar("h2").display().to_string();
        assert!(
            fields.contains(&format!("from    {jar}")),
            "JDK {v}: {fields}"
        );
        assert!(
            fields.contains("public static final java.lang.String CLIENT_TRACE_DIRECTORY"),
            "JDK {v}: {fields}"
        );
        let value = jtap(["inspect", &pid, class, "--static", "CLIENT_TRACE_DIRECTORY"]).ok();
        assert_eq!(
            value,
            format!("{class}.CLIENT_TRACE_DIRECTORY = \"trace.db/\"\n"),
            "JDK {v}"
        );
    }
}

#[test]
fn an_unknown_pid_gets_a_one_line_error() {
    jtap(["inspect", "999999999", "Foo"]).fails_with(10, "no process");
}
