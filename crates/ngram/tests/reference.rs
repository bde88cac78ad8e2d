//! The model against outside references: NLTK's Kneser–Ney numbers, direct counts of the
//! text, and the laws every distribution obeys.

use std::collections::{HashMap, HashSet};

use ngram::{train, Discounts, NgramError, NgramModel, TrainConfig};

const HASH: &str = "e39ae7b52f47a153835a65192ba1c9d912daaf76704046f985b7170f58b685cf";

fn config(order: usize, vocab: u32, discounts: Discounts) -> TrainConfig {
    TrainConfig {
        order,
        vocab,
        tokenizer_sha256: HASH.into(),
        discounts,
    }
}

/// A skewed pseudo-random text over `vocab` ids (a 64-bit LCG), long enough that every
/// order has n-grams seen once and twice.
fn text(len: usize, vocab: u32, seed: u64) -> Vec<u32> {
    let mut state = seed;
    (0..len)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let u = ((state >> 33) as f64) / (1u64 << 31) as f64;
            ((u * u * f64::from(vocab)) as u32).min(vocab - 1)
        })
        .collect()
}

/// Printed by `crates/ngram/tests/nltk_reference.py` with NLTK 3.10.4's
/// `KneserNeyInterpolated(3, discount=0.75)` trained on the same text, its unigram level
/// replaced by the uniform-interpolated one our model uses (the script says exactly how).
const NLTK: [(&[u32], [f64; 6]); 10] = [
    (
        &[],
        [
            0.22794117647058823,
            0.16911764705882354,
            0.22794117647058823,
            0.16911764705882354,
            0.16911764705882354,
            0.03676470588235294,
        ],
    ),
    (
        &[2],
        [
            0.3006827731092437,
            0.12631302521008403,
            0.15782563025210083,
            0.2691701680672269,
            0.12631302521008403,
            0.019695378151260504,
        ],
    ),
    (
        &[5],
        [
            0.22794117647058823,
            0.16911764705882354,
            0.22794117647058823,
            0.16911764705882354,
            0.16911764705882354,
            0.03676470588235294,
        ],
    ),
    (
        &[0, 1],
        [
            0.14503676470588234,
            0.0380514705882353,
            0.611703431372549,
            0.09846813725490197,
            0.09846813725490197,
            0.008272058823529412,
        ],
    ),
    (
        &[1, 2],
        [
            0.2880120798319328,
            0.09473476890756302,
            0.18086922268907563,
            0.26437762605042014,
            0.15723476890756302,
            0.014771533613445378,
        ],
    ),
    (
        &[2, 2],
        [
            0.22551207983193278,
            0.34473476890756305,
            0.11836922268907563,
            0.20187762605042014,
            0.09473476890756302,
            0.014771533613445378,
        ],
    ),
    (
        &[3, 0],
        [
            0.021369485294117647,
            0.8596047794117647,
            0.03178615196078431,
            0.06793811274509803,
            0.015854779411764705,
            0.003446691176470588,
        ],
    ),
    (
        &[4, 4],
        [
            0.2542892156862745,
            0.21017156862745096,
            0.2542892156862745,
            0.12683823529411764,
            0.12683823529411764,
            0.027573529411764705,
        ],
    ),
    (
        &[5, 0],
        [
            0.08547794117647059,
            0.4384191176470588,
            0.12714460784313725,
            0.27175245098039214,
            0.06341911764705882,
            0.013786764705882353,
        ],
    ),
    (
        &[1, 5],
        [
            0.22794117647058823,
            0.16911764705882354,
            0.22794117647058823,
            0.16911764705882354,
            0.16911764705882354,
            0.03676470588235294,
        ],
    ),
];

#[test]
fn probabilities_match_nltk_kneser_ney() {
    let text: Vec<u32> = "01201301221030124012301420341023"
        .bytes()
        .map(|b| u32::from(b - b'0'))
        .collect();
    let model = train(&[&text], &config(3, 6, Discounts::Fixed(0.75))).unwrap();
    let mut dense = Vec::new();
    for (context, expected) in NLTK {
        model.next_distribution(context, &mut dense).unwrap();
        for (w, &want) in expected.iter().enumerate() {
            let p = model.prob(context, w as u32).unwrap();
            // Both sides sum the same few terms in f64; they differ by rounding only.
            assert!(
                (p - want).abs() < 1e-14,
                "p({w} | {context:?}) = {p}, NLTK {want}"
            );
            assert!(
                (dense[w] - want).abs() < 1e-14,
                "dense p({w} | {context:?})"
            );
        }
    }
}

