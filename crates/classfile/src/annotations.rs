//! The annotations a class file declares, as the JVM keeps them: the types in a class's or a
//! method's `RuntimeVisibleAnnotations` (HotSpot drops the invisible ones as it loads a
//! class, so a retransformation never sees them), and the type names a constant pool holds.

use crate::bytes::Reader;
use crate::constant_pool::{Constant, ConstantPool};
use crate::error::{Error, Result};
use crate::Attribute;

/// How deeply annotation values may nest (an annotation in an array in an annotation...).
const MAX_NESTING: u32 = 32;

/// The types (dotted: `javax.jws.WebService`) of the run-time visible annotations among
/// `attributes`, those of a class or of one of its members.
pub fn visible(pool: &ConstantPool, attributes: &[Attribute]) -> Result<Vec<String>> {
    let mut types = Vec::new();
    for attribute in attributes {
        if pool.utf8(attribute.name_index)? != b"RuntimeVisibleAnnotations" {
            continue;
        }
        let mut r = Reader::new(&attribute.info);
        for _ in 0..r.u2("num_annotations")? {
            types.push(annotation(pool, &mut r, 0)?);
        }
    }
    Ok(types)
}

/// The class types (dotted) a pool's Utf8 entries spell as field descriptors, `Lpkg/Name;`:
/// among them the type of every annotation its class and members declare.
pub fn descriptor_types(pool: &ConstantPool) -> Vec<String> {
    (1..pool.count())
        .filter(|&i| matches!(pool.get(i), Ok(Constant::Utf8 { .. })))
        .filter_map(|i| pool.utf8_str(i).ok())
        .filter_map(|text| {
            let name = text.strip_prefix('L')?.strip_suffix(';')?;
            (!name.is_empty() && !name.contains([';', '(', '[', '.']))
                .then(|| name.replace('/', "."))
        })
        .collect()
}

/// One annotation's type, its element values skipped.
fn annotation(pool: &ConstantPool, r: &mut Reader, depth: u32) -> Result<String> {
    let index = r.u2("annotation type")?;
    let descriptor = pool.utf8_str(index)?;
    let name = descriptor
        .strip_prefix('L')
        .and_then(|d| d.strip_suffix(';'))
        .ok_or(Error::BadAttribute(
            "annotation type is no class descriptor",
        ))?;
    let name = name.replace('/', ".");
    for _ in 0..r.u2("num_element_value_pairs")? {
        r.u2("element_name_index")?;
        element_value(pool, r, depth + 1)?;
    }
    Ok(name)
}

fn element_value(pool: &ConstantPool, r: &mut Reader, depth: u32) -> Result<()> {
    if depth > MAX_NESTING {
        return Err(Error::BadAttribute("annotation values nest too deeply"));
    }
    match r.u1("element_value tag")? {
        b'B' | b'C' | b'D' | b'F' | b'I' | b'J' | b'S' | b'Z' | b's' | b'c' => {
            r.u2("const_value_index")?;
        }
        b'e' => {
            r.u2("type_name_index")?;
            r.u2("const_name_index")?;
        }
        b'@' => {
            annotation(pool, r, depth)?;
        }
        b'[' => {
            for _ in 0..r.u2("num_values")? {
                element_value(pool, r, depth + 1)?;
            }
        }
        _ => return Err(Error::BadAttribute("bad annotation element_value tag")),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bytes::WriteBe;

    #[test]
    fn annotation_types_are_read_and_their_values_skipped() {
        let mut pool = ConstantPool::from_entries(1, &[]).unwrap();
        let name = pool.add_utf8("RuntimeVisibleAnnotations").unwrap();
        let web = pool.add_utf8("Ljavax/jws/WebService;").unwrap();
        let inner = pool.add_utf8("La/Inner;").unwrap();
        let key = pool.add_utf8("value").unwrap();
        let text = pool.add_utf8("x").unwrap();
        // @WebService(value = {"x", @Inner(value = E.X)}) @Inner
        let mut info = Vec::new();
        info.u2(2);
        info.u2(web);
        info.u2(1);
        info.u2(key);
        info.push(b'[');
        info.u2(2);
        info.push(b's');
        info.u2(text);
        info.push(b'@');
        info.u2(inner);
        info.u2(1);
        info.u2(key);
        info.push(b'e');
        info.u2(text);
        info.u2(text);
        info.u2(inner);
        info.u2(0);
        let attribute = Attribute {
            name_index: name,
            info,
        };
        assert_eq!(
            visible(&pool, std::slice::from_ref(&attribute)).unwrap(),
            ["javax.jws.WebService", "a.Inner"]
        );
        let mut cut = attribute.clone();
        cut.info.truncate(9);
        assert!(visible(&pool, &[cut]).is_err());
        let types = descriptor_types(&pool);
        assert_eq!(types, ["javax.jws.WebService", "a.Inner"]);
        let mut bytes = Vec::new();
        pool.write(&mut bytes);
        let (count, entries) = bytes.split_at(2);
        let count = u16::from_be_bytes([count[0], count[1]]);
        let read = ConstantPool::from_entries(count, entries).unwrap();
        assert_eq!(descriptor_types(&read), types);
        assert!(ConstantPool::from_entries(count, &entries[..entries.len() - 1]).is_err());
    }
}
