//! The error type of this crate.

/// Everything that can go wrong reading, editing or writing a class file.
///
/// Malformed input always ends up here; the crate never panics on input data.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum Error {
    /// The input ended before a structure was complete.
    #[error("truncated input: {what} at offset {offset}")]
    Truncated {
        /// What was being read.
        what: &'static str,
        /// Byte offset where the read started.
        offset: usize,
    },
    /// The file does not start with 0xCAFEBABE.
    #[error("not a class file (magic {0:#010x})")]
    BadMagic(u32),
    /// Class file version outside 45..=69.
    #[error("unsupported class file version {major}.{minor}")]
    UnsupportedVersion {
        /// Major version.
        major: u16,
        /// Minor version.
        minor: u16,
    },
    /// Unknown constant pool tag.
    #[error("bad constant pool tag {tag} at index {index}")]
    BadConstantTag {
        /// The tag byte.
        tag: u8,
        /// Constant pool index.
        index: u16,
    },
    /// A constant pool index that is out of range or of the wrong kind.
    #[error("constant pool index {index} is not a valid {expected}")]
    BadConstant {
        /// The index.
        index: u16,
        /// The kind of entry that was expected there.
        expected: &'static str,
    },
    /// The constant pool would exceed 65535 entries.
    #[error("constant pool is full")]
    ConstantPoolFull,
    /// Bytes left after the last attribute.
    #[error("{0} trailing bytes after the class file")]
    TrailingBytes(usize),
    /// A malformed attribute.
    #[error("malformed {0} attribute")]
    BadAttribute(&'static str),
    /// Malformed bytecode.
    #[error("bad bytecode at offset {offset}: {reason}")]
    BadCode {
        /// Bytecode offset.
        offset: u32,
        /// What is wrong.
        reason: &'static str,
    },
    /// A malformed field or method descriptor.
    #[error("malformed descriptor {0:?}")]
    BadDescriptor(String),
    /// A StackMapTable that does not match the code.
    #[error("bad StackMapTable: {0}")]
    BadStackMap(&'static str),
    /// The rewritten method would exceed a JVM limit.
    #[error("method too large after rewriting: {0}")]
    TooLarge(&'static str),
    /// Valid input this crate refuses to rewrite.
    #[error("unsupported: {0}")]
    Unsupported(&'static str),
}

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
