//! `decode-lab ngram train`: the n-gram draft trained on the training corpus with the model's
//! tokenizer, written into the model directory, and its held-out bits per byte on the same
//! tokens `eval` scores the transformer on.

use std::path::Path;

use ngram::{Discounts, NgramModel, TrainConfig};
use serde::Serialize;

use crate::error::CliError;
use crate::eval::SLICES;
use crate::files;
use crate::model_dir;
use crate::named::Named;

/// The training text, one stream per language (no n-gram spans the two).
const TRAINING: [&str; 2] = ["train.en.txt", "train.eu.txt"];

#[derive(Serialize)]
pub struct HeldOut {
    pub slice: String,
    pub tokens: usize,
    pub bytes: usize,
    pub bits_per_byte: f64,
}

#[derive(Serialize)]
pub struct TrainReport {
    /// `ngram-N`, as `speculate` names the draft.
    pub draft: String,
    pub file: String,
    pub file_bytes: usize,
    /// Stored n-grams per order, order 1 first.
    pub ngrams: Vec<usize>,
    pub discounts: Vec<f64>,
    pub slices: Vec<HeldOut>,
}

/// The draft's name in reports: `ngram-3` for an order-3 model.
pub fn name(model: &NgramModel) -> String {
    format!("ngram-{}", model.order())
}

pub fn train(
    dir: &Path,
    corpus: &Path,
    order: usize,
    out: &Named,
    max_tokens: usize,
) -> Result<TrainReport, CliError> {
    let mut inputs = model_dir::inputs(dir);
    inputs.extend(files::files_in("--corpus", corpus));
    files::check(std::slice::from_ref(out), &inputs)?;
    // Before the training and its measurement, not after them.
    files::writable(out)?;
    let (tokenizer, hash) = model_dir::load_tokenizer(dir)?;
    let streams = TRAINING
        .iter()
        .map(|file| files::read_text(&corpus.join(file)).map(|text| tokenizer.encode(&text)))
        .collect::<Result<Vec<_>, _>>()?;
    let config = TrainConfig {
        order,
        vocab: tokenizer.vocab_size() as u32,
        tokenizer_sha256: hash,
        discounts: Discounts::Estimated,
    };
    let views: Vec<&[u32]> = streams.iter().map(Vec::as_slice).collect();
    let model =
        ngram::train(&views, &config).map_err(|source| CliError::NgramOrder { order, source })?;
    let bytes = model.to_bytes();
    let context = model_dir::config(dir)?.context_len;
    let mut slices = Vec::new();
    for (code, name, file) in SLICES {
        let text = files::read_text(&corpus.join(file))?;
        let all = tokenizer.encode(&text);
        let tokens = &all[..all.len().min(max_tokens)];
        let (predicted, byte_count, bits_per_byte) =
            held_out_bits(&model, &tokenizer, tokens, context)?;
        // An empty measurement is no measurement: 0 bits per byte would read as perfect.
        if predicted == 0 {
            return Err(CliError::NothingToScore {
                path: corpus.join(file),
                tokens: all.len(),
                max_tokens: (max_tokens < usize::MAX).then_some(max_tokens),
            });
        }
        slices.push(HeldOut {
            slice: format!("{code}: {name}"),
            tokens: predicted,
            bytes: byte_count,
            bits_per_byte,
        });
    }
    // Written only once it is measured: a failed run leaves the old draft as it was.
    files::write(out, &bytes)?;
    Ok(TrainReport {
        draft: name(&model),
        file: out.path.display().to_string(),
        file_bytes: bytes.len(),
        ngrams: model.sizes(),
        discounts: model.discounts().to_vec(),
        slices,
    })
}

/// (predicted tokens, their bytes, bits per byte) of `model` on `tokens` at the positions
/// `eval` scores: each context-length window predicts its tokens after the first, seeing only
/// the window, so the two models are compared on one text.
pub fn held_out_bits(
    model: &NgramModel,
    tokenizer: &tokenizer::Tokenizer,
    tokens: &[u32],
    context: usize,
) -> Result<(usize, usize, f64), CliError> {
    let (mut bits, mut predicted, mut byte_count) = (0.0f64, 0usize, 0usize);
    for window in tokens.chunks(context).filter(|w| w.len() > 1) {
        for i in 1..window.len() {
            let p = model.prob(&window[..i], window[i])?;
            bits -= p.log2();
            predicted += 1;
            byte_count += policy::Vocabulary::token_bytes(tokenizer, window[i]).len();
        }
    }
    Ok((predicted, byte_count, bits / byte_count.max(1) as f64))
}

/// The report for people.
pub fn table(report: &TrainReport) -> String {
    let mut out = format!(
        "{} written to {} ({} bytes; n-grams per order {:?}; discounts {:?})\n\nslice | tokens | bits/byte\n",
        report.draft, report.file, report.file_bytes, report.ngrams, report.discounts
    );
    for s in &report.slices {
        out += &format!("{} | {} | {:.3}\n", s.slice, s.tokens, s.bits_per_byte);
    }
    out
}
