//! `decode-lab eval`: per language slice and per weight precision, held-out bits per byte
//! and top-1 accuracy (teacher-forced), and for a few decoding policies, how diverse and how
//! repetitive the generated text is. The rare-language slice is always its own row.

use std::collections::HashSet;
use std::path::Path;

use model::Precision;
use policy::Policy;
use serde::Serialize;

use capacity::EvalSlice;

use crate::error::CliError;
use crate::files;
use crate::model_dir;

/// The slices: language code, name, held-out file under the corpus directory.
pub const SLICES: [(&str, &str, &str); 2] = [
    ("en", "English", "valid.en.txt"),
    ("eu", "Basque (rare-language slice)", "valid.eu.txt"),
];

/// Prompts and seeds the policy comparison generates from.
const PROMPTS: [&str; 4] = ["The ", "To insert a ", "You can ", "Hautatu "];
const SEEDS: [u64; 3] = [0, 1, 2];

/// Fewer predicted tokens than this in a slice give a bits-per-byte figure that measures
/// nothing; the evaluation refuses rather than print it.
pub const MIN_PREDICTED_TOKENS: usize = 32;

#[derive(Serialize)]
pub struct PolicyScore {
    pub policy: String,
    pub precision: Precision,
    /// Distinct token bigrams over all bigrams of all generations.
    pub distinct_2: f64,
    /// Share of generated token 4-grams that already occurred earlier in the same generation.
    pub repetition_rate: f64,
}

#[derive(Serialize)]
pub struct Report {
    pub model: String,
    /// One row per slice and precision, in the form the capacity planner reads
    /// (`models/decode-lab-tiny-v1/eval.json`).
    pub slices: Vec<EvalSlice>,
    pub policies: Vec<PolicyScore>,
}

fn policies() -> Vec<(&'static str, Policy)> {
    vec![
        (
            "greedy",
            Policy {
                temperature: 0.0,
                ..Policy::default()
            },
        ),
        (
            "temperature 0.7, top-k 40",
            Policy {
                temperature: 0.7,
                top_k: 40,
                ..Policy::default()
            },
        ),
        (
            "top-p 0.9",
            Policy {
                top_p: 0.9,
                ..Policy::default()
            },
        ),
        (
            "temperature 1.5",
            Policy {
                temperature: 1.5,
                ..Policy::default()
            },
        ),
    ]
}

pub fn evaluate(
    dir: &Path,
    corpus: &Path,
    max_tokens: usize,
    new_tokens: usize,
) -> Result<Report, CliError> {
    if max_tokens <= MIN_PREDICTED_TOKENS {
        return Err(CliError::TooSmall {
            flag: "--max-tokens",
            value: max_tokens,
            why: format!(
                "is too few: a slice needs more than {MIN_PREDICTED_TOKENS} held-out tokens \
                 for its bits per byte to mean anything"
            ),
        });
    }
    if new_tokens < 2 {
        return Err(CliError::TooSmall {
            flag: "--new-tokens",
            value: new_tokens,
            why: "is too few: distinct-2 and the repetition rate need at least 2 generated \
                  tokens"
                .into(),
        });
    }
    let mut report = Report {
        model: model_dir::config(dir)?.name,
        slices: Vec::new(),
        policies: Vec::new(),
    };
    for precision in Precision::ALL {
        let mut loaded = model_dir::load(dir, precision)?;
        for (code, name, file) in SLICES {
            let path = corpus.join(file);
            let text = files::read_text(&path)?;
            let tokens = loaded.tokenizer.encode(&text);
            let tokens = &tokens[..tokens.len().min(max_tokens)];
            let score = teacher_forced(&mut loaded, tokens)?;
            if score.0 < MIN_PREDICTED_TOKENS {
                return Err(CliError::TooShortToEvaluate {
                    path,
                    bytes: text.len(),
                    predicted: score.0,
                    needed: MIN_PREDICTED_TOKENS,
                });
            }
            report.slices.push(EvalSlice {
                slice: format!("{code}: {name}"),
                precision: precision.to_string(),
                tokens: score.0,
                bytes: score.1,
                bits_per_byte: score.2,
                top1_accuracy: score.3,
            });
        }
        for (name, policy) in policies() {
            let eos = loaded.tokenizer.end_of_text();
            let mut bigrams = Vec::new();
            let (mut repeated, mut fourgrams) = (0usize, 0usize);
            for prompt in PROMPTS {
                for seed in SEEDS {
                    let record = model_dir::generate(
                        &mut loaded.model,
                        &loaded.tokenizer,
                        "{prompt}",
                        prompt.into(),
                        Policy {
                            eos_token: Some(eos),
                            ..policy.clone()
                        },
                        seed,
                        new_tokens,
                    )?;
                    let ids: Vec<u32> = record.steps.iter().map(|s| s.token).collect();
                    bigrams.extend(ids.windows(2).map(|w| (w[0], w[1])));
                    let (grams, seen_before) = policy::compare::repeated_fourgrams(&ids);
                    fourgrams += grams;
                    repeated += seen_before;
                }
            }
            if bigrams.is_empty() {
                return Err(CliError::NoBigrams {
                    policy: name,
                    new_tokens,
                });
            }
            let distinct: HashSet<_> = bigrams.iter().collect();
            report.policies.push(PolicyScore {
                policy: name.into(),
                precision,
                distinct_2: distinct.len() as f64 / bigrams.len() as f64,
                repetition_rate: repeated as f64 / fourgrams.max(1) as f64,
            });
        }
    }
    Ok(report)
}

