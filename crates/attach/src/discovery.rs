//! Finding JVMs without attaching: hsperfdata files cross-checked with `/proc`.

use std::fs;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::{AttachError, Result};
use crate::perfdata::PerfData;
use crate::process::{self, Process};

/// What can be known about a JVM without attaching to it.
#[derive(Debug, Clone, Serialize)]
pub struct JvmInfo {
    /// Pid in our namespace.
    pub pid: u32,
    /// Pid inside the JVM's own pid namespace, when it differs (containers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ns_pid: Option<u32>,
    /// Owner of the process.
    pub user: String,
    /// Main class, `-jar` file or `-m` module, as far as it can be told.
    pub main: String,
    /// Application arguments after the main class.
    pub args: String,
    /// `java.version` of the JVM.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub java_version: Option<String>,
    /// Seconds since the process started.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uptime_secs: Option<f64>,
    /// Bytes used in the Java heap, from the GC's perf counters.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub heap_used: Option<u64>,
    /// Bytes committed to the Java heap.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub heap_committed: Option<u64>,
    /// Bytes the Java heap may grow to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub heap_max: Option<u64>,
    /// JVM options the JVM was started with (from perf data, else the command line).
    pub jvm_args: String,
    /// Where the information came from: "perfdata" or "proc".
    pub source: &'static str,
}

impl JvmInfo {
    /// Describes the JVM with this pid, or says why it is not one.
    pub fn inspect(pid: u32) -> Result<JvmInfo> {
        let process = Process::open(pid)?;
        let perf = read_perf_data(&process);
        if perf.is_none() && !process.maps_libjvm()? {
            return Err(AttachError::NotAJvm {
                pid,
                name: process.name.clone(),
            });
        }
        Ok(describe(&process, perf.as_ref()))
    }
}

/// Lists every JVM the caller can see, sorted by pid. Processes we may not inspect are skipped.
pub fn list_jvms() -> Vec<JvmInfo> {
    let me = std::process::id();
    process::all_pids()
        .into_iter()
        .filter(|&pid| pid != me)
        .filter_map(|pid| JvmInfo::inspect(pid).ok())
        .collect()
}

/// Finds and parses the JVM's PerfData file, looking in its own `/tmp` (through
/// `/proc/<pid>/root`, so containers work) under every `hsperfdata_<user>` directory.
pub fn read_perf_data(process: &Process) -> Option<PerfData> {
    let candidates = perf_data_candidates(&process.tmp_dir(), process.ns_pid)
        .into_iter()
        .chain(
            perf_data_candidates(Path::new("/tmp"), process.pid)
                .into_iter()
                .filter(|_| !process.in_container()),
        );
    candidates
        .filter_map(|path| fs::read(path).ok())
        .find_map(|bytes| PerfData::parse(&bytes).ok())
}

fn perf_data_candidates(tmp: &Path, pid: u32) -> Vec<PathBuf> {
    let Ok(dir) = fs::read_dir(tmp) else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("hsperfdata_"))
        .map(|e| e.path().join(pid.to_string()))
        .filter(|p| p.exists())
        .collect()
}

fn describe(process: &Process, perf: Option<&PerfData>) -> JvmInfo {
    let command_line = CommandLine::parse(&process.cmdline);
    let java_command = perf
        .and_then(|p| p.text("sun.rt.javaCommand"))
        .map(str::to_string);
    let (main, args) = match &java_command {
        Some(cmd) if !cmd.is_empty() => {
            let (main, args) = cmd.split_once(' ').unwrap_or((cmd, ""));
            (main.to_string(), args.to_string())
        }
        _ => (command_line.main.clone(), command_line.args.join(" ")),
    };
    let java_version = perf
        .and_then(|p| p.text("java.property.java.version"))
        .map(str::to_string)
        .or_else(|| java_version_from_release_file(process));
    let jvm_args = perf
        .and_then(|p| p.text("java.rt.vmArgs"))
        .map(str::to_string)
        .unwrap_or_else(|| command_line.jvm_options.join(" "));
    JvmInfo {
        pid: process.pid,
        ns_pid: process.in_container().then_some(process.ns_pid),
        user: process::user_name(process.uid),
        main,
        args,
        java_version,
        uptime_secs: process.uptime_secs(),
        heap_used: perf
            .and_then(|p| p.sum_matching("sun.gc.generation.", 2, ".used"))
            .map(|v| v as u64),
        heap_committed: perf
            .and_then(|p| p.sum_matching("sun.gc.generation.", 0, ".capacity"))
            .map(|v| v as u64),
        heap_max: perf.and_then(PerfData::heap_max).map(|v| v as u64),
        jvm_args,
        source: if perf.is_some() { "perfdata" } else { "proc" },
    }
}

