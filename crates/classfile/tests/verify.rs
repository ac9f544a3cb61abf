//! Full instrumentation of the corpus, then loading every rewritten class with bytecode
//! verification on in JDK 17 and 25: no VerifyError or ClassFormatError may appear that the
//! original class does not also produce (missing optional dependencies, for instance).

mod common;

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::Path;

use jtap_classfile::inject::instrument_class;
use jtap_classfile::plan::Registry;
use jtap_classfile::{ClassFile, InjectionPlan};

#[derive(Default)]
struct Stats {
    classes: usize,
    instrumented_methods: usize,
    refused: HashMap<String, usize>,
    failed: Vec<String>,
}

/// Instruments `classes` into `inst_dir` and copies the originals into `base_dir`, both renamed
/// when `rename` is set.
fn prepare(classes: &[(String, Vec<u8>)], base_dir: &Path, inst_dir: &Path, rename: bool) -> Stats {
    let plan = InjectionPlan::everything(common::PROBES);
    let mut registry = Registry::default();
    let mut stats = Stats::default();
    let names: HashSet<Vec<u8>> = if rename {
        classes
            .iter()
            .filter_map(|(_, b)| {
                ClassFile::parse(b)
                    .ok()
                    .and_then(|c| c.name().ok().map(<[u8]>::to_vec))
            })
            .filter(|n| {
                !jtap_classfile::remap::VERIFIER_KNOWN_CLASSES
                    .iter()
                    .any(|k| k.as_bytes() == &n[..])
            })
            .collect()
    } else {
        HashSet::new()
    };
    for (name, bytes) in classes {
        if name.ends_with("module-info.class") || name.ends_with("package-info.class") {
            continue;
        }
        let cls = name.trim_end_matches(".class");
        if rename && jtap_classfile::remap::VERIFIER_KNOWN_CLASSES.contains(&cls) {
            continue;
        }
        stats.classes += 1;
        let out = match instrument_class(bytes, &plan, &mut registry) {
            Ok(o) => o,
            Err(e) => {
                stats.failed.push(format!("{name}: {e}"));
                continue;
            }
        };
        stats.instrumented_methods += out.methods_instrumented;
        for (_, e) in &out.refused {
            *stats.refused.entry(e.to_string()).or_default() += 1;
        }
        let (b, i, rel) = if rename {
            (
                common::rename(bytes, &names),
                common::rename(&out.bytes, &names),
                format!("jvfy/{name}"),
            )
        } else {
            (bytes.clone(), out.bytes, name.clone())
        };
        for (dir, data) in [(base_dir, b), (inst_dir, i)] {
            let p = dir.join(&rel);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, data).unwrap();
        }
    }
    stats
}

fn check(label: &str, java_home: &str, classes: Vec<(String, Vec<u8>)>, rename: bool) {
    let tmp = tempfile::tempdir().unwrap();
    let (base, inst) = (tmp.path().join("base"), tmp.path().join("inst"));
    let stats = prepare(&classes, &base, &inst, rename);
    let b = common::run_verify(java_home, &base);
    let i = common::run_verify(java_home, &inst);
    let pre: HashSet<&str> = b.errors.iter().map(|e| e.1.as_str()).collect();
    let regressions: Vec<_> = i
        .errors
        .iter()
        .filter(|e| !pre.contains(e.1.as_str()))
        .collect();
    println!(
        "{label}: {} classes, {} methods instrumented, refused {:?}, failed {}; original: {}; instrumented: {}; new VerifyError/ClassFormatError: {}",
        stats.classes,
        stats.instrumented_methods,
        stats.refused,
        stats.failed.len(),
        b.summary,
        i.summary,
        regressions.len()
    );
    for e in b.errors.iter().take(5) {
        println!(
            "  (fails before instrumentation too) {} {} {}",
            e.0,
            e.1,
            &e.2[..e.2.len().min(300)]
        );
    }
    for e in regressions.iter().take(40) {
        println!("  {} {} {}", e.0, e.1, &e.2[..e.2.len().min(600)]);
    }
    assert!(
        stats.failed.is_empty(),
        "{label}: {:?}",
        &stats.failed[..stats.failed.len().min(10)]
    );
    assert!(
        regressions.is_empty(),
        "{label}: {} classes fail verification only after instrumentation",
        regressions.len()
    );
}

fn module_classes(dir: &Path) -> Vec<(String, Vec<u8>)> {
    // jimage extracts as <module>/<package path>/<Class>.class.
    common::class_files(dir)
        .into_iter()
        .map(|p| {
            let rel = p.strip_prefix(dir).unwrap();
            let rel: std::path::PathBuf = rel.components().skip(1).collect();
            (rel.to_string_lossy().into_owned(), fs::read(&p).unwrap())
        })
        .collect()
}

#[test]
fn jdk17_modules_verify_after_instrumentation() {
    let Some(dir) = common::jdk_modules(common::JDK17, "jdk17") else {
        return;
    };
    check("jdk17", common::JDK17, module_classes(&dir), true);
}

#[test]
fn jdk25_modules_verify_after_instrumentation() {
    if !Path::new(common::JDK25).exists() {
        eprintln!("skipping: {} not found", common::JDK25);
        return;
    }
    let Some(dir) = common::jdk_modules(common::JDK25, "jdk25") else {
        return;
    };
    check("jdk25", common::JDK25, module_classes(&dir), true);
}

#[test]
fn debian_jars_verify_after_instrumentation() {
    let mut seen = HashSet::new();
    let mut classes = Vec::new();
    for jar in common::existing_jars() {
        for (name, bytes) in common::jar_classes(&jar) {
            if seen.insert(name.clone()) {
                classes.push((name, bytes));
            }
        }
    }
    check("debian jars (jdk17)", common::JDK17, classes, false);
}
