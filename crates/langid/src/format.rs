//! The language identifier's file, version 1 (little-endian), laid out as the n-gram draft's
//! file is (`ngram::format`), with a SHA-256 trailer in place of its CRC-32:
//!
//! | bytes | field |
//! |---|---|
//! | 8 | magic `DLLANGID` |
//! | 4 | format version (1) |
//! | 8 | length of the whole file in bytes |
//! | 4 | order N |
//! | 4 | minimum count of a kept n-gram of 2 or more characters |
//! | 8 | smoothing α (f64) |
//! | 4 | number of slices C |
//! | … | per slice: its code's length (one byte), the code, the SHA-256 of its training text (64 lowercase hex digits) |
//! | … | the alphabet: its size A (varint), then each character as its increase over the one before (the first as its value) |
//! | … | order 1: C counts per character of the alphabet, in order |
//! | … | per order 2..=N: the n-gram count (varint), then the n-grams in sorted order, each with C counts |
//! | 32 | SHA-256 of every byte before it |
//!
//! A character is stored as its id, its place in the alphabet plus 1. An n-gram is stored
//! as the number of ids it shares with the one before it (one byte), the first differing id
//! as its increase over the previous id there, then the remaining ids; every number but the
//! one-byte fields is an unsigned LEB128 varint. Only counts are stored; the probabilities
//! are derived on reading. A reader checks, in this order: magic, version and length
//! (`artifact_file::frame`), checksum, then every rule of the contents (settings in range,
//! codes valid and distinct, the alphabet increasing, ids within it, n-grams strictly
//! increasing, every character counted, every longer n-gram counted at least the minimum),
//! so each kind of damage has its own error.
//!
//! Unlike the n-gram draft, the file is tied to no tokenizer: the text it reads is characters.
//! What it records instead is the SHA-256 of each slice's training text, so a test can check
//! that the shipped file was trained on the committed corpus.

use artifact_file::{
    frame, write_grams, write_varint as varint, Framing, Malformed, Reader, PREAMBLE,
};
use policy::hex;
use sha2::{Digest, Sha256};

use crate::{
    check_code, check_config, pack, LangId, LangIdError, Slice, Table, TrainConfig, MAX_ALPHABET,
};

pub const MAGIC: [u8; 8] = *b"DLLANGID";
pub const VERSION: u32 = 1;
const TRAILER: usize = 32;

impl LangId {
    /// The file's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let classes = self.slices.len();
        let mut out = Vec::new();
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&0u64.to_le_bytes());
        out.extend_from_slice(&(self.config.order as u32).to_le_bytes());
        out.extend_from_slice(&self.config.min_count.to_le_bytes());
        out.extend_from_slice(&self.config.smoothing.to_le_bytes());
        out.extend_from_slice(&(classes as u32).to_le_bytes());
        for slice in &self.slices {
            out.push(slice.code.len() as u8);
            out.extend_from_slice(slice.code.as_bytes());
            out.extend_from_slice(slice.training_sha256.as_bytes());
        }
        varint(&mut out, self.alphabet.len() as u64);
        let mut previous = 0u32;
        for &c in &self.alphabet {
            varint(&mut out, u64::from(u32::from(c) - previous));
            previous = u32::from(c);
        }
        for &count in &self.tables[0].counts {
            varint(&mut out, u64::from(count));
        }
        for (i, table) in self.tables.iter().enumerate().skip(1) {
            write_grams(&mut out, i + 1, &table.grams, |out, g| {
                for &count in &table.counts[g * classes..(g + 1) * classes] {
                    varint(out, u64::from(count));
                }
            });
        }
        let length = (out.len() + TRAILER) as u64;
        out[12..20].copy_from_slice(&length.to_le_bytes());
        let digest = Sha256::digest(&out);
        out.extend_from_slice(&digest);
        out
    }

    /// Reads a file written by [`LangId::to_bytes`].
    pub fn from_bytes(bytes: &[u8]) -> Result<LangId, LangIdError> {
        let (body, trailer) = frame(bytes, &MAGIC, VERSION, TRAILER)?;
        let computed = Sha256::digest(body);
        if computed[..] != trailer[..] {
            return Err(LangIdError::ChecksumMismatch {
                stored: hex(trailer),
                computed: hex(&computed),
            });
        }
        let mut reader = Reader::new(body, PREAMBLE);
        let config = TrainConfig {
            order: reader.u32()? as usize,
            min_count: reader.u32()?,
            smoothing: f64::from_bits(reader.u64()?),
        };
        check_config(&config)?;
        let classes = reader.u32()? as usize;
        if classes < 2 {
            return Err(LangIdError::TooFewSlices(classes));
        }
        // Each slice takes at least 66 bytes, so a count beyond that must not size anything.
        if classes > (body.len() - reader.at) / 66 {
            return Err(malformed(
                &reader,
                "the slice count exceeds what the file can hold",
            ));
        }
        let mut slices: Vec<Slice> = Vec::with_capacity(classes);
        for _ in 0..classes {
            let len = usize::from(reader.take(1)?[0]);
            let code = String::from_utf8_lossy(reader.take(len)?).into_owned();
            check_code(&code)?;
            if slices.iter().any(|s| s.code == code) {
                return Err(LangIdError::DuplicateCode(code));
            }
            let hash = reader.take(64)?;
            if !hash
                .iter()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
            {
                return Err(malformed(
                    &reader,
                    "a training SHA-256 is not 64 lowercase hex digits",
                ));
            }
            slices.push(Slice {
                code,
                training_sha256: String::from_utf8_lossy(hash).into_owned(),
            });
        }
        let alphabet = read_alphabet(&mut reader)?;
        let mut unigrams = Table {
            grams: (1..=alphabet.len() as u16).map(u64::from).collect(),
            counts: Vec::with_capacity(alphabet.len() * classes),
        };
        for _ in 0..alphabet.len() {
            let counts = read_counts(&mut reader, classes)?;
            if counts.iter().all(|&c| c == 0) {
                return Err(malformed(
                    &reader,
                    "a character of the alphabet has no count",
                ));
            }
            unigrams.counts.extend_from_slice(&counts);
        }
        let mut tables = vec![unigrams];
        for n in 2..=config.order {
            tables.push(read_table(
                &mut reader,
                n,
                alphabet.len(),
                classes,
                config.min_count,
            )?);
        }
        if reader.at != body.len() {
            return Err(malformed(
                &reader,
                "bytes are left over after the last n-gram",
            ));
        }
        Ok(LangId::from_parts(config, slices, alphabet, tables))
    }
}

