//! Malformed input returns errors, never panics: corpus classes with random corruption go
//! through parse, write, listing and instrumentation (the stable-toolchain companion of the
//! `cargo fuzz` target in fuzz/).

mod common;

use std::fs;

use jtap_classfile::inject::instrument_class;
use jtap_classfile::plan::Registry;
use jtap_classfile::{ClassFile, InjectionPlan};

struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn exercise(data: &[u8], plan: &InjectionPlan) {
    if let Ok(cf) = ClassFile::parse(data) {
        assert_eq!(
            cf.write(),
            data,
            "whatever parses must write back identically"
        );
        let _ = jtap_classfile::listing::listing(&cf);
        if let Ok(out) = instrument_class(data, plan, &mut Registry::default()) {
            ClassFile::parse(&out.bytes).expect("instrumented output parses");
        }
    }
}

#[test]
fn corrupted_classes_never_panic() {
    let dir = common::sample_classes("11");
    let mut seeds: Vec<Vec<u8>> = common::class_files(&dir)
        .iter()
        .map(|p| fs::read(p).unwrap())
        .collect();
    if let Some(m) = common::jdk_modules(common::JDK17, "jdk17") {
        for c in [
            "java/util/HashMap.class",
            "java/lang/String.class",
            "java/util/concurrent/ConcurrentHashMap.class",
        ] {
            seeds.push(fs::read(m.join("java.base").join(c)).unwrap());
        }
    }
    let plan = InjectionPlan::everything(common::PROBES);
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    let mut parsed = 0;
    for round in 0..3000 {
        let mut data = seeds[round % seeds.len()].clone();
        match rng.next() % 4 {
            0 => {
                let at = (rng.next() as usize) % data.len();
                data.truncate(at);
            }
            1 => {
                for _ in 0..1 + rng.next() % 8 {
                    let at = (rng.next() as usize) % data.len();
                    data[at] = rng.next() as u8;
                }
            }
            2 => {
                // Corrupt inside code: flip bytes in the last third, where methods live.
                let start = data.len() * 2 / 3;
                let at = start + (rng.next() as usize) % (data.len() - start);
                data[at] ^= 1 << (rng.next() % 8);
            }
            _ => {
                let at = (rng.next() as usize) % data.len();
                let len = 1 + (rng.next() as usize) % 16;
                let junk: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
                data.splice(at..at, junk);
            }
        }
        if ClassFile::parse(&data).is_ok() {
            parsed += 1;
        }
        exercise(&data, &plan);
    }
    println!("3000 corrupted classes, {parsed} still parsed");
}
