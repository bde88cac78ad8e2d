//! Shared test material: a fixed multi-language training text and texts to probe with.

#![allow(dead_code)]

use std::sync::OnceLock;

use tokenizer::{train, Tokenizer};

const ENGLISH: &[&str] = &[
    "The quick brown fox jumps over the lazy dog.",
    "It's a truth universally acknowledged that we'll need more tokens; they've said so, I'm sure.",
    "Don't panic: the model reads bytes, and bytes become tokens.",
    "Temperature, top-k and top-p shape the distribution before the draw.",
    "She said \"hello\" (twice) -- then left... [end] {ok} <tag/> a_b #3 @home 50% & more!",
];
const BASQUE: &[&str] = &[
    "Kaixo, zer moduz zaude? Gaur etxean gaude, eta bihar mendira joango gara.",
    "Euskal Herriko mendietan elurra dago; neguan hotz handia egiten du.",
    "Ñabardura txikiak garrantzitsuak dira: azentuak (é, à, ü, ç) eta tildeak (ñ).",
    "Liburutegian irakurtzen dut egunero, goizeko zortzietatik hamarretara.",
    "Itsasoa urdina da eta zerua argia; txoriak abesten ari dira.",
];
const OTHER: &[&str] = &[
    "日本語のテキストです。東京は大きな都市です。",
    "中文字符也在这里，你好世界！",
    "한국어 문장도 있습니다.",
    "Emoji: 😀🎉👍🏽 and flags 🇪🇸 🇫🇷, hearts ❤️‍🔥.",
    "Digits 0123456789, 3.14159, 2024-06-01, 1,000,000 and ²³ ½ Ⅻ ٣.",
    "Ελληνικά και русский текст, עברית, العربية.",
    "Combining: e\u{301} a\u{308}; Devanagari: हिन्दी; nbsp:\u{a0}x; ideographic space:\u{3000}y.",
];
const SPACES: &[&str] = &[
    "   leading spaces",
    "trailing spaces   ",
    "tabs\tand\t\ttabs",
    "lines\n\nand\r\nmore\n   indented\n",
    "many     spaces   between words",
    "  \n \t \n",
];

/// A deterministic pseudo-random mix of the sentences above, about 60 kB.
pub fn corpus() -> String {
    let all: Vec<&str> = ENGLISH
        .iter()
        .chain(BASQUE)
        .chain(OTHER)
        .chain(SPACES)
        .copied()
        .collect();
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut out = String::new();
    for i in 0..700 {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let s = all[(state >> 33) as usize % all.len()];
        out.push_str(s);
        out.push_str(match i % 5 {
            0 => "\n",
            1 => " ",
            2 => "\n\n",
            3 => "  ",
            _ => "\t",
        });
        if i % 97 == 0 {
            out.push_str("<|endoftext|>");
        }
    }
    out
}

/// The tokenizer most tests use: vocabulary 600, trained on [`corpus`].
pub fn trained() -> &'static Tokenizer {
    static T: OnceLock<Tokenizer> = OnceLock::new();
    T.get_or_init(|| train(&[&corpus()], 600))
}

/// Texts to encode: every training sentence, and texts not seen in training.
pub fn probes() -> Vec<String> {
    let mut v: Vec<String> = ENGLISH
        .iter()
        .chain(BASQUE)
        .chain(OTHER)
        .chain(SPACES)
        .map(|s| s.to_string())
        .collect();
    v.extend(
        [
            "",
            " ",
            "a",
            "\n",
            "   ",
            "x  ",
            "  x",
            "\t\tfoo",
            "\n\n\nbar",
            "'s 're 've 'm 'll 'd 't 'S 'x ''",
            "he's she'll they'd we're you've I'm isn't",
            "Unseen words: zymurgy, quixotic, xylophone, Zürich, São Paulo, Kraków.",
            "Bihar goizean Donostiara joango naiz trenez, eta arratsaldean itzuliko.",
            "新しい単語と未知の文字：龘靐齉。",
            "🦀 Rust 🦀 and 🧪 tests, 👩‍👩‍👧‍👦 family",
            "mixed123abc 4five6 7.8.9 ...!!! ???",
            "<|endoftext|>",
            "before<|endoftext|>after",
            "<|endoftext|><|endoftext|> x<|endoftext|>",
            "<|endoftext",
            "\u{a0}\u{a0}a \u{2003}b\u{3000}\u{3000}c",
            "\u{85}x\u{2028}y\u{2029}z",
            "e\u{301}\u{301}\u{301} \u{301}x",
            "١٢٣ ൧൨ 𝟙𝟚 Ⅳ ⅷ",
            "ǅungla ǈ ʰmodifier ゝ 〆 ℵ",
            "\u{0}\u{1}\u{1f}\u{7f}\u{80}\u{ff} control",
            "\u{feff}BOM and \u{200b}zero width\u{200d}joiner",
            "Mathematical 𝐀𝐁𝐂 and 𝔸 letters",
            "a\r\n\r\n  b\r\n",
            "                                        long run of spaces then x",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    v.push(corpus());
    v
}
