//! GPT-2's split pattern, reproduced without a regex engine.
//!
//! The pattern (Hugging Face `ByteLevel` pre-tokenizer, `use_regex: true`) is
//!
//! ```text
//! 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//! ```
//!
//! matched leftmost-first, over and over from the end of the previous match. Every character
//! is a letter (`\p{L}`), a number (`\p{N}`), white space (`\s`) or other, so every position
//! starts a match and the pieces cover the text. At a position:
//!
//! 1. an apostrophe followed by `s`, `t`, `re`, `ve`, `m`, `ll` or `d` is a piece;
//! 2. otherwise, after one optional U+0020 space, a run of letters, of numbers, or of "other"
//!    characters is a piece (the space included);
//! 3. otherwise the position starts a run of white space. If the run reaches the end of the
//!    text it is one piece; else a run of two or more characters leaves its last character for
//!    the next piece (`\s+(?!\S)` backtracks by one, so that a space can start ` word`), and a
//!    single character is a piece on its own (the final `\s+`).
//!
//! The classes are those of the `regex-syntax` crate, which is what the `tokenizers` crate's
//! regex engine (fancy-regex, delegating to regex-automata) matches with, written out in
//! `classes.rs` (a test checks them against `regex-syntax`'s, and writes them anew with
//! `UPDATE_CLASSES=1 cargo test -p tokenizer`).

#[path = "classes.rs"]
mod classes;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Letter,
    Number,
    Space,
    Other,
}

/// Sorted, disjoint ranges of non-ASCII characters that are letters, numbers or white space:
/// `regex-syntax`'s classes, written out once (`classes.rs`, which a test checks against
/// them), so that the browser's workers link neither its parser nor all its Unicode tables.
fn tables() -> &'static [(u32, u32, Kind)] {
    &classes::RANGES
}

fn kind(c: char) -> Kind {
    if c.is_ascii() {
        return if c.is_ascii_alphabetic() {
            Kind::Letter
        } else if c.is_ascii_digit() {
            Kind::Number
        } else if matches!(c, ' ' | '\t' | '\n' | '\x0B' | '\x0C' | '\r') {
            Kind::Space
        } else {
            Kind::Other
        };
    }
    let code = c as u32;
    let t = tables();
    let i = t.partition_point(|r| r.0 <= code);
    match i.checked_sub(1).map(|i| t[i]) {
        Some((start, end, kind)) if start <= code && code <= end => kind,
        _ => Kind::Other,
    }
}

/// The byte ranges of the pieces of `text`, in order; they cover `text` exactly.
pub fn split(text: &str) -> Vec<std::ops::Range<usize>> {
    let mut pieces = Vec::new();
    let mut start = 0;
    while start < text.len() {
        let end = piece_end(text, start);
        pieces.push(start..end);
        start = end;
    }
    pieces
}

/// The pieces of `text` as string slices.
pub fn split_str(text: &str) -> Vec<&str> {
    split(text).into_iter().map(|r| &text[r]).collect()
}

/// The end of the run of characters of `kind` that starts at `from`.
fn run_end(text: &str, from: usize, want: Kind) -> usize {
    text[from..]
        .char_indices()
        .find(|&(_, c)| kind(c) != want)
        .map_or(text.len(), |(i, _)| from + i)
}

/// The end of the piece that starts at `at` (a character boundary before the end).
fn piece_end(text: &str, at: usize) -> usize {
    let rest = &text[at..];
    let mut chars = rest.chars();
    let Some(c) = chars.next() else {
        return at;
    };
    // 1. Contractions.
    if c == '\'' {
        let after = &rest[1..];
        for suffix in ["s", "t", "re", "ve", "m", "ll", "d"] {
            if after.starts_with(suffix) {
                return at + 1 + suffix.len();
            }
        }
    }
    // 2. ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`: with the optional space, then without.
    let mut candidates = [None, None];
    if c == ' ' {
        candidates[0] = chars.next().map(|n| (at + 1, n));
    }
    candidates[1] = Some((at, c));
    for want in [Kind::Letter, Kind::Number, Kind::Other] {
        for &(from, first) in candidates.iter().flatten() {
            if kind(first) == want {
                return run_end(text, from, want);
            }
        }
    }
    // 3. `\s+(?!\S)` then `\s+`: `c` is white space here.
    let end = run_end(text, at, Kind::Space);
    if end == text.len() {
        return end;
    }
    let last = text[at..end]
        .char_indices()
        .last()
        .map_or(at, |(i, _)| at + i);
    if last > at {
        last
    } else {
        end
    }
}

#[cfg(test)]
mod tests {
    use regex_syntax::hir::{Class, HirKind};

    /// The classes as `regex-syntax` gives them (what the `tokenizers` crate matches with).
    fn from_regex_syntax() -> Vec<(u32, u32, Kind)> {
        let mut ranges = Vec::new();
        for (pattern, kind) in [
            (r"\p{L}", Kind::Letter),
            (r"\p{N}", Kind::Number),
            (r"\s", Kind::Space),
        ] {
            let hir = regex_syntax::Parser::new().parse(pattern).unwrap();
            let HirKind::Class(Class::Unicode(class)) = hir.kind() else {
                panic!("{pattern} is not a Unicode class");
            };
            for r in class.iter() {
                ranges.push((r.start() as u32, r.end() as u32, kind));
            }
        }
        ranges.sort_unstable_by_key(|r| r.0);
        ranges
    }

    #[test]
    fn the_written_classes_are_regex_syntax_classes() {
        let expected = from_regex_syntax();
        if std::env::var_os("UPDATE_CLASSES").is_some() {
            let name = |k: Kind| match k {
                Kind::Letter => "L",
                Kind::Number => "N",
                Kind::Space => "S",
                Kind::Other => unreachable!(),
            };
            let mut out = String::from(
                "//! `regex-syntax`'s `\\p{L}`, `\\p{N}` and `\\s` as sorted, disjoint ranges: written by\n\
                 //! `UPDATE_CLASSES=1 cargo test -p tokenizer`, which checks them against it. Do not edit.\n\n\
                 use super::Kind::{self, Letter as L, Number as N, Space as S};\n\n",
            );
            out += &format!(
                "pub(super) static RANGES: [(u32, u32, Kind); {}] = [\n",
                expected.len()
            );
            for (start, end, kind) in &expected {
                out += &format!("    ({start:#x}, {end:#x}, {}),\n", name(*kind));
            }
            out += "];\n";
            let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/classes.rs");
            std::fs::write(path, out).unwrap();
        }
        assert_eq!(
            tables(),
            &expected[..],
            "classes.rs is not regex-syntax's: UPDATE_CLASSES=1 cargo test -p tokenizer"
        );
    }

    use super::*;

    #[test]
    fn splits_like_gpt2() {
        assert_eq!(
            split_str("Hello world's  end\n\n  x 12ab"),
            vec!["Hello", " world", "'s", " ", " end", "\n\n ", " x", " 12", "ab"]
        );
        assert_eq!(split_str("a \n"), vec!["a", " \n"]);
        assert_eq!(split_str("  "), vec!["  "]);
        assert_eq!(split_str(" !?x"), vec![" !?", "x"]);
        assert_eq!(split_str("'ll'x"), vec!["'ll", "'", "x"]);
        assert_eq!(split_str("é日本 😀"), vec!["é日本", " 😀"]);
        assert_eq!(split_str("\t\tfoo"), vec!["\t", "\t", "foo"]);
        assert_eq!(split_str(""), Vec::<&str>::new());
    }
}
