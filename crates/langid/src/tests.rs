//! Unit tests: a naive Bayes case computed by hand, novelty counted by hand, the refusals of
//! bad training input, the file's round trip and damage, and the invariants of any answer on
//! any text.

use proptest::prelude::*;

use super::*;
use crate::format::{MAGIC, VERSION};
use sha2::{Digest, Sha256};

/// Slices "a" = "ab" and "b" = "bbb", order 2, nothing pruned, α = 1.
///
/// Counts: a: {a 1, b 1, ab 1}; b: {b 3, bb 2}. Kept features |V| = 4 (a, b, ab, bb);
/// N_a = 3, N_b = 5; P(f | a) = (n + 1) / 7, P(f | b) = (n + 1) / 9:
///
/// | f | P(f | a) | P(f | b) |
/// |---|---|---|
/// | a | 2/7 | 1/9 |
/// | b | 2/7 | 4/9 |
/// | ab | 2/7 | 1/9 |
/// | bb | 1/7 | 3/9 |
fn hand_model() -> LangId {
    let config = TrainConfig {
        order: 2,
        min_count: 1,
        smoothing: 1.0,
    };
    LangId::train(&[("a", "ab"), ("b", "bbb")], &config).unwrap()
}

#[test]
fn scores_are_the_hand_computed_naive_bayes_log_likelihoods() {
    let model = hand_model();
    let ln = f64::ln;
    // (text, L_a, L_b, features scored): the products of the table above.
    let cases = [
        // a, b, ab
        ("ab", 8.0 / 343.0, 4.0 / 729.0, 3),
        // b, b, bb
        ("bb", 4.0 / 343.0, 48.0 / 729.0, 3),
        // b, a; "ba" is not a feature
        ("ba", 4.0 / 49.0, 4.0 / 81.0, 2),
        // x was never seen: it and every n-gram through it are skipped
        ("bxb", 4.0 / 49.0, 16.0 / 81.0, 2),
    ];
    for (text, la, lb, features) in cases {
        let (scores, scored) = model.log_likelihoods(text);
        assert_eq!(scored, features, "{text}");
        assert!((scores[0] - ln(la)).abs() < 1e-12, "{text}: {scores:?}");
        assert!((scores[1] - ln(lb)).abs() < 1e-12, "{text}: {scores:?}");
        let classified = model.classify(text);
        let (winner, odds) = if la > lb {
            ("a", la / lb)
        } else {
            ("b", lb / la)
        };
        assert_eq!(classified.code, Some(winner), "{text}");
        assert!((classified.log_odds - ln(odds)).abs() < 1e-12, "{text}");
        assert_eq!(classified.ngrams, features);
    }
}

#[test]
fn a_text_without_known_ngrams_has_no_language() {
    let model = hand_model();
    for text in ["", "x", "λ€"] {
        let classified = model.classify(text);
        assert_eq!(
            classified,
            Classification {
                code: None,
                log_odds: 0.0,
                ngrams: 0
            },
            "{text:?}"
        );
        assert_eq!(classified.label(), UNKNOWN);
    }
    assert_eq!(model.classify("a").label(), "a");
}

#[test]
fn a_tie_goes_to_the_slice_given_first() {
    let config = TrainConfig::default();
    let model = LangId::train(&[("x", "same"), ("y", "same")], &config).unwrap();
    let classified = model.classify("some");
    assert_eq!((classified.code, classified.log_odds), (Some("x"), 0.0));
    let swapped = LangId::train(&[("y", "same"), ("x", "same")], &config).unwrap();
    assert_eq!(swapped.classify("some").code, Some("y"));
}

