//! What the lab's two binary artifact files share: the n-gram draft (`ngram`'s
//! `draft.ngram`) and the language identifier (`langid`'s `langid.bin`). Each file has its
//! own magic, version, checksum and rules; both open with the same preamble (magic, version,
//! the whole file's length), checked in the same order ([`frame`], [`Framing`]), store counts
//! and ids as unsigned LEB128 varints ([`write_varint`], [`Reader::varint`]), n-grams as up to
//! four 16-bit ids packed in a `u64` ([`pack`], [`unpack`]) and written in sorted order, each
//! as its difference from the one before ([`write_grams`], [`Reader::gram`]), and are read by
//! a cursor over the checked body ([`Reader`]) that names the byte offset of anything it
//! cannot read ([`Malformed`]), never a panic.
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

/// Magic (8 bytes), format version (`u32`) and the whole file's length (`u64`): what must be
/// there before anything else can be judged.
pub const PREAMBLE: usize = 8 + 4 + 8;

/// Why a file's preamble or length is wrong; each file's error type has variants of the same
/// names it converts these into, in its own words for whose magic and version they are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Framing {
    BadMagic { found: Vec<u8> },
    Truncated { expected: u64, found: u64 },
    UnsupportedVersion { found: u32, supported: u32 },
    TrailingBytes { expected: u64, extra: u64 },
    Malformed(Malformed),
}

/// The body and the trailer of `bytes`, a file that opens with `magic`, its format
/// `version` and its length ([`PREAMBLE`]), and ends in a `trailer`-byte checksum. Checked in
/// this order: magic, preamble, version, length, room for the trailer; the checksum is the
/// caller's to compare.
pub fn frame<'a>(
    bytes: &'a [u8],
    magic: &[u8; 8],
    version: u32,
    trailer: usize,
) -> Result<(&'a [u8], &'a [u8]), Framing> {
    if bytes.len() < magic.len() || bytes[..magic.len()] != magic[..] {
        return Err(Framing::BadMagic {
            found: bytes[..bytes.len().min(magic.len())].to_vec(),
        });
    }
    if bytes.len() < PREAMBLE {
        return Err(Framing::Truncated {
            expected: PREAMBLE as u64,
            found: bytes.len() as u64,
        });
    }
    let mut reader = Reader::new(bytes, magic.len());
    let found = reader.u32().map_err(Framing::Malformed)?;
    if found != version {
        return Err(Framing::UnsupportedVersion {
            found,
            supported: version,
        });
    }
    let expected = reader.u64().map_err(Framing::Malformed)?;
    let found = bytes.len() as u64;
    if found < expected {
        return Err(Framing::Truncated { expected, found });
    }
    if found > expected {
        return Err(Framing::TrailingBytes {
            expected,
            extra: found - expected,
        });
    }
    if bytes.len() < PREAMBLE + trailer {
        return Err(Framing::Malformed(
            reader.malformed("the recorded length leaves no room for a checksum"),
        ));
    }
    Ok(bytes.split_at(bytes.len() - trailer))
}

/// Appends `value` as an unsigned LEB128 varint.
pub fn write_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// `ids` (at most four) packed in a `u64`, first id in the highest bits used.
pub fn pack(ids: &[u16]) -> u64 {
    ids.iter().fold(0, |key, &id| (key << 16) | u64::from(id))
}

