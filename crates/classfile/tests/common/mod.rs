//! Corpus helpers shared by the integration tests.
#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

pub const JDK17: &str = "/usr/lib/jvm/java-17-openjdk-amd64";
pub const JDK25: &str = "/usr/lib/jvm/temurin-25-jdk-amd64";

/// Jars of the Debian packages in scripts/debian-packages.txt.
pub const JARS: &[&str] = &[
    "/usr/share/java/guava.jar",
    "/usr/share/java/asm.jar",
    "/usr/share/java/asm-commons.jar",
    "/usr/share/java/asm-tree.jar",
    "/usr/share/java/asm-util.jar",
    "/usr/share/java/asm-analysis.jar",
    "/usr/share/java/byte-buddy.jar",
    "/usr/share/java/scala-library.jar",
    "/usr/share/java/scala-reflect.jar",
    "/usr/share/java/scala-compiler.jar",
    "/usr/share/java/groovy.jar",
    "/usr/share/java/kotlin-stdlib.jar",
    "/usr/share/java/kotlin-compiler.jar",
];

pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

pub fn cache_dir() -> PathBuf {
    let d = workspace().join(".cache/classfile");
    fs::create_dir_all(&d).unwrap();
    d
}

/// The classes of a JDK's `lib/modules`, extracted once with `jimage extract` into the cache.
/// None (with a printed reason) when the JDK is absent.
pub fn jdk_modules(home: &str, tag: &str) -> Option<PathBuf> {
    let modules = Path::new(home).join("lib/modules");
    if !modules.exists() {
        eprintln!("skipping {tag}: {} not found", modules.display());
        return None;
    }
    let dir = cache_dir().join(format!("{tag}-modules"));
    if !dir.exists() {
        let tmp = cache_dir().join(format!("{tag}.tmp"));
        let _ = fs::remove_dir_all(&tmp);
        let st = Command::new(Path::new(home).join("bin/jimage"))
            .arg("extract")
            .arg("--dir")
            .arg(&tmp)
            .arg(&modules)
            .status()
            .expect("run jimage");
        assert!(st.success(), "jimage extract failed");
        fs::rename(&tmp, &dir).unwrap();
    }
    Some(dir)
}

/// All `.class` files under `dir`, sorted.
pub fn class_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "class") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// (entry name, bytes) of every class in a jar.
pub fn jar_classes(jar: &Path) -> Vec<(String, Vec<u8>)> {
    use std::io::Read;
    let f = fs::File::open(jar).unwrap();
    let mut z = zip::ZipArchive::new(f).unwrap();
    let mut out = Vec::new();
    for i in 0..z.len() {
        let mut e = z.by_index(i).unwrap();
        let name = e.name().to_string();
        if name.ends_with(".class") && !name.starts_with("META-INF/") {
            let mut v = Vec::with_capacity(e.size() as usize);
            e.read_to_end(&mut v).unwrap();
            out.push((name, v));
        }
    }
    out
}

/// The jars that exist, with a printed note for the missing ones.
pub fn existing_jars() -> Vec<PathBuf> {
    let mut v = Vec::new();
    for j in JARS {
        let p = Path::new(j);
        match p.canonicalize() {
            Ok(c) if !v.contains(&c) => v.push(c),
            Ok(_) => {}
            Err(_) => eprintln!("skipping {j}: not installed (see scripts/debian-packages.txt)"),
        }
    }
    v
}

/// The probe runtime class of the test harness.
pub const PROBES: &str = "jtap/verify/Probes";

/// Compiles the Java harness (tests/java) once into the cache; returns the class directory.
static COMPILE: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub fn harness() -> PathBuf {
    let _guard = COMPILE.lock().unwrap_or_else(|e| e.into_inner());
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/java");
    let out = cache_dir().join("harness");
    let sources = ["Verify.java", "jtap/verify/Probes.java"];
    let newest_src = sources
        .iter()
        .filter_map(|s| fs::metadata(src.join(s)).and_then(|m| m.modified()).ok())
        .max()
        .unwrap();
    let stamp = out.join(".stamp");
    if fs::metadata(&stamp)
        .and_then(|m| m.modified())
        .map_or(true, |t| t < newest_src)
    {
        let _ = fs::remove_dir_all(&out);
        fs::create_dir_all(&out).unwrap();
        let st = Command::new(format!("{JDK17}/bin/javac"))
            .args(["--release", "11", "-d"])
            .arg(&out)
            .args(sources.iter().map(|s| src.join(s)))
            .status()
            .expect("run javac");
        assert!(st.success(), "javac failed");
        fs::write(&stamp, b"").unwrap();
    }
    out
}

