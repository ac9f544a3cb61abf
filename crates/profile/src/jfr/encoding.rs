//! JFR's primitive encodings, as the JDK's reader (`jdk.jfr.internal.consumer.RecordingInput`)
//! reads them in a chunk with compressed integers: LEB128-style varints of at most 9 bytes
//! (the ninth holds 8 bits), strings as an encoding byte and a body, big-endian fixed-size
//! fields in the chunk header only.
//!
//! Hand-written: no maintained crate writes or reads JFR.

/// String encodings (the byte before a string's body).
pub mod string {
    /// `null`.
    pub const NULL: u8 = 0;
    /// `""`.
    pub const EMPTY: u8 = 1;
    /// A reference into the string constant pool.
    pub const CONSTANT: u8 = 2;
    /// UTF-8 bytes, their count first.
    pub const UTF8: u8 = 3;
    /// UTF-16 code units as varints, their count first.
    pub const CHARS: u8 = 4;
    /// Latin-1 bytes, their count first.
    pub const LATIN1: u8 = 5;
}

/// Appends JFR-encoded values to a byte vector.
#[derive(Debug, Default, Clone)]
pub struct Out {
    /// What was written.
    pub bytes: Vec<u8>,
}

impl Out {
    /// A varint: 7 bits a byte, low bits first, the high bit saying "more"; the ninth byte
    /// carries 8 bits.
    pub fn varint(&mut self, mut value: u64) {
        for _ in 0..8 {
            if value < 0x80 {
                self.bytes.push(value as u8);
                return;
            }
            self.bytes.push((value as u8 & 0x7f) | 0x80);
            value >>= 7;
        }
        self.bytes.push(value as u8);
    }

    /// A signed value as JFR writes `long`s and `int`s: its two's-complement bits as a varint.
    pub fn long(&mut self, value: i64) {
        self.varint(value as u64);
    }

    /// An `int`, as the JDK writes it: the varint of its 32 bits (-1 is 0xffffffff, five
    /// bytes; readers that take `int`s as 32 bits read no more).
    pub fn int(&mut self, value: i32) {
        self.varint(u64::from(value as u32));
    }

    /// A boolean: one byte.
    pub fn boolean(&mut self, value: bool) {
        self.bytes.push(u8::from(value));
    }

    /// A string, UTF-8 encoded (empty as [`string::EMPTY`]).
    pub fn string(&mut self, value: &str) {
        if value.is_empty() {
            self.bytes.push(string::EMPTY);
            return;
        }
        self.bytes.push(string::UTF8);
        self.varint(value.len() as u64);
        self.bytes.extend_from_slice(value.as_bytes());
    }

    /// A string as UTF-8 bytes even when empty, as the JDK writes its symbols (readers such
    /// as async-profiler's take no other encoding there).
    pub fn utf8(&mut self, value: &str) {
        self.bytes.push(string::UTF8);
        self.varint(value.len() as u64);
        self.bytes.extend_from_slice(value.as_bytes());
    }

    /// Big-endian fixed-size fields (the chunk header).
    pub fn fixed_u16(&mut self, value: u16) {
        self.bytes.extend_from_slice(&value.to_be_bytes());
    }

    /// See [`Out::fixed_u16`].
    pub fn fixed_u64(&mut self, value: u64) {
        self.bytes.extend_from_slice(&value.to_be_bytes());
    }

    /// Appends `body` as one record (event, metadata, checkpoint): its total size first, as
    /// a varint, which counts its own bytes.
    pub fn record(&mut self, body: &[u8]) {
        let mut width = 1;
        while body.len() + width >= 1 << (7 * width) {
            width += 1;
        }
        self.varint((body.len() + width) as u64);
        self.bytes.extend_from_slice(body);
    }
}

/// Reads JFR-encoded values from a byte slice; every read checks the bounds.
#[derive(Debug, Clone)]
pub struct In<'a> {
    bytes: &'a [u8],
    /// Where the next read starts.
    pub at: usize,
}

/// A read past the end of the data, or a malformed value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed(pub String);

impl<'a> In<'a> {
    /// A reader at `at`.
    pub fn new(bytes: &'a [u8], at: usize) -> In<'a> {
        In { bytes, at }
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], Malformed> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&end| end <= self.bytes.len())
            .ok_or_else(|| Malformed(format!("truncated at byte {}", self.at)))?;
        let taken = &self.bytes[self.at..end];
        self.at = end;
        Ok(taken)
    }

    /// One byte.
    pub fn byte(&mut self) -> Result<u8, Malformed> {
        Ok(self.take(1)?[0])
    }

    /// A varint (see [`Out::varint`]).
    pub fn varint(&mut self) -> Result<u64, Malformed> {
        let mut value = 0u64;
        for i in 0..8 {
            let byte = self.byte()?;
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte < 0x80 {
                return Ok(value);
            }
        }
        Ok(value | u64::from(self.byte()?) << 56)
    }

    /// A `long` (see [`Out::long`]).
    pub fn long(&mut self) -> Result<i64, Malformed> {
        Ok(self.varint()? as i64)
    }

    /// A number of a chunk's records: a varint where its ints are compressed, else 8 bytes.
    pub fn number(&mut self, compressed: bool) -> Result<i64, Malformed> {
        match compressed {
            true => self.long(),
            false => Ok(self.fixed_u64()? as i64),
        }
    }

    /// Bytes left to read.
    pub fn left(&self) -> usize {
        self.bytes.len().saturating_sub(self.at)
    }

    /// A count or size that must fit in what is left of the data (a guard against lengths
    /// that would make a reader allocate without bound).
    pub fn count(&mut self) -> Result<usize, Malformed> {
        let value = self.varint()?;
        usize::try_from(value)
            .ok()
            .filter(|&n| n <= self.bytes.len() - self.at.min(self.bytes.len()))
            .ok_or_else(|| Malformed(format!("count {value} past the end at byte {}", self.at)))
    }

    /// A big-endian u16 (chunk header).
    pub fn fixed_u16(&mut self) -> Result<u16, Malformed> {
        Ok(u16::from_be_bytes(
            self.take(2)?.try_into().expect("2 bytes"),
        ))
    }

    /// A big-endian u32 (chunk header).
    pub fn fixed_u32(&mut self) -> Result<u32, Malformed> {
        Ok(u32::from_be_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }

    /// A big-endian u64 (chunk header).
    pub fn fixed_u64(&mut self) -> Result<u64, Malformed> {
        Ok(u64::from_be_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_at_every_length() {
        let values = [
            0,
            1,
            127,
            128,
            300,
            1 << 21,
            (1 << 28) - 1,
            1 << 35,
            1 << 56,
            u64::MAX,
            -1i64 as u64,
        ];
        let mut out = Out::default();
        for v in values {
            out.varint(v);
        }
        assert_eq!(&out.bytes[..4], &[0, 1, 0x7f, 0x80]);
        let mut input = In::new(&out.bytes, 0);
        for v in values {
            assert_eq!(input.varint(), Ok(v));
        }
        assert_eq!(input.at, out.bytes.len());
        assert!(input.varint().is_err());
        let mut max = Out::default();
        max.varint(u64::MAX);
        assert_eq!(max.bytes.len(), 9);
    }

    #[test]
    fn records_carry_their_size_with_its_own_bytes() {
        for len in [3, 125, 126, 127, 128, 16_380, 16_381, 16_382, 20_000] {
            let mut out = Out::default();
            out.record(&vec![7; len]);
            let mut input = In::new(&out.bytes, 0);
            assert_eq!(input.varint(), Ok(out.bytes.len() as u64), "body of {len}");
        }
    }
}
