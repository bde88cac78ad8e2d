//! What the lab's two binary artifact files share: the n-gram draft (`ngram`'s
//! `draft.ngram`) and the language identifier (`langid`'s `langid.bin`). Each file has its
//! own header, checksum and rules; both store counts and ids as unsigned LEB128 varints
//! ([`write_varint`], [`Reader::varint`]), n-grams as up to four 16-bit ids packed in a `u64`
//! ([`unpack`]), and are read by a cursor over the checked body ([`Reader`]) that names the
//! byte offset of anything it cannot read ([`Malformed`]), never a panic.
//!
//! ```
//! use artifact_file::{unpack, write_varint, Reader};
//!
//! let mut bytes = Vec::new();
//! write_varint(&mut bytes, 300);
//! bytes.extend_from_slice(&7u32.to_le_bytes());
//! let mut reader = Reader::new(&bytes, 0);
//! assert_eq!(reader.varint(), Ok(300));
//! assert_eq!(reader.u32(), Ok(7));
//! assert_eq!(reader.at, bytes.len());
//! assert_eq!(reader.u32().unwrap_err().offset, bytes.len());
//! assert_eq!(unpack(0x0001_0002_0003, 3).collect::<Vec<_>>(), [1, 2, 3]);
//! ```

#![forbid(unsafe_code)]

/// Where and why a checked body could not be read; each file's error type has a variant
/// of the same name it converts into.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Malformed {
    pub offset: usize,
    pub problem: String,
}

/// Appends `value` as an unsigned LEB128 varint.
pub fn write_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// The `n` 16-bit ids packed in `key`, first id in the highest bits used.
pub fn unpack(key: u64, n: usize) -> impl Iterator<Item = u16> {
    (0..n)
        .rev()
        .map(move |i| ((key >> (16 * i)) & 0xFFFF) as u16)
}

/// A cursor over a body whose length and checksum already matched: running off its end is
/// a malformed file.
pub struct Reader<'a> {
    pub bytes: &'a [u8],
    /// The offset of the next byte to read.
    pub at: usize,
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8], at: usize) -> Reader<'a> {
        Reader { bytes, at }
    }

    /// `problem` at the cursor's offset.
    pub fn malformed(&self, problem: &str) -> Malformed {
        Malformed {
            offset: self.at,
            problem: problem.to_string(),
        }
    }

    /// The bytes left after the cursor.
    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.at
    }

    pub fn take(&mut self, n: usize) -> Result<&'a [u8], Malformed> {
        if self.remaining() < n {
            return Err(self.malformed("the contents end in the middle of a field"));
        }
        let taken = &self.bytes[self.at..self.at + n];
        self.at += n;
        Ok(taken)
    }

    pub fn u32(&mut self) -> Result<u32, Malformed> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub fn u64(&mut self) -> Result<u64, Malformed> {
        let b = self.take(8)?;
        let mut word = [0u8; 8];
        word.copy_from_slice(b);
        Ok(u64::from_le_bytes(word))
    }

    pub fn varint(&mut self) -> Result<u64, Malformed> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.take(1)?[0];
            value |= u64::from(b & 0x7F) << shift;
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(self.malformed("a varint runs past 64 bits"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_at_every_width_and_a_long_one_is_malformed() {
        for value in [
            0,
            1,
            127,
            128,
            300,
            16_383,
            16_384,
            u32::MAX as u64,
            u64::MAX,
        ] {
            let mut bytes = Vec::new();
            write_varint(&mut bytes, value);
            let mut reader = Reader::new(&bytes, 0);
            assert_eq!(reader.varint(), Ok(value));
            assert_eq!(reader.remaining(), 0);
        }
        let eleven = [0x80u8; 11];
        let error = Reader::new(&eleven, 0).varint().unwrap_err();
        assert_eq!(error.problem, "a varint runs past 64 bits");
        let error = Reader::new(&[0x80], 0).varint().unwrap_err();
        assert_eq!(
            (error.offset, error.problem.as_str()),
            (1, "the contents end in the middle of a field")
        );
    }
}