/// Outcome of loading a directory of classes with verification on.
#[derive(Debug, Default)]
pub struct VerifyReport {
    pub total: usize,
    /// (kind, class, message) for VerifyError / ClassFormatError.
    pub errors: Vec<(String, String, String)>,
    /// Classes failing for other reasons (missing dependencies…).
    pub other: usize,
    pub summary: String,
}

pub fn run_verify(java_home: &str, dir: &Path) -> VerifyReport {
    let out = Command::new(format!("{java_home}/bin/java"))
        .args(["-Xshare:off", "-Xss8m", "-cp"])
        .arg(harness())
        .arg("Verify")
        .arg(dir)
        .output()
        .expect("run java");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "harness failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        &text[text.len().saturating_sub(2000)..]
    );
    let mut r = VerifyReport::default();
    for line in text.lines() {
        let mut parts = line.splitn(3, '\t');
        match (parts.next(), parts.next(), parts.next()) {
            (Some(k @ ("VERIFY" | "FORMAT")), Some(c), m) => {
                r.errors.push((k.into(), c.into(), m.unwrap_or("").into()))
            }
            (Some("OTHER"), _, _) => r.other += 1,
            (Some("TOTAL"), Some(n), _) => {
                r.total = n.parse().unwrap();
                r.summary = line.replace('\t', " ");
            }
            _ => {}
        }
    }
    r
}

/// Moves every class named in `names` to the package prefix `jvfy/` (so java.* classes can be
/// defined by an ordinary class loader).
pub fn rename(bytes: &[u8], names: &std::collections::HashSet<Vec<u8>>) -> Vec<u8> {
    jtap_classfile::remap::prefix_classes(bytes, names, "jvfy/").unwrap()
}

/// Compiles tests/java/sample/Sample.java with `--release <release>` (cached); returns the dir.
pub fn sample_classes(release: &str) -> PathBuf {
    let _guard = COMPILE.lock().unwrap_or_else(|e| e.into_inner());
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/java/sample/Sample.java");
    let out = cache_dir().join(format!("sample-{release}"));
    let stamp = out.join(".stamp");
    let src_time = fs::metadata(&src).and_then(|m| m.modified()).unwrap();
    if fs::metadata(&stamp)
        .and_then(|m| m.modified())
        .map_or(true, |t| t < src_time)
    {
        let _ = fs::remove_dir_all(&out);
        fs::create_dir_all(&out).unwrap();
        let st = Command::new(format!("{JDK17}/bin/javac"))
            .args(["-nowarn", "-g", "--release", release, "-d"])
            .arg(&out)
            .arg(&src)
            .status()
            .unwrap();
        assert!(st.success());
        fs::write(&stamp, b"").unwrap();
    }
    out
}

/// Runs `main_class` with `cp` on JDK 17 (verification on); returns (stdout, probe calls).
pub fn run_java(cp: &str, main_class: &str) -> (String, u64, String) {
    let out = Command::new(format!("{JDK17}/bin/java"))
        .args([
            "-Djtap.probes.report=1",
            "-Djtap.probes.log=1",
            "-Xshare:off",
            "-cp",
            cp,
            main_class,
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "{main_class} failed:\n{stdout}\n{stderr}"
    );
    let calls = stderr
        .lines()
        .find_map(|l| l.strip_prefix("jtap-probes: "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);
    (stdout, calls, stderr)
}

/// Instruments every class file of `from` into `to` with `plan`; no method may be refused.
pub fn instrument_dir(
    from: &Path,
    to: &Path,
    plan: &jtap_classfile::InjectionPlan,
) -> jtap_classfile::plan::Registry {
    instrument_dir_allowing(from, to, plan, |_| false)
}

/// Instruments every class file of `from` into `to` with `plan`; methods may be refused
/// (and so left unchanged) only for reasons `allowed` accepts.
pub fn instrument_dir_allowing(
    from: &Path,
    to: &Path,
    plan: &jtap_classfile::InjectionPlan,
    allowed: impl Fn(&jtap_classfile::Error) -> bool,
) -> jtap_classfile::plan::Registry {
    let mut registry = jtap_classfile::plan::Registry::default();
    for p in class_files(from) {
        let out =
            jtap_classfile::inject::instrument_class(&fs::read(&p).unwrap(), plan, &mut registry)
                .unwrap();
        assert!(
            out.refused.iter().all(|(_, reason)| allowed(reason)),
            "{}: {:?}",
            p.display(),
            out.refused
        );
        let dest = to.join(p.strip_prefix(from).unwrap());
        fs::create_dir_all(dest.parent().unwrap()).unwrap();
        fs::write(dest, out.bytes).unwrap();
    }
    registry
}
