//! `jtap classes` on every JDK of the matrix: a workload class's loader, class-path entry,
//! methods and fields; a JDK class's module from the runtime image (stored or compressed,
//! as the matrix's JDKs ship it); a Jetty handler's members and its superclass's jar;
//! globs and regexes; one-line errors for bad input; bash, zsh (in a tmux terminal) and
//! fish completing a running JVM's class and method names after `trace PID`.

mod common;

use common::{jtap, jtap_bin, real_program, run, JETTY_JARS};

use jtap_testkit::{compiled_workloads, debian_jar, jdks, JavaProcess};
use serde_json::Value;

fn classes_json(pid: &str, extra: &[&str]) -> Value {
    let mut args = vec!["classes", pid, "--json"];
    args.extend_from_slice(extra);
    serde_json::from_str(&jtap(args).ok()).expect("jtap classes --json prints JSON")
}

fn member<'a>(class: &'a Value, kind: &str, name: &str) -> &'a Value {
    class[kind]
        .as_array()
        .and_then(|members| members.iter().find(|m| m["name"] == name))
        .unwrap_or_else(|| panic!("no {kind} {name} in {class}"))
}

#[test]
fn finds_a_workload_class_with_its_methods_and_fields() {
    for jdk in jdks() {
        let mut jvm = JavaProcess::start(jdk, "workloads.OnCall");
        let pid = jvm.pid().to_string();
        let report = classes_json(&pid, &["workloads.OnCall", "--methods", "--fields"]);
        assert_eq!(report["matched"], 1, "JDK {}: {report}", jdk.version);
        let class = &report["classes"][0];
        assert_eq!(class["name"], "workloads.OnCall");
        assert!(
            class["loader"].as_str().unwrap_or("").starts_with("app"),
            "JDK {}: {class}",
            jdk.version
        );
        let workloads = compiled_workloads().display().to_string();
        assert_eq!(class["source"], workloads.as_str(), "JDK {}", jdk.version);
        let spin = member(class, "methods", "spin");
        assert_eq!(spin["descriptor"], "(J)J");
        assert_eq!(spin["modifiers"], "static");
        assert_eq!(spin["java"], "long spin(long)");
        let owner = member(class, "methods", "owner");
        assert_eq!(owner["descriptor"], "()Ljava/lang/String;");
        assert_eq!(owner["modifiers"], "public");
        let served = member(class, "fields", "requestsServed");
        assert_eq!(
            (served["descriptor"].as_str(), served["modifiers"].as_str()),
            (Some("I"), Some("static"))
        );

        // By simple name, glob and regex; the lambdas are hidden classes with no class file.
        let by_glob = classes_json(&pid, &["workloads.On*", "-n", "0"]);
        let names: Vec<&str> = by_glob["classes"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|c| c["name"].as_str())
            .collect();
        assert!(
            names.contains(&"workloads.OnCall"),
            "JDK {}: {names:?}",
            jdk.version
        );
        assert!(
            names.iter().any(|n| n.contains("$$Lambda")),
            "JDK {}: {names:?}",
            jdk.version
        );
        assert_eq!(classes_json(&pid, &["OnCall"])["matched"], 1);
        assert_eq!(
            classes_json(&pid, &["/^workloads\\.OnCall$/"])["matched"],
            1
        );

        let text = jtap(["classes", &pid, "OnCall", "--methods"]).ok();
        assert!(
            text.contains("static long spin(long)    (J)J"),
            "JDK {}: {text}",
            jdk.version
        );
    }
}

#[test]
fn finds_a_jdk_class_in_the_runtime_image() {
    for jdk in jdks() {
        let mut jvm = JavaProcess::start(jdk, "workloads.OnCall");
        let pid = jvm.pid().to_string();
        let report = classes_json(
            &pid,
            &["java.util.concurrent.locks.ReentrantLock", "--methods"],
        );
        let class = &report["classes"][0];
        assert_eq!(
            class["loader"], "<bootstrap>",
            "JDK {}: {report}",
            jdk.version
        );
        assert_eq!(
            class["source"], "jrt:/java.base",
            "JDK {}: {report}",
            jdk.version
        );
        assert_eq!(member(class, "methods", "lock")["descriptor"], "()V");
    }
}

#[test]
fn finds_a_jetty_handler_and_the_jar_of_its_superclass() {
    for jdk in jdks() {
        let mut jvm = real_program(jdk, "real.JettyLoad", &["2"], &JETTY_JARS);
        let pid = jvm.pid().to_string();
        let v = jdk.version;
        let report = classes_json(
            &pid,
            &["real.JettyLoad$WorkHandler", "--methods", "--fields"],
        );
        let handler = &report["classes"][0];
        assert_eq!(
            handler["super_class"], "org.eclipse.jetty.server.handler.AbstractHandler",
            "JDK {v}: {report}"
        );
        let handle = member(handler, "methods", "handle");
        assert_eq!(
            handle["descriptor"],
            "(Ljava/lang/String;Lorg/eclipse/jetty/server/Request;\
             Ljavax/servlet/http/HttpServletRequest;Ljavax/servlet/http/HttpServletResponse;)V"
        );
        assert_eq!(
            member(handler, "fields", "NOTE")["modifiers"],
            "static final"
        );

        let report = classes_json(
            &pid,
            &[
                "org.eclipse.jetty.server.handler.AbstractHandler",
                "--fields",
            ],
        );
        let base = &report["classes"][0];
        let jar = debian_jar("jetty9-server").display().to_string();
        assert_eq!(base["source"], jar.as_str(), "JDK {v}: {report}");
        assert!(
            base["fields"].as_array().is_some_and(|f| !f.is_empty()),
            "JDK {v}: {report}"
        );
    }
}