#[test]
fn every_distribution_sums_to_one_seen_or_not() {
    let vocab = 50;
    let text = text(5_000, vocab, 1);
    for order in 1..=4 {
        let model = train(&[&text], &config(order, vocab, Discounts::Estimated)).unwrap();
        let mut p = Vec::new();
        // Every context of the text, and contexts never seen (high ids are rare).
        let mut contexts: Vec<Vec<u32>> = text.windows(3).step_by(7).map(<[u32]>::to_vec).collect();
        contexts.extend([vec![], vec![49], vec![49, 48, 47], vec![0, 49, 0]]);
        for context in &contexts {
            model.next_distribution(context, &mut p).unwrap();
            let sum: f64 = p.iter().sum();
            assert!(
                (sum - 1.0).abs() < 1e-12,
                "order {order}, {context:?}: {sum}"
            );
            assert!(
                p.iter().all(|&x| x > 0.0),
                "order {order}, {context:?}: a zero"
            );
        }
    }
}

/// The stored counts and the discounts, each against a count made here from the text.
#[test]
fn counts_and_discounts_match_a_direct_count() {
    let vocab = 30;
    let text = text(3_000, vocab, 2);
    let model = train(&[&text], &config(3, vocab, Discounts::Estimated)).unwrap();
    // Top order: raw trigram counts. Lower orders: distinct left neighbours.
    let mut raw: HashMap<&[u32], u32> = HashMap::new();
    for w in text.windows(3) {
        *raw.entry(w).or_default() += 1;
    }
    let continuation = |n: usize| {
        let mut left: HashMap<&[u32], HashSet<u32>> = HashMap::new();
        for w in text.windows(n + 1) {
            left.entry(&w[1..]).or_default().insert(w[0]);
        }
        left.into_values()
            .map(|s| s.len() as u32)
            .collect::<Vec<_>>()
    };
    let discount = |counts: &[u32]| {
        let n1 = counts.iter().filter(|&&c| c == 1).count() as f64;
        let n2 = counts.iter().filter(|&&c| c == 2).count() as f64;
        if n1 == 0.0 || n2 == 0.0 {
            ngram::FALLBACK_DISCOUNT
        } else {
            n1 / (n1 + 2.0 * n2)
        }
    };
    let raw_counts: Vec<u32> = raw.values().copied().collect();
    let expected = [
        discount(&continuation(1)),
        discount(&continuation(2)),
        discount(&raw_counts),
    ];
    assert_eq!(model.discounts(), expected);
    assert_eq!(
        model.sizes(),
        [continuation(1).len(), continuation(2).len(), raw.len()]
    );
}

#[test]
fn retraining_gives_the_same_bytes() {
    let text = text(4_000, 40, 3);
    let other = text[..1_000].to_vec();
    let train_once = || {
        train(&[&text, &other], &config(4, 40, Discounts::Estimated))
            .unwrap()
            .to_bytes()
    };
    assert_eq!(train_once(), train_once());
    let read = NgramModel::from_bytes(&train_once(), HASH).unwrap();
    assert_eq!(read.to_bytes(), train_once());
}

/// Two streams are two texts: no n-gram spans the join.
#[test]
fn streams_do_not_run_into_each_other() {
    let model = train(&[&[1, 2], &[3, 4]], &config(2, 5, Discounts::Fixed(0.5))).unwrap();
    // Bigrams 12 and 34; 2 and 4 are the only tokens that follow another. A join would add
    // the bigram 23.
    assert_eq!(model.sizes(), [2, 2]);
}

#[test]
fn bad_training_input_is_a_typed_error() {
    let text = [0, 1, 2];
    let fixed = Discounts::Fixed(0.5);
    assert_eq!(
        train(&[&text], &config(0, 3, fixed)).unwrap_err(),
        NgramError::UnsupportedOrder(0)
    );
    assert_eq!(
        train(&[&text], &config(5, 3, fixed)).unwrap_err(),
        NgramError::UnsupportedOrder(5)
    );
    assert_eq!(
        train(&[&text], &config(2, 0, fixed)).unwrap_err(),
        NgramError::UnsupportedVocabulary(0)
    );
    assert_eq!(
        train(&[&text], &config(2, 2, fixed)).unwrap_err(),
        NgramError::TokenOutOfRange { id: 2, vocab: 2 }
    );
    assert_eq!(
        train(&[&text], &config(2, 3, Discounts::Fixed(1.0))).unwrap_err(),
        NgramError::InvalidDiscount(1.0)
    );
    // Three tokens have no n-gram seen twice: no estimate, so kenlm's fallback.
    let tiny = train(&[&text], &config(2, 3, Discounts::Estimated)).unwrap();
    assert_eq!(tiny.discounts(), [ngram::FALLBACK_DISCOUNT; 2]);
    let mut bad_hash = config(2, 3, fixed);
    bad_hash.tokenizer_sha256 = "ABC".into();
    assert_eq!(
        train(&[&text], &bad_hash).unwrap_err(),
        NgramError::InvalidTokenizerHash("ABC".into())
    );
    let model = train(&[&text], &config(2, 3, fixed)).unwrap();
    assert_eq!(
        model.prob(&[7], 0).unwrap_err(),
        NgramError::TokenOutOfRange { id: 7, vocab: 3 }
    );
}