/// (predicted tokens, their bytes, bits per byte, top-1 accuracy) over non-overlapping
/// context-length windows; each window predicts its tokens after the first.
pub fn teacher_forced(
    loaded: &mut model_dir::Loaded,
    tokens: &[u32],
) -> Result<(usize, usize, f64, f64), CliError> {
    let context = loaded.model.config().context_len;
    let vocab = loaded.model.config().vocab_size;
    let (mut nats, mut bytes, mut predicted, mut correct) = (0.0f64, 0usize, 0usize, 0usize);
    for window in tokens.chunks(context).filter(|w| w.len() > 1) {
        let logits = loaded.model.prefill_all(window)?;
        for (i, &target) in window.iter().enumerate().skip(1) {
            let row = &logits[(i - 1) * vocab..i * vocab];
            let max = row.iter().fold(f32::NEG_INFINITY, |m, &l| m.max(l));
            let sum: f64 = row.iter().map(|&l| f64::from(l - max).exp()).sum();
            nats += sum.ln() - f64::from(row[target as usize] - max);
            let argmax = row
                .iter()
                .enumerate()
                .fold(0, |best, (j, &l)| if l > row[best] { j } else { best });
            correct += usize::from(argmax == target as usize);
            predicted += 1;
            bytes += policy::Vocabulary::token_bytes(&loaded.tokenizer, target).len();
        }
    }
    let bits_per_byte = nats / std::f64::consts::LN_2 / bytes.max(1) as f64;
    Ok((
        predicted,
        bytes,
        bits_per_byte,
        correct as f64 / predicted.max(1) as f64,
    ))
}

/// The report as a table for people: the rare slice on its own rows, with its gap.
pub fn table(report: &Report) -> String {
    let mut out = format!(
        "model {}\n\nslice | weights | tokens | bits/byte | top-1 accuracy\n",
        report.model
    );
    for s in &report.slices {
        out += &format!(
            "{} | {} | {} | {:.3} | {:.3}\n",
            s.slice, s.precision, s.tokens, s.bits_per_byte, s.top1_accuracy
        );
    }
    for precision in Precision::ALL {
        let find = |code: &str| {
            report
                .slices
                .iter()
                .find(|s| s.precision == precision.name() && s.slice.starts_with(code))
        };
        if let (Some(en), Some(eu)) = (find("en"), find("eu")) {
            out += &format!(
                "{precision}: the rare slice costs {:+.3} bits/byte against English\n",
                eu.bits_per_byte - en.bits_per_byte
            );
        }
    }
    out += "\npolicy | weights | distinct-2 | repetition rate\n";
    for p in &report.policies {
        out += &format!(
            "{} | {} | {:.3} | {:.3}\n",
            p.policy, p.precision, p.distinct_2, p.repetition_rate
        );
    }
    out
}