#[test]
fn novelty_counts_the_bytes_of_unseen_characters_and_ngrams() {
    let model = hand_model();
    let novelty = |text| {
        let n = model.novelty(text);
        (n.bytes, n.unseen_char_bytes, n.unseen_ngram_bytes)
    };
    // "ab" is kept and covers a and b; x is unseen, and so is "bx".
    assert_eq!(novelty("abx"), (3, 1, 1));
    // "ba" was never seen: both its characters are covered by no kept bigram.
    assert_eq!(novelty("ba"), (2, 0, 2));
    // λ (2 bytes) was never seen, nor "λa".
    assert_eq!(novelty("λa"), (3, 2, 3));
    // "abb": "ab" and "bb" are kept; in "abba" the last a lies only in "ba", which is not.
    assert_eq!(novelty("abb"), (3, 0, 0));
    assert_eq!(novelty("abba"), (4, 0, 1));
    // Shorter than the order: judged as one unigram.
    assert_eq!(novelty("a"), (1, 0, 0));
    assert_eq!(novelty(""), (0, 0, 0));
    assert_eq!(model.novelty("").unseen_share(), 0.0);
    assert_eq!(model.novelty("abba").unseen_share(), 0.25);
}

#[test]
fn rare_ngrams_are_pruned_but_every_character_is_kept() {
    let config = TrainConfig {
        order: 3,
        min_count: 2,
        smoothing: 1.0,
    };
    // "abab" has ab ×2, ba ×1, aba ×1, bab ×1; "cd" has c, d and cd ×1.
    let model = LangId::train(&[("p", "abab"), ("q", "cd")], &config).unwrap();
    assert_eq!(model.alphabet(), ['a', 'b', 'c', 'd']);
    assert_eq!(model.ngrams_per_order(), [4, 1, 0]);
    // Only unigrams and "ab" score: a, b, ab, a = 4 of "aba"'s 6 n-grams.
    assert_eq!(model.log_likelihoods("aba").1, 4);
}

#[test]
fn bad_training_input_is_refused_by_name() {
    let config = TrainConfig::default();
    let train =
        |slices: &[(&str, &str)], config: &TrainConfig| LangId::train(slices, config).unwrap_err();
    assert_eq!(
        train(&[("en", "text")], &config),
        LangIdError::TooFewSlices(1)
    );
    assert_eq!(
        train(&[("en", "a"), ("e u", "b")], &config),
        LangIdError::InvalidCode("e u".into())
    );
    assert_eq!(
        train(&[("", "a"), ("eu", "b")], &config),
        LangIdError::InvalidCode(String::new())
    );
    assert_eq!(
        train(&[("en", "a"), ("en", "b")], &config),
        LangIdError::DuplicateCode("en".into())
    );
    assert_eq!(
        train(&[("en", "a"), ("eu", "")], &config),
        LangIdError::EmptySlice("eu".into())
    );
    let slices = [("en", "a"), ("eu", "b")];
    for (bad, error) in [
        (
            TrainConfig { order: 0, ..config },
            LangIdError::UnsupportedOrder(0),
        ),
        (
            TrainConfig { order: 5, ..config },
            LangIdError::UnsupportedOrder(5),
        ),
        (
            TrainConfig {
                min_count: 0,
                ..config
            },
            LangIdError::InvalidMinCount(0),
        ),
        (
            TrainConfig {
                smoothing: 0.0,
                ..config
            },
            LangIdError::InvalidSmoothing(0.0),
        ),
    ] {
        assert_eq!(train(&slices, &bad), error);
    }
    let nan = train(
        &slices,
        &TrainConfig {
            smoothing: f64::NAN,
            ..config
        },
    );
    assert!(matches!(nan, LangIdError::InvalidSmoothing(s) if s.is_nan()));
    // The message names the value.
    assert!(LangIdError::InvalidCode("e u".into())
        .to_string()
        .contains("\"e u\""));
}

#[test]
fn training_records_the_sha256_of_each_slice() {
    let model = hand_model();
    // Python: hashlib.sha256(b"ab").hexdigest(), hashlib.sha256(b"bbb").hexdigest()
    assert_eq!(
        model.slices()[0].training_sha256,
        "fb8e20fc2e4c3f248c60c39bd652f3c1347298bb977b8b4d5903b85055620603"
    );
    assert_eq!(
        model.slices()[1].training_sha256,
        "3e744b9dc39389baf0c5a0660589b8402f3dbb49b89b3e75f2c9355852a3c677"
    );
}

