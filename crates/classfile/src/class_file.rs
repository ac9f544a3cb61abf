//! The class-file model: parse and write back.
//!
//! Everything except the constant pool and the Code attributes being edited stays as the
//! original bytes, so writing an unedited class reproduces its input byte for byte.

use crate::bytes::{Reader, WriteBe};
use crate::constant_pool::ConstantPool;
use crate::error::{Error, Result};

/// Oldest supported major version (JDK 1.0.2).
pub const MIN_MAJOR: u16 = 45;
/// Newest supported major version (Java 25).
pub const MAX_MAJOR: u16 = 69;

/// An attribute whose body is kept as raw bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attribute {
    /// Utf8 index of the attribute name.
    pub name_index: u16,
    /// The attribute body (without name and length).
    pub info: Vec<u8>,
}

/// A field or a method.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// Access flags.
    pub access_flags: u16,
    /// Utf8 index of the name.
    pub name_index: u16,
    /// Utf8 index of the descriptor.
    pub descriptor_index: u16,
    /// Attributes, in file order.
    pub attributes: Vec<Attribute>,
}

/// A parsed class file.
#[derive(Clone, Debug)]
pub struct ClassFile {
    /// Minor version.
    pub minor_version: u16,
    /// Major version (45..=69).
    pub major_version: u16,
    /// The constant pool.
    pub constant_pool: ConstantPool,
    /// Class access flags.
    pub access_flags: u16,
    /// Class entry of this class.
    pub this_class: u16,
    /// Class entry of the superclass (0 for java/lang/Object and module-info).
    pub super_class: u16,
    /// Class entries of the direct superinterfaces.
    pub interfaces: Vec<u16>,
    /// Fields.
    pub fields: Vec<Member>,
    /// Methods.
    pub methods: Vec<Member>,
    /// Class attributes.
    pub attributes: Vec<Attribute>,
}

/// `ACC_STATIC`.
pub const ACC_STATIC: u16 = 0x0008;
/// `ACC_INTERFACE`.
pub const ACC_INTERFACE: u16 = 0x0200;
/// `ACC_MODULE`.
pub const ACC_MODULE: u16 = 0x8000;

fn parse_attributes(r: &mut Reader<'_>) -> Result<Vec<Attribute>> {
    let n = r.u2("attributes_count")?;
    let mut v = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let name_index = r.u2("attribute name")?;
        let len = r.u4("attribute length")? as usize;
        v.push(Attribute {
            name_index,
            info: r.bytes(len, "attribute body")?.to_vec(),
        });
    }
    Ok(v)
}

fn parse_members(r: &mut Reader<'_>) -> Result<Vec<Member>> {
    let n = r.u2("member count")?;
    let mut v = Vec::with_capacity(n as usize);
    for _ in 0..n {
        v.push(Member {
            access_flags: r.u2("member flags")?,
            name_index: r.u2("member name")?,
            descriptor_index: r.u2("member descriptor")?,
            attributes: parse_attributes(r)?,
        });
    }
    Ok(v)
}

fn write_attributes(out: &mut Vec<u8>, attrs: &[Attribute]) {
    out.u2(attrs.len() as u16);
    for a in attrs {
        out.u2(a.name_index);
        out.u4(a.info.len() as u32);
        out.extend_from_slice(&a.info);
    }
}

fn write_members(out: &mut Vec<u8>, members: &[Member]) {
    out.u2(members.len() as u16);
    for m in members {
        out.u2(m.access_flags);
        out.u2(m.name_index);
        out.u2(m.descriptor_index);
        write_attributes(out, &m.attributes);
    }
}

impl ClassFile {
    /// Parses a class file. Only the structure is checked; attribute bodies are read lazily.
    pub fn parse(data: &[u8]) -> Result<Self> {
        let mut r = Reader::new(data);
        let magic = r.u4("magic")?;
        if magic != 0xCAFE_BABE {
            return Err(Error::BadMagic(magic));
        }
        let minor_version = r.u2("minor_version")?;
        let major_version = r.u2("major_version")?;
        if !(MIN_MAJOR..=MAX_MAJOR).contains(&major_version) {
            return Err(Error::UnsupportedVersion {
                major: major_version,
                minor: minor_version,
            });
        }
        let constant_pool = ConstantPool::parse(&mut r)?;
        let access_flags = r.u2("access_flags")?;
        let this_class = r.u2("this_class")?;
        let super_class = r.u2("super_class")?;
        let n = r.u2("interfaces_count")?;
        let mut interfaces = Vec::with_capacity(n as usize);
        for _ in 0..n {
            interfaces.push(r.u2("interface")?);
        }
        let fields = parse_members(&mut r)?;
        let methods = parse_members(&mut r)?;
        let attributes = parse_attributes(&mut r)?;
        if r.remaining() != 0 {
            return Err(Error::TrailingBytes(r.remaining()));
        }
        Ok(ClassFile {
            minor_version,
            major_version,
            constant_pool,
            access_flags,
            this_class,
            super_class,
            interfaces,
            fields,
            methods,
            attributes,
        })
    }

    /// Serializes the class file.
    pub fn write(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(4096);
        out.u4(0xCAFE_BABE);
        out.u2(self.minor_version);
        out.u2(self.major_version);
        self.constant_pool.write(&mut out);
        out.u2(self.access_flags);
        out.u2(self.this_class);
        out.u2(self.super_class);
        out.u2(self.interfaces.len() as u16);
        for &i in &self.interfaces {
            out.u2(i);
        }
        write_members(&mut out, &self.fields);
        write_members(&mut out, &self.methods);
        write_attributes(&mut out, &self.attributes);
        out
    }

    /// Internal name of this class.
    pub fn name(&self) -> Result<&[u8]> {
        self.constant_pool.class_name(self.this_class)
    }

    /// Whether `attr` is named `name`.
    pub fn attribute_is(&self, attr: &Attribute, name: &[u8]) -> bool {
        self.constant_pool
            .utf8(attr.name_index)
            .is_ok_and(|n| n == name)
    }
}
