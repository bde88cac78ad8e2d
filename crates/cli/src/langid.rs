//! `decode-lab langid train`: the language identifier trained on the training corpus's
//! slices, written beside the model (`langid.bin`), and its held-out accuracy and novelty per
//! slice on the validation pages, whole and cut to prompt-sized prefixes, since the observe
//! report classifies prompts.
//!
//! The file lives in the model directory with the other artifacts derived from the corpus
//! (`eval.json`, `draft.ngram`), but `config.json` does not list it: it is tied to the corpus,
//! not to the model's tokenizer or weights, records the SHA-256 of each slice's training text
//! itself, and checks itself with its SHA-256 trailer. The settings are the library's
//! defaults (`langid::TrainConfig::default`), so a retrain makes the same file.

use std::path::Path;

use langid::held_out::{self, Tally};
use langid::{LangId, TrainConfig};
use serde::Serialize;

use crate::error::CliError;
use crate::eval::SLICES;
use crate::files;
use crate::named::Named;
use crate::{model_dir, LangidTrainArgs};

/// The prompt-sized prefixes the held-out pages are also classified by, in bytes.
const PREFIXES: [usize; 3] = [16, 32, 64];

#[derive(Serialize)]
pub struct Rate {
    /// Whole pages (`null`) or the first this many bytes, cut at a character boundary.
    pub prefix_bytes: Option<usize>,
    pub pages: usize,
    pub correct: usize,
    /// Pages that got no language (no n-gram the identifier keeps).
    pub unknown: usize,
    pub accuracy: f64,
    /// The share of the pages' (or prefixes') bytes in characters or n-grams unseen in
    /// training: the baseline of the observe report's input quality.
    pub unseen_share: f64,
}

impl From<&Tally> for Rate {
    fn from(t: &Tally) -> Rate {
        Rate {
            prefix_bytes: t.prefix_bytes,
            pages: t.pages,
            correct: t.correct,
            unknown: t.unknown,
            accuracy: t.accuracy(),
            unseen_share: t.unseen_share(),
        }
    }
}

#[derive(Serialize)]
pub struct SliceReport {
    pub slice: String,
    /// The SHA-256 of the training text, as the file records it.
    pub training_sha256: String,
    /// Whole pages first, then each prefix of [`PREFIXES`].
    pub held_out: Vec<Rate>,
}

#[derive(Serialize)]
pub struct TrainReport {
    pub file: String,
    pub file_bytes: usize,
    pub order: usize,
    pub min_count: u32,
    pub smoothing: f64,
    /// Kept n-grams per order, order 1 (the alphabet) first.
    pub ngrams: Vec<usize>,
    pub slices: Vec<SliceReport>,
}

/// Trains on `train.{code}.txt` of each slice with the shipped settings, writes the file to
/// `out`, and classifies `valid.{code}.txt`'s pages.
fn train(corpus: &Path, out: &Named) -> Result<TrainReport, CliError> {
    files::check(
        std::slice::from_ref(out),
        &files::files_in("--corpus", corpus),
    )?;
    // Before the training, not after it.
    files::writable(out)?;
    let training = SLICES
        .iter()
        .map(|(code, _, _)| files::read_text(&corpus.join(format!("train.{code}.txt"))))
        .collect::<Result<Vec<_>, _>>()?;
    let slices: Vec<(&str, &str)> = SLICES
        .iter()
        .zip(&training)
        .map(|((code, _, _), text)| (*code, text.as_str()))
        .collect();
    let config = TrainConfig::default();
    let model = LangId::train(&slices, &config)?;
    let bytes = model.to_bytes();
    files::write(out, &bytes)?;

    let valid = SLICES
        .iter()
        .map(|(_, _, file)| files::read_text(&corpus.join(file)))
        .collect::<Result<Vec<_>, _>>()?;
    let valid: Vec<(&str, &str)> = SLICES
        .iter()
        .zip(&valid)
        .map(|((code, _, _), text)| (*code, text.as_str()))
        .collect();
    let runs: Vec<Vec<Tally>> = std::iter::once(None)
        .chain(PREFIXES.map(Some))
        .map(|prefix| held_out::tally(&model, &valid, prefix))
        .collect();
    let slices = model
        .slices()
        .iter()
        .enumerate()
        .map(|(i, slice)| SliceReport {
            slice: slice.code.clone(),
            training_sha256: slice.training_sha256.clone(),
            held_out: runs.iter().map(|run| Rate::from(&run[i])).collect(),
        })
        .collect();
    Ok(TrainReport {
        file: out.path.display().to_string(),
        file_bytes: bytes.len(),
        order: config.order,
        min_count: config.min_count,
        smoothing: config.smoothing,
        ngrams: model.ngrams_per_order(),
        slices,
    })
}

/// `decode-lab langid train`: the report as a table, or as JSON with `--json`.
pub fn run_train(args: &LangidTrainArgs) -> Result<String, CliError> {
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| model_dir::default_dir().join(model_dir::LANGID_FILE));
    let report = train(&args.corpus, &Named::new("--out", out))?;
    if args.json {
        Ok(serde_json::to_string(&report)?)
    } else {
        Ok(table(&report))
    }
}

fn table(report: &TrainReport) -> String {
    let mut out = format!(
        "language identifier written to {} ({} bytes; character n-grams of 1 to {}, kept from \
         {} occurrences; per order {:?}; smoothing {})\n",
        report.file,
        report.file_bytes,
        report.order,
        report.min_count,
        report.ngrams,
        report.smoothing
    );
    out += &grid(
        report,
        "held-out accuracy (correct/pages, unknown)",
        |rate| {
            format!(
                "{:.2} % ({}/{}, {})",
                100.0 * rate.accuracy,
                rate.correct,
                rate.pages,
                rate.unknown
            )
        },
    );
    out += &grid(
        report,
        "held-out bytes in characters or n-grams unseen in training",
        |rate| format!("{:.2} %", 100.0 * rate.unseen_share),
    );
    out
}

/// One row per slice, one column per cut of the pages.
fn grid(report: &TrainReport, title: &str, cell: impl Fn(&Rate) -> String) -> String {
    let mut out = format!("\n{title}\nslice | whole pages");
    for n in PREFIXES {
        out += &format!(" | first {n} bytes");
    }
    out.push('\n');
    for slice in &report.slices {
        out += &slice.slice;
        for rate in &slice.held_out {
            out += " | ";
            out += &cell(rate);
        }
        out.push('\n');
    }
    out
}