/// A model with every part of the format: three slices, non-ASCII characters, all orders.
fn rich_model() -> LangId {
    let config = TrainConfig {
        order: 4,
        min_count: 2,
        smoothing: 0.5,
    };
    LangId::train(
        &[
            ("en", "the theme of the thesis is the thing\nthen there"),
            ("eu", "etxea eta etxeko atea, etxera etorri"),
            ("el", "το σπίτι και το σπίτι του"),
        ],
        &config,
    )
    .unwrap()
}

#[test]
fn a_model_reads_back_to_the_same_bytes_and_scores() {
    let model = rich_model();
    let bytes = model.to_bytes();
    let back = LangId::from_bytes(&bytes).unwrap();
    assert_eq!(back.to_bytes(), bytes);
    assert_eq!(back.tables, model.tables);
    assert_eq!(back.slices(), model.slices());
    assert_eq!(back.config(), model.config());
    for text in ["the etxea", "σπίτι", "", "zzz", "theta"] {
        assert_eq!(back.log_likelihoods(text), model.log_likelihoods(text));
        assert_eq!(back.novelty(text), model.novelty(text));
    }
    // Training is deterministic, and so is every answer.
    assert_eq!(rich_model().to_bytes(), bytes);
    assert_eq!(model.classify("etxe the"), model.classify("etxe the"));
}

#[test]
fn every_kind_of_damage_has_its_own_error() {
    let bytes = rich_model().to_bytes();
    let len = bytes.len() as u64;
    let read = |b: &[u8]| LangId::from_bytes(b).unwrap_err();

    assert_eq!(
        read(b"DLNGRAM\0 another model"),
        LangIdError::BadMagic {
            found: b"DLNGRAM\0".to_vec()
        }
    );
    assert_eq!(
        read(b"DLL"),
        LangIdError::BadMagic {
            found: b"DLL".to_vec()
        }
    );
    assert_eq!(
        read(&bytes[..bytes.len() - 10]),
        LangIdError::Truncated {
            expected: len,
            found: len - 10
        }
    );
    assert_eq!(
        read(&bytes[..14]),
        LangIdError::Truncated {
            expected: 20,
            found: 14
        }
    );
    let mut longer = bytes.clone();
    longer.extend_from_slice(b"xyz");
    assert_eq!(
        read(&longer),
        LangIdError::TrailingBytes {
            expected: len,
            extra: 3
        }
    );
    let mut version = bytes.clone();
    version[8] = 2;
    assert_eq!(
        read(&version),
        LangIdError::UnsupportedVersion {
            found: 2,
            supported: VERSION
        }
    );
    // A flipped bit anywhere after the preamble is caught by the SHA-256 trailer, and the
    // message names both digests.
    for at in [20, 40, bytes.len() / 2, bytes.len() - 33, bytes.len() - 1] {
        let mut flipped = bytes.clone();
        flipped[at] ^= 0x04;
        let err = read(&flipped);
        assert!(
            matches!(&err, LangIdError::ChecksumMismatch { stored, computed }
                if stored.len() == 64 && computed.len() == 64 && stored != computed),
            "byte {at}: {err}"
        );
    }
    assert_eq!(&bytes[..8], &MAGIC);
}