/// Appends the number of `grams` (sorted, packed `n`-grams) and each of them as the number of
/// ids it shares with the one before it (one byte), its first differing id as its increase
/// over the previous id there, then its remaining ids, each a varint; after each n-gram,
/// `after(out, i)` appends what the file keeps with the `i`-th (its counts).
pub fn write_grams(
    out: &mut Vec<u8>,
    n: usize,
    grams: &[u64],
    mut after: impl FnMut(&mut Vec<u8>, usize),
) {
    write_varint(out, grams.len() as u64);
    let mut previous: Option<Vec<u16>> = None;
    for (i, &gram) in grams.iter().enumerate() {
        let ids: Vec<u16> = unpack(gram, n).collect();
        let shared = previous.as_ref().map_or(0, |p| {
            p.iter().zip(&ids).take_while(|(a, b)| a == b).count()
        });
        out.push(shared as u8);
        for (j, &id) in ids.iter().enumerate().skip(shared) {
            let base = match &previous {
                Some(p) if j == shared => p[j],
                _ => 0,
            };
            write_varint(out, u64::from(id - base));
        }
        after(out, i);
        previous = Some(ids);
    }
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

    /// A count (a varint) that must not size an allocation beyond what the rest of the body
    /// can hold at `min_bytes` per item; `what` names the item.
    pub fn length(&mut self, min_bytes: usize, what: &str) -> Result<usize, Malformed> {
        let len = self.varint()?;
        if len > (self.remaining() / min_bytes) as u64 {
            return Err(self.malformed(&format!("the {what} count exceeds what the file can hold")));
        }
        Ok(len as usize)
    }

    /// The ids of the next `n`-gram written by [`write_grams`], after `previous` (`None` for
    /// a table's first); `id` judges each id as it is read (within the file's vocabulary).
    pub fn gram<E: From<Malformed>>(
        &mut self,
        n: usize,
        previous: Option<&[u16]>,
        mut id: impl FnMut(&Self, u64) -> Result<u16, E>,
    ) -> Result<Vec<u16>, E> {
        let shared = usize::from(self.take(1)?[0]);
        if shared >= n || (previous.is_none() && shared != 0) {
            return Err(self
                .malformed("an n-gram shares more ids than it has")
                .into());
        }
        let mut ids = previous.map(<[u16]>::to_vec).unwrap_or_default();
        ids.truncate(shared);
        for j in shared..n {
            let raw = self.varint()?;
            let value = match previous {
                Some(p) if j == shared => {
                    if raw == 0 {
                        return Err(self.malformed("n-grams are not in increasing order").into());
                    }
                    u64::from(p[j]).saturating_add(raw)
                }
                _ => raw,
            };
            ids.push(id(self, value)?);
        }
        Ok(ids)
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

    #[test]
    fn the_preamble_is_checked_in_order_and_the_body_split_from_its_trailer() {
        let file = |version: u32, length: u64, tail: &[u8]| {
            let mut bytes = b"TESTFILE".to_vec();
            bytes.extend_from_slice(&version.to_le_bytes());
            bytes.extend_from_slice(&length.to_le_bytes());
            bytes.extend_from_slice(tail);
            bytes
        };
        let good = file(1, 24, b"body");
        assert_eq!(
            frame(&good, b"TESTFILE", 1, 2),
            Ok((&good[..22], &b"dy"[..]))
        );
        let no_room = Malformed {
            offset: PREAMBLE,
            problem: "the recorded length leaves no room for a checksum".into(),
        };
        for (bytes, refused) in [
            (
                b"PK\x03\x04".to_vec(),
                Framing::BadMagic {
                    found: b"PK\x03\x04".to_vec(),
                },
            ),
            (
                good[..10].to_vec(),
                Framing::Truncated {
                    expected: PREAMBLE as u64,
                    found: 10,
                },
            ),
            (
                file(2, 24, b"body"),
                Framing::UnsupportedVersion {
                    found: 2,
                    supported: 1,
                },
            ),
            (
                file(1, 30, b"body"),
                Framing::Truncated {
                    expected: 30,
                    found: 24,
                },
            ),
            (
                file(1, 22, b"body"),
                Framing::TrailingBytes {
                    expected: 22,
                    extra: 2,
                },
            ),
            (file(1, 21, b"x"), Framing::Malformed(no_room)),
        ] {
            assert_eq!(frame(&bytes, b"TESTFILE", 1, 2), Err(refused));
        }
    }

    #[test]
    fn grams_read_back_as_written_and_out_of_order_ones_are_malformed() {
        let grams: Vec<u64> = [[1, 2], [1, 7], [3, 1], [3, 2]]
            .iter()
            .map(|ids| pack(ids))
            .collect();
        let mut bytes = Vec::new();
        write_grams(&mut bytes, 2, &grams, |out, i| out.push(i as u8));
        let mut reader = Reader::new(&bytes, 0);
        assert_eq!(reader.length(3, "n-gram"), Ok(4));
        let mut previous: Option<Vec<u16>> = None;
        for (i, &gram) in grams.iter().enumerate() {
            let ids = reader
                .gram(2, previous.as_deref(), |_, id| {
                    Ok::<_, Malformed>(id as u16)
                })
                .unwrap();
            assert_eq!(pack(&ids), gram);
            assert_eq!(reader.take(1), Ok(&[i as u8][..]));
            previous = Some(ids);
        }
        assert_eq!(reader.remaining(), 0);

        // A second n-gram that shares its first id and does not increase the next.
        let mut reader = Reader::new(&[0, 1, 2, 1, 0], 0);
        let first = reader.gram(2, None, |_, id| Ok::<_, Malformed>(id as u16));
        assert_eq!(first, Ok(vec![1, 2]));
        let error = reader
            .gram(2, Some(&[1, 2]), |_, id| Ok::<_, Malformed>(id as u16))
            .unwrap_err();
        assert_eq!(error.problem, "n-grams are not in increasing order");
    }
}
