//! GPT-2's byte-to-unicode alphabet: each byte is written as one printable character in
//! `tokenizer.json` (bytes that are printable Latin-1 stand for themselves, the others move to
//! U+0100 and up, in byte order).

const fn build_table() -> [char; 256] {
    let mut table = ['\0'; 256];
    let mut n = 0u32;
    let mut b = 0usize;
    while b < 256 {
        let byte = b as u8;
        let printable = matches!(byte, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
        let code = if printable {
            b as u32
        } else {
            let c = 256 + n;
            n += 1;
            c
        };
        table[b] = match char::from_u32(code) {
            Some(c) => c,
            None => '\0',
        };
        b += 1;
    }
    table
}

const TABLE: [char; 256] = build_table();
static BYTE_TO_CHAR: [char; 256] = TABLE;

/// The character that stands for `byte` in `tokenizer.json`.
pub fn byte_to_char(byte: u8) -> char {
    BYTE_TO_CHAR[byte as usize]
}

const fn build_reverse() -> [i16; 256 + 68] {
    let mut table = [-1i16; 256 + 68];
    let mut b = 0usize;
    while b < 256 {
        table[TABLE[b] as usize] = b as i16;
        b += 1;
    }
    table
}

static CHAR_TO_BYTE: [i16; 256 + 68] = build_reverse();

/// The byte a byte-level character stands for, if it is one.
pub fn char_to_byte(ch: char) -> Option<u8> {
    match CHAR_TO_BYTE.get(ch as usize) {
        Some(&b) if b >= 0 => Some(b as u8),
        _ => None,
    }
}

/// `bytes` written in the byte-level alphabet.
pub(crate) fn to_chars(bytes: &[u8]) -> String {
    bytes.iter().map(|&b| byte_to_char(b)).collect()
}

/// The bytes a byte-level string stands for, or the first character that is not byte-level.
pub(crate) fn from_chars(s: &str) -> Result<Vec<u8>, char> {
    s.chars().map(|c| char_to_byte(c).ok_or(c)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_alphabet_is_a_bijection_and_matches_gpt2() {
        for b in 0..=255u8 {
            assert_eq!(char_to_byte(byte_to_char(b)), Some(b));
        }
        assert_eq!(byte_to_char(b' '), 'Ġ');
        assert_eq!(byte_to_char(b'\n'), 'Ċ');
        assert_eq!(byte_to_char(0), '\u{100}');
        assert_eq!(byte_to_char(0xAD), '\u{143}');
        assert_eq!(byte_to_char(b'a'), 'a');
        assert_eq!(char_to_byte('\u{144}'), None);
        assert_eq!(char_to_byte(' '), None);
    }
}
