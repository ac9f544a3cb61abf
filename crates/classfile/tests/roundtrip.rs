//! Parse + write of every corpus class gives identical bytes.

mod common;

use std::fs;

use jtap_classfile::ClassFile;

fn check(name: &str, bytes: &[u8], failures: &mut Vec<String>) {
    match ClassFile::parse(bytes) {
        Ok(cf) => {
            if cf.write() != bytes {
                failures.push(format!("{name}: not identical"));
            }
        }
        Err(e) => failures.push(format!("{name}: {e}")),
    }
}

#[test]
fn jdk_modules_round_trip_identically() {
    for (home, tag) in [(common::JDK17, "jdk17"), (common::JDK25, "jdk25")] {
        let Some(dir) = common::jdk_modules(home, tag) else {
            continue;
        };
        let files = common::class_files(&dir);
        let mut failures = Vec::new();
        for f in &files {
            check(
                &f.display().to_string(),
                &fs::read(f).unwrap(),
                &mut failures,
            );
        }
        println!(
            "{tag}: {} classes, {} identical",
            files.len(),
            files.len() - failures.len()
        );
        assert!(
            failures.is_empty(),
            "{tag}: {:?}",
            &failures[..failures.len().min(20)]
        );
    }
}

#[test]
fn debian_jars_round_trip_identically() {
    for jar in common::existing_jars() {
        let classes = common::jar_classes(&jar);
        let mut failures = Vec::new();
        for (name, bytes) in &classes {
            check(name, bytes, &mut failures);
        }
        println!(
            "{}: {} classes, {} identical",
            jar.display(),
            classes.len(),
            classes.len() - failures.len()
        );
        assert!(
            failures.is_empty(),
            "{}: {:?}",
            jar.display(),
            &failures[..failures.len().min(20)]
        );
    }
}
