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
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
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
