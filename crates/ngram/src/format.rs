//! The model file, version 1 (little-endian):
//!
//! | bytes | field |
//! |---|---|
//! | 8 | magic `DLNGRAM\0` |
//! | 4 | format version (1) |
//! | 8 | length of the whole file in bytes |
//! | 64 | SHA-256 of the tokenizer, lowercase hex |
//! | 4 | vocabulary size V |
//! | 4 | order N |
//! | 8 · N | each order's discount (f64), order 1 first |
//! | … | per order 1..=N: the n-gram count (varint), then the n-grams in sorted order |
//! | 4 | CRC-32 of every byte before it |
//!
//! An n-gram is stored as the length of the prefix it shares with the one before it (one
//! byte), the first differing id as its increase over the previous id there, the remaining
//! ids, then its count, each an unsigned LEB128 varint: sorted neighbours share most of
//! their ids, so an n-gram takes about three bytes. A reader checks, in this order: magic,
//! version and length (`artifact_file::frame`), checksum, tokenizer, then every rule of the
//! contents (ids below V, strictly increasing n-grams, counts above 0), so each kind of
//! damage has its own error.

use artifact_file::{
    frame, pack, write_grams, write_varint as varint, Framing, Malformed, Reader, PREAMBLE,
};

use crate::crc32::crc32;
use crate::{check_hash, NgramError, NgramModel, Table, MAX_ORDER, MAX_VOCAB};

pub const MAGIC: [u8; 8] = *b"DLNGRAM\0";
pub const VERSION: u32 = 1;

impl NgramModel {
    /// The model file's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&0u64.to_le_bytes());
        out.extend_from_slice(self.tokenizer_sha256.as_bytes());
        out.extend_from_slice(&self.vocab.to_le_bytes());
        out.extend_from_slice(&(self.tables.len() as u32).to_le_bytes());
        for d in &self.discounts {
            out.extend_from_slice(&d.to_le_bytes());
        }
        for (i, table) in self.tables.iter().enumerate() {
            write_grams(&mut out, i + 1, &table.grams, |out, g| {
                varint(out, u64::from(table.counts[g]));
            });
        }
        let length = (out.len() + 4) as u64;
        out[12..20].copy_from_slice(&length.to_le_bytes());
        let crc = crc32(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    /// Reads a model file, refusing one made for another tokenizer than the one whose
    /// SHA-256 is `tokenizer_sha256`.
    pub fn from_bytes(bytes: &[u8], tokenizer_sha256: &str) -> Result<NgramModel, NgramError> {
        check_hash(tokenizer_sha256)?;
        let (body, tail) = frame(bytes, &MAGIC, VERSION, 4)?;
        let stored = u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]);
        let computed = crc32(body);
        if stored != computed {
            return Err(NgramError::ChecksumMismatch { stored, computed });
        }
        let mut reader = Reader::new(body, PREAMBLE);
        let hash = String::from_utf8_lossy(reader.take(64)?).into_owned();
        if hash != tokenizer_sha256 {
            return Err(NgramError::WrongTokenizer {
                expected: tokenizer_sha256.to_string(),
                found: hash,
            });
        }
        let vocab = reader.u32()?;
        if vocab == 0 || u64::from(vocab) > MAX_VOCAB {
            return Err(NgramError::UnsupportedVocabulary(u64::from(vocab)));
        }
        let order = reader.u32()? as usize;
        if !(1..=MAX_ORDER).contains(&order) {
            return Err(NgramError::UnsupportedOrder(order));
        }
        let discounts = (0..order)
            .map(|_| reader.u64().map(f64::from_bits))
            .collect::<Result<Vec<_>, _>>()?;
        let mut tables = Vec::with_capacity(order);
        for n in 1..=order {
            tables.push(read_table(&mut reader, n, vocab)?);
        }
        if reader.at != body.len() {
            return Err(reader
                .malformed("bytes are left over after the last n-gram")
                .into());
        }
        NgramModel::from_parts(vocab, hash, discounts, tables)
    }
}

impl From<Framing> for NgramError {
    fn from(f: Framing) -> NgramError {
        match f {
            Framing::BadMagic { found } => NgramError::BadMagic { found },
            Framing::Truncated { expected, found } => NgramError::Truncated { expected, found },
            Framing::UnsupportedVersion { found, supported } => {
                NgramError::UnsupportedVersion { found, supported }
            }
            Framing::TrailingBytes { expected, extra } => {
                NgramError::TrailingBytes { expected, extra }
            }
            Framing::Malformed(m) => m.into(),
        }
    }
}

impl From<Malformed> for NgramError {
    fn from(m: Malformed) -> NgramError {
        NgramError::Malformed {
            offset: m.offset,
            problem: m.problem,
        }
    }
}