impl From<Framing> for LangIdError {
    fn from(f: Framing) -> LangIdError {
        match f {
            Framing::BadMagic { found } => LangIdError::BadMagic { found },
            Framing::Truncated { expected, found } => LangIdError::Truncated { expected, found },
            Framing::UnsupportedVersion { found, supported } => {
                LangIdError::UnsupportedVersion { found, supported }
            }
            Framing::TrailingBytes { expected, extra } => {
                LangIdError::TrailingBytes { expected, extra }
            }
            Framing::Malformed(m) => m.into(),
        }
    }
}

impl From<Malformed> for LangIdError {
    fn from(m: Malformed) -> LangIdError {
        LangIdError::Malformed {
            offset: m.offset,
            problem: m.problem,
        }
    }
}

/// `problem` at the cursor, as the identifier's error.
fn malformed(reader: &Reader, problem: &str) -> LangIdError {
    reader.malformed(problem).into()
}

/// The alphabet: its size, then each character as its increase over the one before.
fn read_alphabet(reader: &mut Reader) -> Result<Vec<char>, LangIdError> {
    let len = reader.length(1, "character")?;
    if len == 0 || len > MAX_ALPHABET {
        return Err(malformed(
            reader,
            "the alphabet is empty or larger than 65,535 characters",
        ));
    }
    let mut alphabet = Vec::with_capacity(len);
    let mut previous: Option<u32> = None;
    for _ in 0..len {
        let step = reader.varint()?;
        let value = u64::from(previous.unwrap_or(0)).saturating_add(step);
        let c = u32::try_from(value).ok().and_then(char::from_u32);
        match c {
            Some(c) if previous.is_none() || step > 0 => {
                alphabet.push(c);
                previous = Some(u32::from(c));
            }
            _ => {
                return Err(malformed(
                    reader,
                    "the alphabet is not increasing Unicode scalar values",
                ))
            }
        }
    }
    Ok(alphabet)
}

/// One count per class.
fn read_counts(reader: &mut Reader, classes: usize) -> Result<Vec<u32>, LangIdError> {
    (0..classes)
        .map(|_| {
            let count = reader.varint()?;
            u32::try_from(count).map_err(|_| malformed(reader, "a count is beyond 32 bits"))
        })
        .collect()
}

/// The `n`-grams of order `n` and their counts, each n-gram's ids within the alphabet and its
/// total count at least `min_count`.
fn read_table(
    reader: &mut Reader,
    n: usize,
    alphabet: usize,
    classes: usize,
    min_count: u32,
) -> Result<Table, LangIdError> {
    // An n-gram takes at least 2 + C bytes (shared length, one id, its counts).
    let len = reader.length(2 + classes, "n-gram")?;
    let mut table = Table {
        grams: Vec::with_capacity(len),
        counts: Vec::with_capacity(len * classes),
    };
    let mut previous: Option<Vec<u16>> = None;
    for _ in 0..len {
        let ids = reader.gram(n, previous.as_deref(), |reader, id| {
            if id == 0 || id > alphabet as u64 {
                return Err(malformed(reader, "a character id is outside the alphabet"));
            }
            Ok(id as u16)
        })?;
        let counts = read_counts(reader, classes)?;
        let total: u64 = counts.iter().map(|&c| u64::from(c)).sum();
        if total < u64::from(min_count) {
            return Err(malformed(
                reader,
                "an n-gram is counted less than the minimum count",
            ));
        }
        table.grams.push(pack(&ids));
        table.counts.extend_from_slice(&counts);
        previous = Some(ids);
    }
    Ok(table)
}
