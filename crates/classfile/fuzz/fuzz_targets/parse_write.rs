//! Arbitrary bytes never panic the parser, the writer or the instrumenter; whatever parses
//! writes back identically, and whatever is instrumented parses again.
#![no_main]

use jtap_classfile::inject::instrument_class;
use jtap_classfile::plan::Registry;
use jtap_classfile::{ClassFile, InjectionPlan};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(cf) = ClassFile::parse(data) {
        assert_eq!(cf.write(), data);
        let _ = jtap_classfile::listing::listing(&cf);
        if let Ok(out) = instrument_class(data, &InjectionPlan::everything("jtap/runtime/Probes"), &mut Registry::default()) {
            ClassFile::parse(&out.bytes).expect("instrumented class parses");
        }
    }
});
