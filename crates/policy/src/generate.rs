//! The generation loop: prefill the prompt, then one policy step per token, with every
//! token accounted for and a named reason for stopping.
//!
//! The loop is generic over the model ([`LanguageModel`]), the tokenizer ([`Vocabulary`]),
//! the clock ([`Clock`], so that this crate reads no time itself) and an [`Observer`] that
//! sees each step as it happens and may cancel the run.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::pipeline::{Snapshots, StepContext, Stepper};
use crate::record::{ArtifactId, RunConfig, RunRecord};
use crate::{NumpyRng, PolicyError, POLICY_VERSION};

/// A model that gives next-token logits: the whole prompt first, then one token at a time.
pub trait LanguageModel {
    fn id(&self) -> ArtifactId;
    fn vocab_size(&self) -> usize;
    /// The most tokens (prompt plus generated) the model can attend over.
    fn context_len(&self) -> usize;
    /// Runs the prompt and returns the logits at its last position.
    fn prefill(&mut self, prompt: &[u32]) -> Result<&[f32], String>;
    /// Appends one token and returns the logits that follow it.
    fn decode_step(&mut self, token: u32) -> Result<&[f32], String>;
}

/// A tokenizer: text to ids, and each id back to its bytes.
pub trait Vocabulary {
    fn id(&self) -> ArtifactId;
    fn encode(&self, text: &str) -> Vec<u32>;
    /// The bytes of one token; a token may hold part of a UTF-8 character.
    fn token_bytes(&self, id: u32) -> &[u8];
}

/// Microseconds from any fixed origin; the caller owns the clock.
pub trait Clock {
    fn now_us(&mut self) -> f64;
}

/// Sees each step as it is chosen; `cancelled` is asked before every model call.
pub trait Observer {
    fn on_step(&mut self, _step: &StepRecord) {}
    fn cancelled(&mut self) -> bool {
        false
    }
}

/// An observer that watches nothing and never cancels.
pub struct Unobserved;

impl Observer for Unobserved {}

/// Why generation stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// `max_tokens` tokens were generated.
    MaxTokens,
    /// The model chose the end-of-sequence token.
    Eos,
    /// The model chose one of the configured stop tokens.
    StopToken,
    /// The decoded text reached a stop string (which is trimmed with what follows it).
    StopSequence,
    /// Prompt plus generated tokens filled the model's context.
    ContextFull,
    /// The observer cancelled the run.
    Cancelled,
}

impl StopReason {
    /// The reason in words, for people.
    pub fn describe(self) -> &'static str {
        match self {
            StopReason::MaxTokens => "reached the maximum number of new tokens",
            StopReason::Eos => "the model chose the end-of-sequence token",
            StopReason::StopToken => "the model chose a stop token",
            StopReason::StopSequence => "the text reached a stop string",
            StopReason::ContextFull => "the context window is full",
            StopReason::Cancelled => "cancelled",
        }
    }
}

/// One alternative of a step: a token and its probability under the final policy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Alternative {
    pub id: u32,
    pub text: String,
    pub prob: f64,
}

/// The account of one chosen token.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    pub step: usize,
    pub token: u32,
    /// The token's bytes, lossily decoded (a partial UTF-8 character shows as U+FFFD).
    pub text: String,
    pub prob: f64,
    pub logprob: f64,
    /// The five most probable tokens of the final distribution.
    pub top: Vec<Alternative>,
    /// Entropy of the final distribution, in nats.
    pub entropy: f64,
    /// Tokens with non-zero probability in the final distribution.
    pub survivors: usize,
    /// The uniform draw that chose the token; `None` when greedy.
    pub draw: Option<f64>,
    pub model_us: f64,
    pub policy_us: f64,
}

