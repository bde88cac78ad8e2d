//! Held-out evaluation with the reference forward pass (`model::Transformer`), so the
//! numbers are those of the shipped weights and the shipped code, and text samples.
//!
//! Bits per byte: the token stream of a slice (`<|endoftext|>` before every page) is cut
//! into non-overlapping windows of `context_len` inputs; every text token is predicted once,
//! from the tokens before it in its window. `bpb = Σ NLL (nats) / ln 2 / Σ UTF-8 bytes` of
//! the predicted tokens, which are exactly the bytes of the slice's pages (the
//! `<|endoftext|>` targets carry no bytes and are left out of both sums).

use model::{ModelConfig, Transformer, Weights};
use policy::{NumpyRng, Policy, Snapshots, StepContext, Stepper};
use tokenizer::Tokenizer;

use crate::data::windows;
use crate::TrainError;

/// One slice's held-out score.
#[derive(Clone, Debug, PartialEq)]
pub struct SliceScore {
    pub slice: String,
    /// Tokens predicted (text tokens only).
    pub tokens: usize,
    pub bytes: usize,
    pub nll_nats: f64,
}

impl SliceScore {
    pub fn bits_per_byte(&self) -> f64 {
        self.nll_nats / std::f64::consts::LN_2 / self.bytes as f64
    }

    pub fn nats_per_token(&self) -> f64 {
        self.nll_nats / self.tokens as f64
    }
}

/// Scores `stream` under `weights` with the reference forward pass, on `threads` threads.
pub fn score_stream(
    slice: &str,
    config: &ModelConfig,
    weights: &Weights,
    tokenizer: &Tokenizer,
    stream: &[u32],
    threads: usize,
) -> Result<SliceScore, TrainError> {
    let eot = tokenizer.end_of_text();
    let mut byte_len = vec![0usize; config.vocab_size];
    for (id, len) in byte_len.iter_mut().enumerate() {
        if id as u32 != eot {
            *len = tokenizer
                .token_bytes(id as u32)
                .map_err(|e| TrainError::Tokenizer(e.to_string()))?
                .len();
        }
    }
    let all = windows(stream, config.context_len);
    let threads = threads.max(1);
    let per = all.len().div_ceil(threads).max(1);
    let parts: Vec<Result<(usize, usize, f64), TrainError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = all
            .chunks(per)
            .map(|chunk| {
                let byte_len = &byte_len;
                scope.spawn(move || {
                    let mut model =
                        Transformer::new(config.clone(), weights.clone(), String::new());
                    let (mut tokens, mut bytes, mut nll) = (0usize, 0usize, 0.0f64);
                    for (inputs, targets) in chunk {
                        let logits = model.prefill_all(inputs)?;
                        for (row, &target) in logits.chunks_exact(config.vocab_size).zip(*targets) {
                            if target == eot {
                                continue;
                            }
                            nll += negative_log_likelihood(row, target as usize);
                            tokens += 1;
                            bytes += byte_len[target as usize];
                        }
                    }
                    Ok((tokens, bytes, nll))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(TrainError::State("an evaluation thread panicked".into()))
                })
            })
            .collect()
    });
    let mut score = SliceScore {
        slice: slice.to_string(),
        tokens: 0,
        bytes: 0,
        nll_nats: 0.0,
    };
    for part in parts {
        let (t, b, n) = part?;
        score.tokens += t;
        score.bytes += b;
        score.nll_nats += n;
    }
    Ok(score)
}

/// `−ln softmax(logits)[target]`, in f64.
pub fn negative_log_likelihood(logits: &[f32], target: usize) -> f64 {
    let max = logits.iter().fold(f32::NEG_INFINITY, |m, &x| m.max(x)) as f64;
    let sum: f64 = logits.iter().map(|&x| (x as f64 - max).exp()).sum();
    max + sum.ln() - logits[target] as f64
}

/// Continues `prompt` by `tokens` tokens with the reference model under `policy` (seeded),
/// and returns the prompt followed by the generated text.
pub fn sample(
    model: &mut Transformer,
    tokenizer: &Tokenizer,
    prompt: &str,
    tokens: usize,
    policy: &Policy,
    seed: u64,
) -> Result<String, TrainError> {
    let mut ids = tokenizer.encode(prompt);
    let prompt_len = ids.len();
    let mut rng = NumpyRng::new(seed);
    let mut stepper = Stepper::default();
    let budget = tokens.min(model.config().context_len.saturating_sub(prompt_len));
    let mut logits = model.prefill(&ids)?.to_vec();
    for i in 0..budget {
        let outcome = stepper
            .step(
                policy,
                &logits,
                StepContext::new(&ids, prompt_len),
                &mut rng,
                Snapshots::Skip,
            )
            .map_err(|e| TrainError::State(format!("the policy step failed: {e}")))?;
        ids.push(outcome.token);
        if i + 1 < budget {
            logits = model.decode_step(outcome.token)?.to_vec();
        }
    }
    tokenizer
        .decode_lossy(&ids)
        .map_err(|e| TrainError::Tokenizer(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nll_of_uniform_logits_is_ln_vocab() {
        let logits = vec![0.5f32; 8];
        assert!((negative_log_likelihood(&logits, 3) - 8f64.ln()).abs() < 1e-12);
    }
}
