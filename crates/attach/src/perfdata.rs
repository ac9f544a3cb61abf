//! Reader for HotSpot's PerfData memory (`/tmp/hsperfdata_<user>/<pid>`), the file `jps` and
//! `jstat` read. Hand-written: no crate parses it, and the format is a 32-byte prologue plus a
//! flat table of named entries.
//!
//! Layout (HotSpot `perfMemory.hpp`): prologue = magic `CA FE C0 C0`, byte order (0 big,
//! 1 little), major, minor, accessible, used:i32, overflow:i32, mod_time:i64,
//! entry_offset:i32, num_entries:i32. Entry = length:i32, name_offset:i32,
//! vector_length:i32, type:u8, flags:u8, units:u8, variability:u8, data_offset:i32;
//! offsets are relative to the entry. Scalars of type `J` are longs; vectors of type `B`
//! are NUL-terminated strings.

use std::collections::BTreeMap;

const MAGIC: [u8; 4] = [0xCA, 0xFE, 0xC0, 0xC0];
const PROLOGUE_LEN: usize = 32;
const ENTRY_HEADER_LEN: usize = 20;

/// One PerfData value.
#[derive(Debug, Clone, PartialEq)]
pub enum PerfValue {
    /// A scalar of type `J` (a 64-bit long), in the counter's own unit (ticks, bytes, events).
    Long(i64),
    /// A byte vector of type `B`, read up to its first NUL (invalid UTF-8 replaced).
    Text(String),
}

/// All named counters of one JVM's PerfData file.
#[derive(Debug, Clone, Default)]
pub struct PerfData {
    entries: BTreeMap<String, PerfValue>,
}

/// Why a PerfData buffer could not be read.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum PerfDataError {
    /// The buffer does not start with the magic `CA FE C0 C0`.
    #[error("not a PerfData file (bad magic)")]
    BadMagic,
    /// The buffer is shorter than the prologue, or the prologue's entry table fields are cut.
    #[error("truncated PerfData file")]
    Truncated,
}

impl PerfData {
    /// Parses a PerfData buffer. Entries that point outside the buffer end the table.
    pub fn parse(buf: &[u8]) -> Result<PerfData, PerfDataError> {
        if buf.len() < PROLOGUE_LEN {
            return Err(PerfDataError::Truncated);
        }
        if buf[0..4] != MAGIC {
            return Err(PerfDataError::BadMagic);
        }
        let little = buf[4] == 1;
        let rd = Reader { buf, little };
        let entry_offset = rd.i32_at(24).ok_or(PerfDataError::Truncated)? as usize;
        let num_entries = rd.i32_at(28).ok_or(PerfDataError::Truncated)?.max(0) as usize;

        let mut entries = BTreeMap::new();
        let mut at = entry_offset;
        for _ in 0..num_entries {
            let Some(entry) = rd.entry_at(at) else { break };
            if entry.length == 0 {
                break;
            }
            if let Some((name, value)) = entry.value {
                entries.insert(name, value);
            }
            at += entry.length;
        }
        Ok(PerfData { entries })
    }

    /// A counter's value by its full name, e.g. `sun.rt.javaCommand`.
    pub fn get(&self, name: &str) -> Option<&PerfValue> {
        self.entries.get(name)
    }

    /// A text counter.
    pub fn text(&self, name: &str) -> Option<&str> {
        match self.get(name)? {
            PerfValue::Text(s) => Some(s),
            PerfValue::Long(_) => None,
        }
    }

    /// A numeric counter.
    pub fn long(&self, name: &str) -> Option<i64> {
        match self.get(name)? {
            PerfValue::Long(v) => Some(*v),
            PerfValue::Text(_) => None,
        }
    }

    /// Sum of every long counter whose name is `prefix` + `middle` + `suffix`, where the
    /// middle has exactly `dots` dots (e.g. `sun.gc.generation.` `0.space.1` `.used` has 2),
    /// or None if none matches.
    pub fn sum_matching(&self, prefix: &str, dots: usize, suffix: &str) -> Option<i64> {
        let values: Vec<i64> = self
            .entries
            .range(prefix.to_string()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .filter(|(k, _)| {
                k.len() >= prefix.len() + suffix.len()
                    && k.ends_with(suffix)
                    && k[prefix.len()..k.len() - suffix.len()].matches('.').count() == dots
            })
            .filter_map(|(_, v)| {
                if let PerfValue::Long(v) = v {
                    Some(*v)
                } else {
                    None
                }
            })
            .collect();
        (!values.is_empty()).then(|| values.iter().sum())
    }

    /// The heap's maximum size: the generations' maxima added up, except under G1 (policy
    /// `GarbageFirst`), whose young and old generations may each grow to the whole heap.
    pub fn heap_max(&self) -> Option<i64> {
        if self.text("sun.gc.policy.name") != Some("GarbageFirst") {
            return self.sum_matching("sun.gc.generation.", 0, ".maxCapacity");
        }
        [
            "sun.gc.generation.0.maxCapacity",
            "sun.gc.generation.1.maxCapacity",
        ]
        .iter()
        .filter_map(|name| self.long(name))
        .max()
    }

    /// Number of entries read.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True if no entry was read.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Iterates over all counters in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &PerfValue)> {
        self.entries.iter()
    }
}

struct Reader<'a> {
    buf: &'a [u8],
    little: bool,
}

struct Entry {
    length: usize,
    value: Option<(String, PerfValue)>,
}