/// The candidates bash's completion of `jtap completions bash` offers for `line`, completed
/// at its end, with the `jtap` under test first on the PATH.
fn bash_completes(line: &str) -> Vec<String> {
    let script = r#"
source <(jtap completions bash)
COMP_LINE="$1"; COMP_POINT=${#COMP_LINE}
read -ra COMP_WORDS <<< "$COMP_LINE"
[[ $COMP_LINE == *' ' ]] && COMP_WORDS+=('')
COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
_jtap_with_jvm_names jtap "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
printf '%s\n' "${COMPREPLY[@]}"
"#;
    let out = run(std::process::Command::new("bash")
        .args(["-c", script, "bash", line])
        .env("PATH", path_with_jtap()))
    .ok();
    out.lines().map(str::to_string).collect()
}

#[test]
fn bash_completes_class_and_method_names_from_the_jvm() {
    for jdk in jdks() {
        let mut jvm = JavaProcess::start(jdk, "workloads.OnCall");
        let pid = jvm.pid().to_string();
        let classes = bash_completes(&format!("jtap trace {pid} workloads.OnC"));
        assert_eq!(classes, ["workloads.OnCall"], "JDK {}", jdk.version);
        // After `::`, the class's methods; bash splits words at `:`, so the candidates are
        // what follows the last one.
        let methods = bash_completes(&format!("jtap monitor {pid} -i 1s workloads.OnCall::sp"));
        assert_eq!(methods, ["spin"], "JDK {}", jdk.version);
        // Elsewhere, clap's completion of jtap's options.
        let options = bash_completes("jtap trace --thresh");
        assert_eq!(options, ["--threshold"]);
    }
}

/// The candidates fish's completion of `jtap completions fish` offers for `line`, with the
/// `jtap` under test first on the PATH (`complete -C`: fish's own matching, descriptions cut).
fn fish_completes(line: &str) -> Vec<String> {
    let script = "source (jtap completions fish | psub); complete -C $argv[1]";
    let out = run(std::process::Command::new("fish")
        .args(["--no-config", "-c", script, line])
        .env("PATH", path_with_jtap()))
    .ok();
    out.lines()
        .map(|l| l.split('\t').next().unwrap_or("").to_string())
        .collect()
}

fn path_with_jtap() -> String {
    let bin = jtap_bin().parent().unwrap().display().to_string();
    format!("{bin}:{}", std::env::var("PATH").unwrap_or_default())
}

/// Types each of `keys` followed by Tab into an interactive zsh (in a detached tmux
/// session) that loaded `jtap completions zsh` after `compinit`, and returns its command
/// line once it shows `expect`, or as it is after 20 s.
fn zsh_completes(keys: &[&str], expect: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let rc = "autoload -U compinit && compinit -u\nsource <(jtap completions zsh)\nPS1='> '\n";
    std::fs::write(dir.path().join(".zshrc"), rc).unwrap();
    let socket = format!("jtap-zsh-test-{}", std::process::id());
    let tmux = |args: &[&str]| {
        let out = std::process::Command::new("tmux")
            .args(["-L", &socket])
            .args(args)
            .output()
            .expect("running tmux (scripts/setup-system.sh installs it)");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let shell = format!(
        "env PATH='{}' ZDOTDIR='{}' zsh",
        path_with_jtap(),
        dir.path().display()
    );
    tmux(&[
        "new-session",
        "-d",
        "-s",
        "z",
        "-x",
        "200",
        "-y",
        "10",
        &shell,
    ]);
    let line = || {
        tmux(&["capture-pane", "-p", "-t", "z"])
            .lines()
            .find(|l| l.starts_with("> "))
            .unwrap_or("")
            .to_string()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    // Each Tab asks the JVM: the text is typed, shown, then completed before the next.
    let wait_for = |done: &dyn Fn(&str) -> bool| {
        while !done(&line()) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    };
    for key in keys {
        tmux(&["send-keys", "-t", "z", "-l", "--", key]);
        wait_for(&|l| l.trim_end().ends_with(key));
        tmux(&["send-keys", "-t", "z", "Tab"]);
        wait_for(&|l| !l.trim_end().ends_with(key));
    }
    wait_for(&|l| l.contains(expect));
    let shown = line();
    tmux(&["kill-server"]);
    shown
}

#[test]
fn zsh_and_fish_complete_class_and_method_names_from_the_jvm() {
    for jdk in jdks() {
        let mut jvm = JavaProcess::start(jdk, "workloads.OnCall");
        let pid = jvm.pid().to_string();
        let v = jdk.version;
        let classes = fish_completes(&format!("jtap trace {pid} workloads.OnC"));
        assert_eq!(classes, ["workloads.OnCall"], "JDK {v}");
        let methods = fish_completes(&format!("jtap monitor {pid} -i 1s workloads.OnCall::sp"));
        assert_eq!(methods, ["workloads.OnCall::spin"], "JDK {v}");
        let options = fish_completes("jtap trace --thresh");
        assert_eq!(options, ["--threshold"], "JDK {v}");

        // A class without a space after it (`::` may follow), then its method with one.
        let wanted = format!("> jtap trace {pid} workloads.OnCall::spin --threshold");
        let line = zsh_completes(
            &[&format!("jtap trace {pid} workloads.OnC"), "::sp", "--thr"],
            &wanted,
        );
        assert!(line.starts_with(&wanted), "JDK {v}: {line:?}");
    }
}

#[test]
fn bad_input_gets_a_one_line_error() {
    jtap(["classes", "999999999", "Foo"]).fails_with(10, "no process");
    jtap(["classes", "1", "/(/"]).fails_with(2, "bad class pattern");
}