/// Reads `JAVA_VERSION` from the `release` file of the JVM's installation.
fn java_version_from_release_file(process: &Process) -> Option<String> {
    let exe = fs::read_link(format!("/proc/{}/exe", process.pid)).ok()?;
    let java_home = exe.parent()?.parent()?;
    let release = process
        .root()
        .join(java_home.strip_prefix("/").ok()?)
        .join("release");
    let text = fs::read_to_string(release).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("JAVA_VERSION="))
        .map(|v| v.trim_matches('"').to_string())
}

/// A `java` command line split into JVM options, the main entry and its arguments.
#[derive(Debug, Default, PartialEq)]
pub struct CommandLine {
    /// The launcher options before the main entry, with the values of options that take one
    /// (`-cp a.jar` is two elements).
    pub jvm_options: Vec<String>,
    /// The main class, the jar after `-jar`, or the `module/class` after `-m`/`--module`;
    /// empty when the command line has none.
    pub main: String,
    /// The arguments after the main entry, passed to the application.
    pub args: Vec<String>,
}

impl CommandLine {
    /// Splits `argv` (launcher first) the way the `java` launcher reads it.
    pub fn parse(argv: &[String]) -> CommandLine {
        // Options whose value is the next argument.
        const WITH_VALUE: &[&str] = &[
            "-cp",
            "-classpath",
            "--class-path",
            "-p",
            "--module-path",
            "--upgrade-module-path",
            "--add-modules",
            "--add-reads",
            "--add-exports",
            "--add-opens",
            "--limit-modules",
            "--patch-module",
            "--source",
            "--enable-native-access",
        ];
        let mut out = CommandLine::default();
        let mut it = argv.iter().skip(1);
        while let Some(arg) = it.next() {
            if arg == "-jar" || arg == "-m" || arg == "--module" {
                out.main = it.next().cloned().unwrap_or_default();
                break;
            }
            if WITH_VALUE.contains(&arg.as_str()) {
                out.jvm_options.push(arg.clone());
                out.jvm_options.extend(it.next().cloned());
            } else if arg.starts_with('-') {
                out.jvm_options.push(arg.clone());
            } else {
                out.main = arg.clone();
                break;
            }
        }
        out.args = it.cloned().collect();
        out
    }

    /// True when the JVM was started with this exact option (e.g. `-Xrs`).
    pub fn has_option(&self, option: &str) -> bool {
        self.jvm_options.iter().any(|o| o == option)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split(' ').map(String::from).collect()
    }

    #[test]
    fn splits_java_command_lines() {
        let cl = CommandLine::parse(&argv(
            "java -Xmx1g -cp a.jar:b.jar -Xrs com.x.Main --port 1",
        ));
        assert_eq!(cl.main, "com.x.Main");
        assert_eq!(cl.args, vec!["--port", "1"]);
        assert!(cl.has_option("-Xrs"));
        assert_eq!(cl.jvm_options, vec!["-Xmx1g", "-cp", "a.jar:b.jar", "-Xrs"]);
        assert_eq!(
            CommandLine::parse(&argv("java -jar app.jar x")).main,
            "app.jar"
        );
        assert_eq!(
            CommandLine::parse(&argv("java -m mod/com.x.Main")).main,
            "mod/com.x.Main"
        );
    }
}