/// The draft's own part of the format, read at the shared cursor: the `n`-grams of order `n`,
/// their ids below `vocab`, and their counts.
fn read_table(reader: &mut Reader, n: usize, vocab: u32) -> Result<Table, NgramError> {
    // Each n-gram takes at least three bytes (shared length, one id, count), so a count
    // beyond that is a lie that must not size an allocation.
    let len = reader.length(3, "n-gram")?;
    let mut table = Table {
        grams: Vec::with_capacity(len),
        counts: Vec::with_capacity(len),
    };
    let mut previous: Option<Vec<u16>> = None;
    for _ in 0..len {
        let ids = reader.gram(n, previous.as_deref(), |_, id| {
            if id >= u64::from(vocab) {
                return Err(NgramError::TokenOutOfRange {
                    id: id.min(u64::from(u32::MAX)) as u32,
                    vocab,
                });
            }
            Ok(id as u16)
        })?;
        let count = reader.varint()?;
        if count == 0 || count > u64::from(u32::MAX) {
            return Err(reader
                .malformed("an n-gram count is 0 or beyond 32 bits")
                .into());
        }
        table.grams.push(pack(&ids));
        table.counts.push(count as u32);
        previous = Some(ids);
    }
    Ok(table)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{train, Discounts, TrainConfig};

    const HASH: &str = "e39ae7b52f47a153835a65192ba1c9d912daaf76704046f985b7170f58b685cf";

    fn model() -> NgramModel {
        // A skewed pseudo-random text (a 64-bit LCG), so that every order has n-grams seen
        // once and twice and the discounts can be estimated.
        let mut state = 7u64;
        let text: Vec<u32> = (0..400)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let u = (state >> 40) as u32 % 64;
                u * u / 100
            })
            .collect();
        let config = TrainConfig {
            order: 3,
            vocab: 41,
            tokenizer_sha256: HASH.into(),
            discounts: Discounts::Estimated,
        };
        train(&[&text], &config).unwrap()
    }

    #[test]
    fn a_model_reads_back_to_the_same_bytes_and_probabilities() {
        let model = model();
        let bytes = model.to_bytes();
        let back = NgramModel::from_bytes(&bytes, HASH).unwrap();
        assert_eq!(back.to_bytes(), bytes);
        assert_eq!(back.tables, model.tables);
        assert_eq!(back.discounts, model.discounts);
        for context in [&[][..], &[3], &[3, 5], &[40, 40]] {
            for w in 0..41 {
                assert_eq!(back.prob(context, w), model.prob(context, w));
            }
        }
    }

    #[test]
    fn every_kind_of_damage_has_its_own_error() {
        let bytes = model().to_bytes();
        let len = bytes.len() as u64;
        let read = |b: &[u8]| NgramModel::from_bytes(b, HASH).unwrap_err();

        assert_eq!(
            read(b"PK\x03\x04 not a model"),
            NgramError::BadMagic {
                found: b"PK\x03\x04 not".to_vec()
            }
        );
        assert_eq!(
            read(&bytes[..bytes.len() - 10]),
            NgramError::Truncated {
                expected: len,
                found: len - 10
            }
        );
        assert_eq!(
            read(&bytes[..14]),
            NgramError::Truncated {
                expected: PREAMBLE as u64,
                found: 14
            }
        );
        let mut longer = bytes.clone();
        longer.extend_from_slice(b"xyz");
        assert_eq!(
            read(&longer),
            NgramError::TrailingBytes {
                expected: len,
                extra: 3
            }
        );
        let mut flipped = bytes.clone();
        flipped[200] ^= 0x10;
        assert!(matches!(
            read(&flipped),
            NgramError::ChecksumMismatch { .. }
        ));
        let mut version = bytes.clone();
        version[8] = 2;
        assert_eq!(
            read(&version),
            NgramError::UnsupportedVersion {
                found: 2,
                supported: 1
            }
        );
        let other = "0".repeat(64);
        assert_eq!(
            NgramModel::from_bytes(&bytes, &other).unwrap_err(),
            NgramError::WrongTokenizer {
                expected: other.clone(),
                found: HASH.into()
            }
        );
        // The message names both hashes, so a learner sees which tokenizer is wrong.
        let message = NgramModel::from_bytes(&bytes, &other)
            .unwrap_err()
            .to_string();
        assert!(
            message.contains(HASH) && message.contains(&other),
            "{message}"
        );
    }

    /// A file whose checksum matches but whose contents break a rule (another writer, or a
    /// bug) is refused with the offset of the problem, never a panic.
    #[test]
    fn contents_that_break_the_rules_are_malformed_with_a_valid_checksum() {
        let reseal = |mut body: Vec<u8>| {
            body.truncate(body.len() - 4);
            let crc = crc32(&body);
            body.extend_from_slice(&crc.to_le_bytes());
            body
        };
        let bytes = model().to_bytes();
        let header = PREAMBLE + 64 + 4 + 4 + 3 * 8;
        // The first unigram's count varint is the byte after its count and first id.
        let mut out_of_range = bytes.clone();
        out_of_range[header + 2] = 50;
        let err = NgramModel::from_bytes(&reseal(out_of_range), HASH).unwrap_err();
        assert_eq!(err, NgramError::TokenOutOfRange { id: 50, vocab: 41 });

        let mut zero_discount = bytes.clone();
        zero_discount[header - 8..header].copy_from_slice(&0f64.to_le_bytes());
        let err = NgramModel::from_bytes(&reseal(zero_discount), HASH).unwrap_err();
        assert_eq!(err, NgramError::InvalidDiscount(0.0));

        let mut order = bytes.clone();
        order[PREAMBLE + 68..PREAMBLE + 72].copy_from_slice(&9u32.to_le_bytes());
        let err = NgramModel::from_bytes(&reseal(order), HASH).unwrap_err();
        assert_eq!(err, NgramError::UnsupportedOrder(9));

        // Every single-byte change of the contents, resealed, is refused or read without
        // a panic (the fuzz the checksum would otherwise hide).
        for at in PREAMBLE + 64..bytes.len() - 4 {
            let mut changed = bytes.clone();
            changed[at] = changed[at].wrapping_add(0x41);
            let _ = NgramModel::from_bytes(&reseal(changed), HASH);
        }
    }
}