/// Why a run could not be generated or replayed.
#[derive(Clone, Debug, Error, PartialEq)]
pub enum GenerateError {
    #[error(transparent)]
    Policy(#[from] PolicyError),
    #[error("the model failed: {0}")]
    Model(String),
    #[error("the model returned {got} logits, but its vocabulary has {expected} tokens")]
    LogitCount { expected: usize, got: usize },
    #[error("the prompt is {prompt} tokens long, more than the context of {context} tokens")]
    PromptTooLong { prompt: usize, context: usize },
    #[error("the prompt is empty: the model needs at least one token to start from")]
    EmptyPrompt,
    #[error("stop token id {id} is out of range for a vocabulary of {vocab} tokens")]
    StopTokenOutOfRange { id: u32, vocab: usize },
    #[error("this record was made with {kind} {recorded}, but {current} is loaded")]
    ArtifactMismatch {
        kind: &'static str,
        recorded: String,
        current: String,
    },
}

/// Generates one run and returns its record.
pub fn generate(
    model: &mut dyn LanguageModel,
    vocabulary: &dyn Vocabulary,
    config: &RunConfig,
    clock: &mut dyn Clock,
    observer: &mut dyn Observer,
) -> Result<RunRecord, GenerateError> {
    let vocab = model.vocab_size();
    config.policy.validate(vocab)?;
    if let Some(&id) = config.stop.tokens.iter().find(|&&id| id as usize >= vocab) {
        return Err(GenerateError::StopTokenOutOfRange { id, vocab });
    }
    let rendered_prompt = config.rendered_prompt();
    let prompt = vocabulary.encode(&rendered_prompt);
    if prompt.is_empty() {
        return Err(GenerateError::EmptyPrompt);
    }
    if prompt.len() > model.context_len() {
        return Err(GenerateError::PromptTooLong {
            prompt: prompt.len(),
            context: model.context_len(),
        });
    }

    let mut rng = NumpyRng::new(config.seed);
    let mut stepper = Stepper::default();
    let mut tokens = prompt.clone();
    let mut steps: Vec<StepRecord> = Vec::new();
    let mut output: Vec<u8> = Vec::new();
    let mut latencies = Vec::new();
    let mut ttft_us = None;
    let start = clock.now_us();

    let stop_reason = loop {
        if steps.len() >= config.max_tokens {
            break StopReason::MaxTokens;
        }
        if tokens.len() >= model.context_len() {
            break StopReason::ContextFull;
        }
        if observer.cancelled() {
            break StopReason::Cancelled;
        }
        let before_model = clock.now_us();
        let logits = match steps.last() {
            None => model.prefill(&prompt),
            Some(last) => model.decode_step(last.token),
        }
        .map_err(GenerateError::Model)?;
        if logits.len() != vocab {
            return Err(GenerateError::LogitCount {
                expected: vocab,
                got: logits.len(),
            });
        }
        let before_policy = clock.now_us();
        let context = StepContext::new(&tokens, prompt.len());
        let outcome = stepper.step(&config.policy, logits, context, &mut rng, Snapshots::Skip)?;
        let done = clock.now_us();
        ttft_us.get_or_insert(done - start);
        latencies.push(done - before_model);

        let text_of = |id: u32| String::from_utf8_lossy(vocabulary.token_bytes(id)).into_owned();
        let record = StepRecord {
            step: steps.len(),
            token: outcome.token,
            text: text_of(outcome.token),
            prob: outcome.prob,
            logprob: outcome.logprob(),
            top: outcome
                .top
                .iter()
                .map(|t| Alternative {
                    id: t.id,
                    text: text_of(t.id),
                    prob: t.prob,
                })
                .collect(),
            entropy: outcome.entropy,
            survivors: outcome.survivors,
            draw: outcome.draw,
            model_us: before_policy - before_model,
            policy_us: done - before_policy,
        };
        observer.on_step(&record);
        let token = record.token;
        steps.push(record);
        tokens.push(token);

        if config.policy.eos_token == Some(token) {
            break StopReason::Eos;
        }
        if config.stop.tokens.contains(&token) {
            break StopReason::StopToken;
        }
        let appended_from = output.len();
        output.extend_from_slice(vocabulary.token_bytes(token));
        if let Some(at) = find_stop_string(&output, appended_from, &config.stop.strings) {
            output.truncate(at);
            break StopReason::StopSequence;
        }
    };

    Ok(RunRecord {
        app_version: config.app_version.clone(),
        policy_version: POLICY_VERSION.to_string(),
        model: model.id(),
        tokenizer: vocabulary.id(),
        rendered_prompt,
        prompt_tokens: prompt,
        config: config.clone(),
        steps,
        output_text: String::from_utf8_lossy(&output).into_owned(),
        stop_reason,
        ttft_us: ttft_us.unwrap_or(0.0),
        token_latencies_us: latencies,
    })
}

/// The earliest start of a stop string that ends in the bytes appended at `appended_from`
/// (a stop string may span token boundaries, so the search reaches back before them).
fn find_stop_string(output: &[u8], appended_from: usize, stops: &[String]) -> Option<usize> {
    stops
        .iter()
        .filter(|s| !s.is_empty())
        .filter_map(|s| {
            let s = s.as_bytes();
            let from = appended_from.saturating_sub(s.len() - 1);
            output[from..]
                .windows(s.len())
                .position(|w| w == s)
                .map(|p| from + p)
        })
        .min()
}
