//! Held-out evaluation with the reference forward pass (`model::Transformer`), so the
//! numbers are those of the shipped weights and the shipped code, and text samples.
//!
//! Bits per byte: the token stream of a slice (`<|endoftext|>` before every page) is cut
//! into non-overlapping windows of `context_len` inputs; every text token is predicted once,
//! from the tokens before it in its window. `bpb = Σ NLL (nats) / ln 2 / Σ UTF-8 bytes` of
//! the predicted tokens, which are exactly the bytes of the slice's pages (the
//! `<|endoftext|>` targets carry no bytes and are left out of both sums).
//!
//! The report's samples are [`release_samples`]: fixed prompts and policies, seeded.

use model::{ModelConfig, Transformer, Weights};
use policy::{NumpyRng, Policy, Snapshots, StepContext, Stepper};
use tokenizer::Tokenizer;

use crate::data::{windows, Slice};
use crate::release::Release;
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

/// A validation slice scored under both released weight files.
#[derive(Clone, Debug, PartialEq)]
pub struct HeldOutScore {
    pub language: String,
    pub f32: SliceScore,
    pub int8: SliceScore,
}

impl HeldOutScore {
    /// Scores `slice`, whose token stream is `stream`, under the f32 and int8 weights, and
    /// checks that the predicted tokens cover exactly the slice's bytes.
    pub fn of(
        slice: &Slice,
        stream: &[u32],
        config: &ModelConfig,
        release: &Release,
        tokenizer: &Tokenizer,
        threads: usize,
    ) -> Result<HeldOutScore, TrainError> {
        let language = &slice.language;
        let f = score_stream(
            language,
            config,
            &release.weights,
            tokenizer,
            stream,
            threads,
        )?;
        let q = score_stream(language, config, &release.int8, tokenizer, stream, threads)?;
        if f.bytes != slice.bytes() {
            return Err(TrainError::State(format!(
                "valid.{language}: scored {} bytes of {}",
                f.bytes,
                slice.bytes()
            )));
        }
        Ok(HeldOutScore {
            language: language.clone(),
            f32: f,
            int8: q,
        })
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

/// One text sample of the report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sample {
    /// Weights and policy, e.g. `f32, greedy`; a label ending in `seed` takes the seed's
    /// value after it in the report.
    pub how: &'static str,
    pub prompt: &'static str,
    /// The prompt followed by the generated text.
    pub text: String,
}

impl Sample {
    /// The sample's heading label: `how`, with the seed's value after a final `seed`.
    pub fn label(&self, seed: u64) -> String {
        if self.how.ends_with("seed") {
            format!("{} {seed}", self.how)
        } else {
            self.how.to_string()
        }
    }
}

/// Tokens generated after the prompt of each sample.
pub const SAMPLE_TOKENS: usize = 200;

/// The report's samples, from the released files as the lab loads them: greedy and at
/// temperature 0.7 in English from the f32 weights, the same warm policy from the int8
/// weights, and one in Basque.
pub fn release_samples(
    config: &ModelConfig,
    release: &Release,
    tokenizer: &Tokenizer,
    seed: u64,
) -> Result<Vec<Sample>, TrainError> {
    const F32: usize = 0;
    const INT8: usize = 1;
    let mut models = [
        Transformer::from_safetensors(config.clone(), &release.f32_bytes)?,
        Transformer::from_safetensors(config.clone(), &release.int8_bytes)?,
    ];
    let greedy = Policy {
        temperature: 0.0,
        ..Policy::default()
    };
    let warm = Policy {
        temperature: 0.7,
        ..Policy::default()
    };
    let plan = [
        ("f32, greedy", F32, "The ", &greedy),
        ("f32, temperature 0.7, seed", F32, "The ", &warm),
        ("int8, temperature 0.7, seed", INT8, "The ", &warm),
        ("f32, temperature 0.7, seed", F32, "Hautatu ", &warm),
    ];
    plan.into_iter()
        .map(|(how, model, prompt, policy)| {
            let model = &mut models[model];
            let text = sample(model, tokenizer, prompt, SAMPLE_TOKENS, policy, seed)?;
            Ok(Sample { how, prompt, text })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seeded_label_names_the_seed() {
        let sample = |how| Sample {
            how,
            prompt: "The ",
            text: String::new(),
        };
        assert_eq!(sample("f32, greedy").label(7), "f32, greedy");
        assert_eq!(
            sample("int8, temperature 0.7, seed").label(7),
            "int8, temperature 0.7, seed 7"
        );
    }

    #[test]
    fn nll_of_uniform_logits_is_ln_vocab() {
        let logits = vec![0.5f32; 8];
        assert!((negative_log_likelihood(&logits, 3) - 8f64.ln()).abs() < 1e-12);
    }
}
