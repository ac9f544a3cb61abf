//! Reading class files out of a JDK's runtime image (`<java.home>/lib/modules`, the jimage
//! format of `jdk.internal.jimage`): a header, a table of location offsets, the locations
//! (each a module, parent, base and extension string and the resource's offset and sizes)
//! and a string table, then the resources: stored as they are, or compressed by jlink's
//! `zip` plugin (a small header, then a zlib stream), as trimmed runtimes ship them.

use std::collections::HashMap;
use std::fs;
use std::path::Path;

use std::io::Read;

use anyhow::{bail, Context};
use flate2::read::ZlibDecoder;

const MAGIC: u32 = 0xCAFE_DADA;
const HEADER_SIZE: usize = 7 * 4;
/// A compressed resource's header: magic, compressed and uncompressed sizes (u8 each), the
/// decompressor's name (a string offset), a content offset and an is-terminal byte.
const COMPRESSED_MAGIC: u32 = 0xCAFE_FAFA;
const COMPRESSED_HEADER_SIZE: usize = 4 + 8 + 8 + 4 + 4 + 1;

/// Where one resource lies in the image.
#[derive(Debug, Clone, Copy)]
struct Location {
    module: u32,
    offset: u64,
    compressed: u64,
    uncompressed: u64,
}

/// A loaded runtime image, indexed by `parent/base` (`java/lang/String`) for classes.
pub struct RuntimeImage {
    bytes: Vec<u8>,
    big_endian: bool,
    strings_start: usize,
    resources_start: usize,
    classes: HashMap<String, Location>,
}

impl RuntimeImage {
    /// Reads and indexes the image at `path`.
    pub fn open(path: &Path) -> anyhow::Result<RuntimeImage> {
        let bytes = fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        let big_endian = match bytes.get(..4) {
            Some(m) if u32::from_le_bytes(m.try_into()?) == MAGIC => false,
            Some(m) if u32::from_be_bytes(m.try_into()?) == MAGIC => true,
            _ => bail!("{} is not a jimage", path.display()),
        };
        let mut image = RuntimeImage {
            bytes,
            big_endian,
            strings_start: 0,
            resources_start: 0,
            classes: HashMap::new(),
        };
        image.index().context("a damaged jimage")?;
        Ok(image)
    }

    fn u32_at(&self, at: usize) -> Option<u32> {
        self.u32_in(&self.bytes, at)
    }

    fn u32_in(&self, bytes: &[u8], at: usize) -> Option<u32> {
        let raw: [u8; 4] = bytes.get(at..at + 4)?.try_into().ok()?;
        Some(if self.big_endian {
            u32::from_be_bytes(raw)
        } else {
            u32::from_le_bytes(raw)
        })
    }

    fn u64_in(&self, bytes: &[u8], at: usize) -> Option<u64> {
        let raw: [u8; 8] = bytes.get(at..at + 8)?.try_into().ok()?;
        Some(if self.big_endian {
            u64::from_be_bytes(raw)
        } else {
            u64::from_le_bytes(raw)
        })
    }

    fn index(&mut self) -> Option<()> {
        let table_length = self.u32_at(16)? as usize;
        let locations_size = self.u32_at(20)? as usize;
        let strings_size = self.u32_at(24)? as usize;
        let offsets_start = HEADER_SIZE + table_length * 4;
        let locations_start = offsets_start + table_length * 4;
        self.strings_start = locations_start + locations_size;
        self.resources_start = self.strings_start + strings_size;
        for slot in 0..table_length {
            let at = locations_start + self.u32_at(offsets_start + slot * 4)? as usize;
            let attributes = self.attributes(at)?;
            if self.string(attributes[4] as u32) != Some("class") {
                continue;
            }
            let parent = self.string(attributes[2] as u32)?;
            let base = self.string(attributes[3] as u32)?;
            let key = if parent.is_empty() {
                base.to_string()
            } else {
                format!("{parent}/{base}")
            };
            let location = Location {
                module: attributes[1] as u32,
                offset: attributes[5],
                compressed: attributes[6],
                uncompressed: attributes[7],
            };
            self.classes.insert(key, location);
        }
        Some(())
    }

    /// A location's attributes by kind (END, MODULE, PARENT, BASE, EXTENSION, OFFSET,
    /// COMPRESSED, UNCOMPRESSED): each a byte `kind << 3 | (length - 1)` and `length`
    /// big-endian bytes of value.
    fn attributes(&self, mut at: usize) -> Option<[u64; 8]> {
        let mut values = [0u64; 8];
        loop {
            let byte = *self.bytes.get(at)?;
            let kind = (byte >> 3) as usize;
            if kind == 0 {
                return Some(values);
            }
            let length = (byte & 7) as usize + 1;
            let value = self
                .bytes
                .get(at + 1..at + 1 + length)?
                .iter()
                .fold(0u64, |v, &b| v << 8 | u64::from(b));
            if let Some(slot) = values.get_mut(kind) {
                *slot = value;
            }
            at += 1 + length;
        }
    }

    fn string(&self, offset: u32) -> Option<&str> {
        let start = self.strings_start + offset as usize;
        let tail = self.bytes.get(start..)?;
        let end = tail.iter().position(|&b| b == 0)?;
        std::str::from_utf8(&tail[..end]).ok()
    }

    /// The module and class-file bytes of `internal_name` (`java/lang/String`), if the
    /// image holds it (uncompressed, or compressed with the `zip` plugin).
    pub fn class(&self, internal_name: &str) -> Option<(String, Vec<u8>)> {
        let location = self.classes.get(internal_name)?;
        let module = self.string(location.module)?.to_string();
        let start = self.resources_start + location.offset as usize;
        let stored = if location.compressed != 0 {
            location.compressed
        } else {
            location.uncompressed
        };
        let mut bytes = self.bytes.get(start..start + stored as usize)?.to_vec();
        while self.u32_in(&bytes, 0) == Some(COMPRESSED_MAGIC) {
            bytes = self.decompress(&bytes)?;
        }
        Some((module, bytes))
    }

    /// One layer of compression (jlink may stack several); only `zip` is known.
    fn decompress(&self, resource: &[u8]) -> Option<Vec<u8>> {
        let compressed = self.u64_in(resource, 4)? as usize;
        let uncompressed = self.u64_in(resource, 12)? as usize;
        if self.string(self.u32_in(resource, 20)?)? != "zip" {
            return None;
        }
        let body = resource.get(COMPRESSED_HEADER_SIZE..COMPRESSED_HEADER_SIZE + compressed)?;
        let mut out = Vec::with_capacity(uncompressed);
        ZlibDecoder::new(body).read_to_end(&mut out).ok()?;
        Some(out)
    }
}
