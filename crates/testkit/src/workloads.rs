//! Compiling the workloads once per test run: the Java classes of `tests/java/workloads/`,
//! the real-program drivers of `tests/java/real/` (against Debian's jars of H2, Jetty and
//! ECJ) and the native libraries of `tests/native/`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::{env, fs};

/// The repository root (where the workspace `Cargo.toml` lives).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("crates/testkit is two levels deep")
        .to_path_buf()
}

/// Compiles every `.java` file under `tests/java/workloads/` with JDK 17's javac
/// (`--release 11`, so every JDK of the matrix runs them) and returns the class directory.
/// Output is cached by source content, so parallel test binaries reuse one compilation.
pub fn compiled_workloads() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| compile_java("workloads", &[]))
}

/// Jars of Debian packages (`/usr/share/java/<name>.jar`, from `scripts/debian-packages.txt`)
/// that the drivers of `tests/java/real/` are compiled against; each driver runs with the
/// subset it needs (see [`debian_jar`]).
const REAL_PROGRAM_JARS: &[&str] = &[
    "ecj",
    "h2",
    "jetty9-server",
    "jetty9-http",
    "jetty9-io",
    "jetty9-util",
    "servlet-api",
];

/// Compiles the real-program drivers of `tests/java/real/` (package `real`) against
/// the Debian jars they run on (H2, Jetty, the servlet API, ECJ), like [`compiled_workloads`], and returns the class directory.
pub fn compiled_real_programs() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let jars: Vec<PathBuf> = REAL_PROGRAM_JARS.iter().map(|j| debian_jar(j)).collect();
        compile_java("real", &jars)
    })
}

/// `/usr/share/java/<name>.jar`; panics, naming the fix, when its package is not installed.
pub fn debian_jar(name: &str) -> PathBuf {
    let jar = PathBuf::from(format!("/usr/share/java/{name}.jar"));
    assert!(
        jar.exists(),
        "{} missing: run scripts/setup-system.sh (it installs scripts/debian-packages.txt)",
        jar.display()
    );
    jar
}

/// Compiles every `.java` file under `tests/java/<dir>/` against `classpath` into
/// `target/java-<dir>/<digest of the sources>` (once: reused while the sources are unchanged).
fn compile_java(dir: &str, classpath: &[PathBuf]) -> PathBuf {
    let mut sources = Vec::new();
    collect_java_files(&repo_root().join("tests/java").join(dir), &mut sources);
    sources.sort();
    let out = repo_root().join(format!("target/java-{dir}/{}", digest(&sources)));
    if out.join(".complete").exists() {
        return out;
    }
    let staging = out.with_extension(format!("tmp{}", std::process::id()));
    let _ = fs::remove_dir_all(&staging);
    fs::create_dir_all(&staging).expect("create the class dir");
    let javac = javac();
    let mut command = Command::new(&javac);
    command.args(["--release", "11", "-g", "-d"]).arg(&staging);
    if !classpath.is_empty() {
        command
            .arg("-cp")
            .arg(env::join_paths(classpath).expect("classpath"));
    }
    let status = command
        .args(&sources)
        .status()
        .unwrap_or_else(|e| panic!("running {}: {e}", javac.display()));
    assert!(status.success(), "compiling tests/java/{dir} failed");
    fs::write(staging.join(".complete"), b"").expect("mark complete");
    if fs::rename(&staging, &out).is_err() {
        // Another test binary finished first; use its output.
        let _ = fs::remove_dir_all(&staging);
    }
    out
}

/// Compiles `tests/native/<name>.c` into a shared library with the C compiler (`cc`, or
/// `$CC`) and returns its path. Cached by source content like [`compiled_workloads`].
pub fn compiled_native_library(name: &str) -> PathBuf {
    let source = repo_root().join(format!("tests/native/{name}.c"));
    let dir = repo_root().join(format!(
        "target/native-workloads/{}",
        digest(std::slice::from_ref(&source))
    ));
    let library = dir.join(format!("lib{name}.so"));
    if library.exists() {
        return library;
    }
    fs::create_dir_all(&dir).expect("create native workload dir");
    let staging = library.with_extension(format!("tmp{}", std::process::id()));
    let cc = env::var("CC").unwrap_or_else(|_| "cc".into());
    let status = Command::new(&cc)
        .args(["-shared", "-fPIC", "-O2", "-g", "-pthread", "-o"])
        .arg(&staging)
        .arg(&source)
        .status()
        .unwrap_or_else(|e| panic!("running {cc}: {e}"));
    assert!(status.success(), "compiling {} failed", source.display());
    fs::rename(&staging, &library).expect("move the compiled library in place");
    library
}

/// A hex digest of the files' paths and contents (FNV-1a), naming their compiled output.
fn digest(files: &[PathBuf]) -> String {
    let mut digest: u64 = 0xcbf2_9ce4_8422_2325;
    for path in files {
        for byte in path
            .to_string_lossy()
            .bytes()
            .chain(fs::read(path).unwrap_or_default())
        {
            digest = (digest ^ byte as u64).wrapping_mul(0x100_0000_01b3);
        }
    }
    format!("{digest:016x}")
}

fn javac() -> PathBuf {
    let candidates = [
        env::var("JTAP_JAVAC").ok().map(PathBuf::from),
        Some(PathBuf::from(
            "/usr/lib/jvm/java-17-openjdk-amd64/bin/javac",
        )),
        Some(PathBuf::from("/usr/lib/jvm/temurin-25-jdk-amd64/bin/javac")),
    ];
    candidates
        .into_iter()
        .flatten()
        .find(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from("javac"))
}

fn collect_java_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect_java_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "java") {
            out.push(path);
        }
    }
}
