//! Field and method descriptors, and type names as Java programmers write them.

use crate::error::{Error, Result};

/// The Java name of a JVM type: a descriptor or class signature (`Ljava/lang/String;` →
/// `java.lang.String`, `[I` → `int[]`, `[[Ljava/util/Map$Entry;` → `java.util.Map$Entry[][]`,
/// `V` → `void`) or an internal or dotted class name (`java/lang/String`, `[Ljava.lang.String;`
/// as HotSpot's histogram prints it). An array with no element type comes back unchanged.
pub fn java_name(name: &str) -> String {
    let dims = name.bytes().take_while(|&b| b == b'[').count();
    let element = &name[dims..];
    let base = match element {
        "" => return name.to_string(),
        "Z" => "boolean".to_string(),
        "B" => "byte".into(),
        "C" => "char".into(),
        "S" => "short".into(),
        "I" => "int".into(),
        "J" => "long".into(),
        "F" => "float".into(),
        "D" => "double".into(),
        "V" => "void".into(),
        _ => element
            .strip_prefix('L')
            .and_then(|e| e.strip_suffix(';'))
            .unwrap_or(element)
            .replace('/', "."),
    };
    base + &"[]".repeat(dims)
}

/// A field type (or `Void` for method returns).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldType<'a> {
    /// `B`
    Byte,
    /// `C`
    Char,
    /// `D`
    Double,
    /// `F`
    Float,
    /// `I`
    Int,
    /// `J`
    Long,
    /// `S`
    Short,
    /// `Z`
    Boolean,
    /// `V` (method return only)
    Void,
    /// A reference type, as the internal class name (`java/lang/String`) or, for arrays, the
    /// array descriptor (`[I`, `[Ljava/lang/String;`).
    Reference(&'a [u8]),
}

impl FieldType<'_> {
    /// Number of local/stack slots (0 for void).
    pub fn slots(self) -> u16 {
        match self {
            FieldType::Void => 0,
            FieldType::Long | FieldType::Double => 2,
            _ => 1,
        }
    }

    /// The descriptor character for primitives (`I`, `J`, …); `None` for references and void.
    pub fn primitive_char(self) -> Option<u8> {
        Some(match self {
            FieldType::Byte => b'B',
            FieldType::Char => b'C',
            FieldType::Double => b'D',
            FieldType::Float => b'F',
            FieldType::Int => b'I',
            FieldType::Long => b'J',
            FieldType::Short => b'S',
            FieldType::Boolean => b'Z',
            _ => return None,
        })
    }
}

fn bad(d: &[u8]) -> Error {
    Error::BadDescriptor(String::from_utf8_lossy(d).into_owned())
}

/// Parses one field type starting at `*pos`, advancing it.
pub fn parse_field_type<'a>(d: &'a [u8], pos: &mut usize) -> Result<FieldType<'a>> {
    let start = *pos;
    let c = *d.get(start).ok_or_else(|| bad(d))?;
    *pos += 1;
    Ok(match c {
        b'B' => FieldType::Byte,
        b'C' => FieldType::Char,
        b'D' => FieldType::Double,
        b'F' => FieldType::Float,
        b'I' => FieldType::Int,
        b'J' => FieldType::Long,
        b'S' => FieldType::Short,
        b'Z' => FieldType::Boolean,
        b'V' => FieldType::Void,
        b'L' => {
            let end = d[start..]
                .iter()
                .position(|&b| b == b';')
                .ok_or_else(|| bad(d))?
                + start;
            *pos = end + 1;
            if end == start + 1 {
                return Err(bad(d));
            }
            FieldType::Reference(&d[start + 1..end])
        }
        b'[' => {
            let mut p = *pos;
            while d.get(p) == Some(&b'[') {
                p += 1;
            }
            if p - start > 255 {
                return Err(bad(d));
            }
            match parse_field_type(d, &mut p)? {
                FieldType::Void => return Err(bad(d)),
                _ => {
                    *pos = p;
                    FieldType::Reference(&d[start..p])
                }
            }
        }
        _ => return Err(bad(d)),
    })
}

/// Parses a field descriptor.
pub fn parse_field_descriptor(d: &[u8]) -> Result<FieldType<'_>> {
    let mut pos = 0;
    let t = parse_field_type(d, &mut pos)?;
    if pos != d.len() || t == FieldType::Void {
        return Err(bad(d));
    }
    Ok(t)
}

/// A parsed method descriptor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MethodDescriptor<'a> {
    /// Parameter types.
    pub params: Vec<FieldType<'a>>,
    /// Return type (`Void` for `V`).
    pub ret: FieldType<'a>,
}

impl MethodDescriptor<'_> {
    /// Slots taken by the parameters (without `this`).
    pub fn param_slots(&self) -> u16 {
        self.params.iter().map(|p| p.slots()).sum()
    }
}

/// Parses a method descriptor `(…)R`.
pub fn parse_method_descriptor(d: &[u8]) -> Result<MethodDescriptor<'_>> {
    if d.first() != Some(&b'(') {
        return Err(bad(d));
    }
    let mut pos = 1;
    let mut params = Vec::new();
    while d.get(pos) != Some(&b')') {
        match parse_field_type(d, &mut pos)? {
            FieldType::Void => return Err(bad(d)),
            t => params.push(t),
        }
    }
    pos += 1;
    let ret = parse_field_type(d, &mut pos)?;
    if pos != d.len() {
        return Err(bad(d));
    }
    Ok(MethodDescriptor { params, ret })
}

/// The return type of a method descriptor (without collecting the parameters).
pub fn return_type(d: &[u8]) -> Result<FieldType<'_>> {
    let close = d.iter().position(|&b| b == b')').ok_or_else(|| bad(d))?;
    let mut pos = close + 1;
    let t = parse_field_type(d, &mut pos)?;
    if pos != d.len() {
        return Err(bad(d));
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_names_read_as_java_writes_them() {
        let cases = [
            ("Ljava/lang/String;", "java.lang.String"),
            ("java/lang/String", "java.lang.String"),
            ("java.lang.String", "java.lang.String"),
            ("[I", "int[]"),
            ("[[J", "long[][]"),
            ("V", "void"),
            ("[Ljava/lang/String;", "java.lang.String[]"),
            ("[Ljava.lang.String;", "java.lang.String[]"),
            ("[[Ljava/util/Map$Entry;", "java.util.Map$Entry[][]"),
            (
                "Ljava/lang/invoke/LambdaForm$MH+0x0000000800c01000;",
                "java.lang.invoke.LambdaForm$MH+0x0000000800c01000",
            ),
            ("", ""),
            ("[", "["),
        ];
        for (name, expected) in cases {
            assert_eq!(java_name(name), expected, "{name}");
        }
    }
}