impl Reader<'_> {
    fn i32_at(&self, at: usize) -> Option<i32> {
        let bytes: [u8; 4] = self.buf.get(at..at + 4)?.try_into().ok()?;
        Some(if self.little {
            i32::from_le_bytes(bytes)
        } else {
            i32::from_be_bytes(bytes)
        })
    }

    fn i64_at(&self, at: usize) -> Option<i64> {
        let bytes: [u8; 8] = self.buf.get(at..at + 8)?.try_into().ok()?;
        Some(if self.little {
            i64::from_le_bytes(bytes)
        } else {
            i64::from_be_bytes(bytes)
        })
    }

    fn c_string_at(&self, at: usize, max_len: usize) -> Option<String> {
        let end = self.buf.len().min(at.checked_add(max_len)?);
        let bytes = self.buf.get(at..end)?;
        let len = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
        Some(String::from_utf8_lossy(&bytes[..len]).into_owned())
    }

    fn entry_at(&self, at: usize) -> Option<Entry> {
        let length = usize::try_from(self.i32_at(at)?).ok()?;
        if length < ENTRY_HEADER_LEN || at.checked_add(length)? > self.buf.len() {
            return None;
        }
        let name_offset = usize::try_from(self.i32_at(at + 4)?).ok()?;
        let vector_length = usize::try_from(self.i32_at(at + 8)?).ok()?;
        let data_type = self.buf[at + 12];
        let data_offset = usize::try_from(self.i32_at(at + 16)?).ok()?;
        let name = self.c_string_at(at + name_offset, length.saturating_sub(name_offset))?;
        let data_at = at + data_offset;
        let value = match (data_type, vector_length) {
            (b'J', 0) => self.i64_at(data_at).map(PerfValue::Long),
            (b'B', n) if n > 0 => self.c_string_at(data_at, n).map(PerfValue::Text),
            _ => None,
        };
        Some(Entry {
            length,
            value: value.map(|v| (name, v)),
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Builds a little-endian PerfData buffer holding the given entries.
    pub(crate) fn build(entries: &[(&str, PerfValue)]) -> Vec<u8> {
        let mut body = Vec::new();
        for (name, value) in entries {
            let name_offset = ENTRY_HEADER_LEN;
            let name_bytes = [name.as_bytes(), &[0]].concat();
            let data_offset = (name_offset + name_bytes.len()).next_multiple_of(8);
            let (ty, vlen, data) = match value {
                PerfValue::Long(v) => (b'J', 0, v.to_le_bytes().to_vec()),
                PerfValue::Text(s) => {
                    let mut d = s.as_bytes().to_vec();
                    d.resize(s.len() + 8, 0);
                    (b'B', d.len(), d)
                }
            };
            let length = (data_offset + data.len()).next_multiple_of(8);
            let mut e = vec![0u8; length];
            e[0..4].copy_from_slice(&(length as i32).to_le_bytes());
            e[4..8].copy_from_slice(&(name_offset as i32).to_le_bytes());
            e[8..12].copy_from_slice(&(vlen as i32).to_le_bytes());
            e[12] = ty;
            e[16..20].copy_from_slice(&(data_offset as i32).to_le_bytes());
            e[name_offset..name_offset + name_bytes.len()].copy_from_slice(&name_bytes);
            e[data_offset..data_offset + data.len()].copy_from_slice(&data);
            body.extend(e);
        }
        let mut buf = vec![0u8; PROLOGUE_LEN];
        buf[0..4].copy_from_slice(&MAGIC);
        buf[4] = 1;
        buf[5] = 2;
        buf[7] = 1;
        buf[24..28].copy_from_slice(&(PROLOGUE_LEN as i32).to_le_bytes());
        buf[28..32].copy_from_slice(&(entries.len() as i32).to_le_bytes());
        buf.extend(body);
        buf
    }

    #[test]
    fn parses_longs_and_strings() {
        let buf = build(&[
            (
                "sun.rt.javaCommand",
                PerfValue::Text("com.example.Main --port 8080".into()),
            ),
            ("sun.gc.generation.0.space.0.used", PerfValue::Long(100)),
            ("sun.gc.generation.1.space.0.used", PerfValue::Long(23)),
            ("sun.gc.generation.1.capacity", PerfValue::Long(1000)),
            (
                "sun.gc.generation.1.space.0.capacity",
                PerfValue::Long(1000),
            ),
        ]);
        let pd = PerfData::parse(&buf).unwrap();
        assert_eq!(
            pd.text("sun.rt.javaCommand"),
            Some("com.example.Main --port 8080")
        );
        assert_eq!(pd.sum_matching("sun.gc.generation.", 2, ".used"), Some(123));
        assert_eq!(pd.sum_matching("sun.gc.generation.", 0, ".used"), None);
        assert_eq!(pd.sum_matching("sun.gc.nothing.", 2, ".used"), None);
        assert_eq!(
            pd.sum_matching("sun.gc.generation.", 0, ".capacity"),
            Some(1000)
        );
    }

    #[test]
    fn rejects_garbage_without_panicking() {
        assert_eq!(
            PerfData::parse(b"nope").unwrap_err(),
            PerfDataError::Truncated
        );
        assert_eq!(
            PerfData::parse(&[0u8; 64]).unwrap_err(),
            PerfDataError::BadMagic
        );
        let mut buf = build(&[("a", PerfValue::Long(1))]);
        buf.truncate(40);
        assert!(PerfData::parse(&buf).unwrap().is_empty());
        // Every truncation and every single-byte corruption must parse or fail cleanly.
        let full = build(&[
            ("x.y", PerfValue::Text("abc".into())),
            ("z", PerfValue::Long(7)),
        ]);
        for cut in 0..full.len() {
            let _ = PerfData::parse(&full[..cut]);
        }
        for i in 0..full.len() {
            let mut b = full.clone();
            b[i] ^= 0xff;
            let _ = PerfData::parse(&b);
        }
    }
}
