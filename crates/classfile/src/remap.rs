//! Moving classes to another package prefix, e.g. to load copies of `java.*` classes in an
//! ordinary class loader for verification.

use std::collections::HashSet;

use crate::class_file::ClassFile;
use crate::descriptor::{parse_field_descriptor, parse_method_descriptor};
use crate::error::Result;

/// Classes the verifier knows by name. Moving them would change what it checks, so they keep
/// their names when classes are moved to a loadable package (and cannot be verified that way).
pub const VERIFIER_KNOWN_CLASSES: &[&str] = &[
    "java/lang/Object",
    "java/lang/String",
    "java/lang/Class",
    "java/lang/Throwable",
    "java/lang/Cloneable",
    "java/io/Serializable",
    "java/lang/invoke/MethodHandle",
    "java/lang/invoke/MethodType",
];

fn prefix_descriptor(d: &[u8], names: &HashSet<Vec<u8>>, prefix: &[u8]) -> Option<Vec<u8>> {
    if parse_method_descriptor(d).is_err() && parse_field_descriptor(d).is_err() {
        return None;
    }
    let mut out = Vec::with_capacity(d.len() + 16);
    let mut changed = false;
    let mut i = 0;
    while i < d.len() {
        if d[i] == b'L' {
            let end = i + d[i..].iter().position(|&b| b == b';')?;
            let name = &d[i + 1..end];
            out.push(b'L');
            if names.contains(name) {
                out.extend_from_slice(prefix);
                changed = true;
            }
            out.extend_from_slice(name);
            out.push(b';');
            i = end + 1;
        } else {
            out.push(d[i]);
            i += 1;
        }
    }
    changed.then_some(out)
}

/// Rewrites a class so that every class in `names` (internal names) is referred to as
/// `prefix + name`: class references, descriptors, and Utf8 constants equal to a name.
/// Generic signatures are left alone.
pub fn prefix_classes(class: &[u8], names: &HashSet<Vec<u8>>, prefix: &str) -> Result<Vec<u8>> {
    let mut cf = ClassFile::parse(class)?;
    let prefix = prefix.as_bytes();
    cf.constant_pool.map_utf8(|s| {
        if names.contains(s) {
            let mut v = prefix.to_vec();
            v.extend_from_slice(s);
            Some(v)
        } else if matches!(s.first(), Some(b'(' | b'[' | b'L')) {
            prefix_descriptor(s, names, prefix)
        } else {
            None
        }
    })?;
    Ok(cf.write())
}
