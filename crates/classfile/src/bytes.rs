//! Bounds-checked big-endian reading and writing helpers.

use crate::error::{Error, Result};

/// A cursor over big-endian input that never reads out of bounds.
#[derive(Clone, Debug)]
pub(crate) struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(data: &'a [u8]) -> Self {
        Reader { data, pos: 0 }
    }

    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    /// Already-read bytes `start..start+len`.
    pub(crate) fn slice_at(&self, start: usize, len: usize) -> Result<&'a [u8]> {
        self.data
            .get(start..start.saturating_add(len))
            .ok_or(Error::Truncated {
                what: "slice",
                offset: start,
            })
    }

    pub(crate) fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    pub(crate) fn bytes(&mut self, n: usize, what: &'static str) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.data.len());
        match end {
            Some(end) => {
                let s = &self.data[self.pos..end];
                self.pos = end;
                Ok(s)
            }
            None => Err(Error::Truncated {
                what,
                offset: self.pos,
            }),
        }
    }

    pub(crate) fn u1(&mut self, what: &'static str) -> Result<u8> {
        Ok(self.bytes(1, what)?[0])
    }

    pub(crate) fn u2(&mut self, what: &'static str) -> Result<u16> {
        let b = self.bytes(2, what)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    pub(crate) fn u4(&mut self, what: &'static str) -> Result<u32> {
        let b = self.bytes(4, what)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
}

/// Appends big-endian values.
pub(crate) trait WriteBe {
    fn u1(&mut self, v: u8);
    fn u2(&mut self, v: u16);
    fn u4(&mut self, v: u32);
}

impl WriteBe for Vec<u8> {
    fn u1(&mut self, v: u8) {
        self.push(v);
    }
    fn u2(&mut self, v: u16) {
        self.extend_from_slice(&v.to_be_bytes());
    }
    fn u4(&mut self, v: u32) {
        self.extend_from_slice(&v.to_be_bytes());
    }
}