/// A file whose checksum matches but whose contents break a rule (another writer, or a bug)
/// is refused with the offset of the problem, never a panic.
#[test]
fn contents_that_break_the_rules_are_refused_with_a_valid_checksum() {
    let reseal = |mut body: Vec<u8>| {
        body.truncate(body.len() - 32);
        let digest = Sha256::digest(&body);
        body.extend_from_slice(&digest);
        body
    };
    let bytes = rich_model().to_bytes();
    let read = |b: Vec<u8>| LangId::from_bytes(&reseal(b)).unwrap_err();

    let mut order = bytes.clone();
    order[20..24].copy_from_slice(&9u32.to_le_bytes());
    assert_eq!(read(order), LangIdError::UnsupportedOrder(9));
    let mut min_count = bytes.clone();
    min_count[24..28].copy_from_slice(&0u32.to_le_bytes());
    assert_eq!(read(min_count), LangIdError::InvalidMinCount(0));
    let mut smoothing = bytes.clone();
    smoothing[28..36].copy_from_slice(&(-1f64).to_le_bytes());
    assert_eq!(read(smoothing), LangIdError::InvalidSmoothing(-1.0));
    let mut one_slice = bytes.clone();
    one_slice[36..40].copy_from_slice(&1u32.to_le_bytes());
    assert_eq!(read(one_slice), LangIdError::TooFewSlices(1));
    // The first slice's code "en" starts at byte 41; "e n" is not a code.
    let mut code = bytes.clone();
    code[42] = b' ';
    assert_eq!(read(code), LangIdError::InvalidCode("e ".into()));
    // The second slice's code becomes "en" too.
    let second = 41 + 2 + 64 + 1;
    let mut duplicate = bytes.clone();
    duplicate[second..second + 2].copy_from_slice(b"en");
    assert_eq!(read(duplicate), LangIdError::DuplicateCode("en".into()));
    let mut hash = bytes.clone();
    hash[43] = b'G';
    assert!(matches!(
        read(hash),
        LangIdError::Malformed { offset: 107, .. }
    ));

    // Every single-byte change of the contents, resealed, is refused or read without a
    // panic (the fuzz the checksum would otherwise hide).
    for at in 20..bytes.len() - 32 {
        for delta in [0x01, 0x41, 0x80] {
            let mut changed = bytes.clone();
            changed[at] = changed[at].wrapping_add(delta);
            let _ = LangId::from_bytes(&reseal(changed));
        }
    }
}

/// Texts mostly of characters the rich model has seen (so that n-grams are found), with any
/// character at all mixed in.
fn text() -> impl Strategy<Value = String> {
    let seen: Vec<char> = "the σπίτι etxea".chars().collect();
    prop::collection::vec(
        prop_oneof![3 => prop::sample::select(seen), 1 => any::<char>()],
        0..40,
    )
    .prop_map(|chars| chars.into_iter().collect())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Any text gets a language exactly when an n-gram of it is known, the winner has the
    /// highest log-likelihood, and its odds are finite and not negative.
    #[test]
    fn any_text_gets_a_consistent_classification(text in text()) {
        let model = rich_model();
        let (scores, ngrams) = model.log_likelihoods(&text);
        let classified = model.classify(&text);
        prop_assert_eq!(classified.ngrams, ngrams);
        prop_assert_eq!(classified.code.is_some(), ngrams > 0);
        prop_assert!(classified.log_odds.is_finite() && classified.log_odds >= 0.0);
        if let Some(code) = classified.code {
            let winner = model.slices().iter().position(|s| s.code == code).unwrap();
            prop_assert!(scores.iter().all(|&s| s <= scores[winner]));
        }
    }

    /// The unseen characters' bytes are those of the characters outside the alphabet, and
    /// lie within the bytes no kept n-gram covers, which lie within the text.
    #[test]
    fn novelty_is_nested_and_counts_unseen_characters_directly(text in text()) {
        let model = rich_model();
        let novelty = model.novelty(&text);
        let outside: usize = text
            .chars()
            .filter(|c| !model.alphabet().contains(c))
            .map(char::len_utf8)
            .sum();
        prop_assert_eq!(novelty.bytes, text.len());
        prop_assert_eq!(novelty.unseen_char_bytes, outside);
        prop_assert!(novelty.unseen_char_bytes <= novelty.unseen_ngram_bytes);
        prop_assert!(novelty.unseen_ngram_bytes <= novelty.bytes);
    }
}
