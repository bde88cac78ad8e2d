//! The generation loop: prefill the prompt, then one policy step per token, with every
//! token accounted for and a named reason for stopping.
//!
//! The loop is generic over the model ([`LanguageModel`]), the tokenizer ([`Vocabulary`]),
//! the clock ([`Clock`], so that this crate reads no time itself) and an [`Observer`] that
//! sees each step as it happens and may cancel the run.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::model_view::{model_view, MODEL_TOP};
use crate::pipeline::{Snapshots, StepContext, Stepper, TokenProb};
use crate::record::{ArtifactId, Backend, RecordError, RunConfig, RunRecord, PROMPT_SLOT};
use crate::{NumpyRng, Policy, PolicyError, Shortest, StepOutcome, POLICY_VERSION};

/// A model that gives next-token logits: the whole prompt first, then one token at a time.
pub trait LanguageModel {
    /// Why a call of the model failed: the model's own error, which the loop hands on
    /// whole in [`GenerateError::Model`] (this crate knows no model's errors).
    type Error: std::error::Error + Send + Sync + 'static;

    fn id(&self) -> ArtifactId;
    fn vocab_size(&self) -> usize;
    /// The most tokens (prompt plus generated) the model can attend over.
    fn context_len(&self) -> usize;
    /// Runs the prompt and returns the logits at its last position.
    fn prefill(&mut self, prompt: &[u32]) -> Result<&[f32], Self::Error>;
    /// Appends one token and returns the logits that follow it.
    fn decode_step(&mut self, token: u32) -> Result<&[f32], Self::Error>;
    /// What runs the model, for the run record.
    fn backend(&self) -> Backend {
        Backend::cpu_reference()
    }

    /// Runs `call` and takes the policy step on the model's own device, so that only the
    /// chosen token and its account come back instead of the logits. `draw` is the uniform
    /// the step must use when it samples (the next one of the run's generator stream).
    /// `None` means "not here": the caller then asks for logits and steps on the host; the
    /// call must not have run. The default takes no step anywhere.
    fn choose_on_device(
        &mut self,
        _call: ModelCall<'_>,
        _policy: &Policy,
        _draw: Option<f64>,
    ) -> Option<Result<StepOutcome, Self::Error>> {
        None
    }
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
    /// The reason's name in a record: `max_tokens`, `eos`, …
    pub fn name(self) -> &'static str {
        match self {
            StopReason::MaxTokens => "max_tokens",
            StopReason::Eos => "eos",
            StopReason::StopToken => "stop_token",
            StopReason::StopSequence => "stop_sequence",
            StopReason::ContextFull => "context_full",
            StopReason::Cancelled => "cancelled",
        }
    }

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
    /// Tokens that survived every filter (see [`StepOutcome::survivors`]).
    pub survivors: usize,
    /// The uniform draw that chose the token; `None` (absent in JSON, never `null`) when
    /// greedy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draw: Option<f64>,
    /// The token's probability under the model's own distribution (softmax of the logits at
    /// temperature 1, before any constraint; [`crate::model_view`]). Absent in records made
    /// before it was recorded, as are the next two.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_prob: Option<f64>,
    /// Its natural logarithm, exact where `model_prob` underflows to 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_logprob: Option<f64>,
    /// The model's five most probable tokens, before the policy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub model_top: Vec<Alternative>,
    /// Mirostat's μ at this step, the surprise in bits above which it truncated (absent
    /// without mirostat); each step's follows from the one before, so a replay checks it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mirostat_mu: Option<f64>,
    pub model_us: f64,
    pub policy_us: f64,
}

/// Why a run could not be generated or replayed.
#[derive(Clone, Debug, Error)]
pub enum GenerateError {
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// The model's own [`LanguageModel::Error`], kept whole (`downcast_ref` gives it back).
    /// Its words are in this error's own, so it is not repeated as the `source`.
    #[error("the model failed: {0}")]
    Model(Arc<dyn std::error::Error + Send + Sync>),
    #[error("the model returned {got} logits, but its vocabulary has {expected} tokens")]
    LogitCount { expected: usize, got: usize },
    #[error("the prompt is {prompt} tokens long, more than the context of {context} tokens")]
    PromptTooLong { prompt: usize, context: usize },
    #[error("the prompt is empty: the model needs at least one token to start from")]
    EmptyPrompt,
    /// Refused before the prompt is rendered, so that no absurd size is ever allocated.
    #[error(
        "the prompt in its template would be {bytes} bytes, more than a context of {context} \
         tokens can hold: at most {limit} bytes, since no token is longer than {token_bytes} bytes"
    )]
    PromptTooLarge {
        /// `usize::MAX` when the size does not fit in a `usize`.
        bytes: usize,
        context: usize,
        limit: usize,
        token_bytes: usize,
    },
    #[error("stop token id {id} is out of range for a vocabulary of {vocab} tokens")]
    StopTokenOutOfRange { id: u32, vocab: usize },
    /// A template without the slot would drop the prompt; two slots would repeat it.
    #[error(
        "the prompt template holds {{prompt}} {slots} times: it must hold it exactly once, \
         where the prompt goes"
    )]
    TemplateSlots { slots: usize },
    #[error("stop string {index} is empty: a stop string must hold at least one character")]
    EmptyStopString { index: usize },
    #[error("max tokens is 0: a run must be allowed at least 1 new token")]
    NoNewTokens,
    #[error("this record was made with {kind} {recorded}, but {current} is loaded")]
    ArtifactMismatch {
        kind: &'static str,
        recorded: String,
        current: String,
    },
    /// A record that no run could have written, refused before replaying it.
    #[error("this run record is inconsistent: {0}")]
    Record(#[from] RecordError),
    /// A step taken on a device reported a number that no step gives.
    #[error(
        "the device's step reported {field} {}, but it must be {expected}",
        Shortest(*.value)
    )]
    DeviceOutcome {
        field: &'static str,
        value: f64,
        expected: &'static str,
    },
}

impl GenerateError {
    /// A model's failure, as [`GenerateError::Model`].
    pub fn model(error: impl std::error::Error + Send + Sync + 'static) -> GenerateError {
        GenerateError::Model(Arc::new(error))
    }
}

/// What the model must run next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModelCall<'a> {
    /// The whole prompt, from an empty cache.
    Prefill(&'a [u32]),
    /// One more token at the next position.
    Decode(u32),
}

/// One run in progress, driven from outside: ask [`next_call`](Self::next_call) what the
/// model must run, run it however the model runs (synchronously, or awaiting a GPU), hand
/// the logits to [`accept`](Self::accept), and [`finish`](Self::finish) when `next_call`
/// says the run has stopped. [`generate`] is this loop for a synchronous model; the browser
/// drives the same machine from an async task, so both make the same record.
pub struct Generation<'v> {
    vocabulary: &'v dyn Vocabulary,
    config: RunConfig,
    vocab: usize,
    context_len: usize,
    rendered_prompt: String,
    prompt: Vec<u32>,
    tokens: Vec<u32>,
    rng: NumpyRng,
    stepper: Stepper,
    /// Mirostat's μ for the next step (`None` before the first, or without mirostat).
    mirostat_mu: Option<f64>,
    steps: Vec<StepRecord>,
    output: Vec<u8>,
    latencies: Vec<f64>,
    ttft_us: Option<f64>,
    start_us: f64,
    stop_reason: Option<StopReason>,
    /// The stop string that ended the run, if one did.
    stop_string: Option<String>,
    /// The end-of-sequence or stop token that ended the run, if one did.
    stop_token: Option<u32>,
}

impl<'v> Generation<'v> {
    /// Checks the configuration against the model's vocabulary and context, and encodes the
    /// prompt. `now_us` is when the run starts (time to first token counts from it).
    pub fn new(
        vocab: usize,
        context_len: usize,
        vocabulary: &'v dyn Vocabulary,
        config: &RunConfig,
        now_us: f64,
    ) -> Result<Generation<'v>, GenerateError> {
        config.policy.validate(vocab)?;
        let slots = config.prompt_template.matches(PROMPT_SLOT).count();
        if slots != 1 {
            return Err(GenerateError::TemplateSlots { slots });
        }
        if let Some(&id) = config.stop.tokens.iter().find(|&&id| id as usize >= vocab) {
            return Err(GenerateError::StopTokenOutOfRange { id, vocab });
        }
        if let Some(index) = config.stop.strings.iter().position(String::is_empty) {
            return Err(GenerateError::EmptyStopString { index });
        }
        if config.max_tokens == 0 {
            return Err(GenerateError::NoNewTokens);
        }
        // A prompt longer than the context times the longest token cannot fit; a template
        // read from a file could otherwise ask for more memory than exists.
        let token_bytes = (0..vocab)
            .map(|id| vocabulary.token_bytes(id as u32).len())
            .max()
            .unwrap_or(0);
        let limit = context_len.saturating_mul(token_bytes);
        let bytes = config.rendered_len().unwrap_or(usize::MAX);
        if bytes > limit {
            return Err(GenerateError::PromptTooLarge {
                bytes,
                context: context_len,
                limit,
                token_bytes,
            });
        }
        let rendered_prompt = config.rendered_prompt();
        let prompt = vocabulary.encode(&rendered_prompt);
        if prompt.is_empty() {
            return Err(GenerateError::EmptyPrompt);
        }
        if prompt.len() > context_len {
            return Err(GenerateError::PromptTooLong {
                prompt: prompt.len(),
                context: context_len,
            });
        }
        Ok(Generation {
            vocabulary,
            config: config.clone(),
            vocab,
            context_len,
            rendered_prompt,
            tokens: prompt.clone(),
            prompt,
            rng: NumpyRng::new(config.seed),
            stepper: Stepper::default(),
            mirostat_mu: None,
            steps: Vec::new(),
            output: Vec::new(),
            latencies: Vec::new(),
            ttft_us: None,
            start_us: now_us,
            stop_reason: None,
            stop_string: None,
            stop_token: None,
        })
    }

    /// The prompt's token ids.
    pub fn prompt(&self) -> &[u32] {
        &self.prompt
    }

    /// The steps chosen so far.
    pub fn steps(&self) -> &[StepRecord] {
        &self.steps
    }

    /// What the model must run next, or `None` once the run has stopped (the observer is
    /// asked whether to cancel before every model call).
    pub fn next_call(&mut self, observer: &mut dyn Observer) -> Option<ModelCall<'_>> {
        if self.stop_reason.is_none() {
            if self.steps.len() >= self.config.max_tokens {
                self.stop_reason = Some(StopReason::MaxTokens);
            } else if self.tokens.len() >= self.context_len {
                self.stop_reason = Some(StopReason::ContextFull);
            } else if observer.cancelled() {
                self.stop_reason = Some(StopReason::Cancelled);
            }
        }
        if self.stop_reason.is_some() {
            return None;
        }
        Some(match self.steps.last() {
            None => ModelCall::Prefill(&self.prompt),
            Some(last) => ModelCall::Decode(last.token),
        })
    }

    /// Chooses the next token from the logits of the last [`ModelCall`], which started at
    /// `model_started_us` on `clock`, and shows the step to the observer.
    pub fn accept(
        &mut self,
        logits: &[f32],
        model_started_us: f64,
        clock: &mut dyn Clock,
        observer: &mut dyn Observer,
    ) -> Result<&StepRecord, GenerateError> {
        if logits.len() != self.vocab {
            return Err(GenerateError::LogitCount {
                expected: self.vocab,
                got: logits.len(),
            });
        }
        let before_policy = clock.now_us();
        let context =
            StepContext::new(&self.tokens, self.prompt.len()).with_mirostat_mu(self.mirostat_mu);
        let mut outcome = self.stepper.step(
            &self.config.policy,
            logits,
            context,
            &mut self.rng,
            Snapshots::Skip,
        )?;
        outcome.model = Some(model_view(logits, outcome.token)?);
        self.record(outcome, model_started_us, before_policy, clock, observer)
    }

    /// The policy of this run.
    pub fn policy(&self) -> &Policy {
        &self.config.policy
    }

    /// The draw the next step will use if it samples (`None` when greedy), without taking
    /// it from the stream: for a driver that steps on a device.
    pub fn peek_draw(&self) -> Option<f64> {
        (!self.config.policy.is_greedy()).then(|| self.rng.clone().random())
    }

    /// Takes a step that was chosen elsewhere (on a device, with [`peek_draw`]'s draw) as
    /// the outcome of the last [`ModelCall`]; the draw is taken from the stream here.
    ///
    /// [`peek_draw`]: Self::peek_draw
    pub fn accept_outcome(
        &mut self,
        outcome: StepOutcome,
        model_started_us: f64,
        clock: &mut dyn Clock,
        observer: &mut dyn Observer,
    ) -> Result<&StepRecord, GenerateError> {
        if outcome.token as usize >= self.vocab {
            return Err(PolicyError::TokenOutOfRange {
                role: "device-chosen",
                id: outcome.token,
                vocab: self.vocab,
            }
            .into());
        }
        check_device_outcome(&outcome)?;
        if let Some(draw) = outcome.draw {
            let taken = self.rng.random();
            debug_assert_eq!(taken, draw, "the device used the stream's next draw");
        }
        let now = clock.now_us();
        self.record(outcome, model_started_us, now, clock, observer)
    }

    fn record(
        &mut self,
        outcome: StepOutcome,
        model_started_us: f64,
        before_policy: f64,
        clock: &mut dyn Clock,
        observer: &mut dyn Observer,
    ) -> Result<&StepRecord, GenerateError> {
        let done = clock.now_us();
        self.ttft_us.get_or_insert(done - self.start_us);
        self.latencies.push(done - model_started_us);

        let vocabulary = self.vocabulary;
        let text_of = |id: u32| String::from_utf8_lossy(vocabulary.token_bytes(id)).into_owned();
        let alternatives = |top: &[TokenProb]| {
            top.iter()
                .map(|t| Alternative {
                    id: t.id,
                    text: text_of(t.id),
                    prob: t.prob,
                })
                .collect()
        };
        let record = StepRecord {
            step: self.steps.len(),
            token: outcome.token,
            text: text_of(outcome.token),
            prob: outcome.prob,
            logprob: outcome.logprob(),
            top: alternatives(&outcome.top),
            entropy: outcome.entropy,
            survivors: outcome.survivors,
            draw: outcome.draw,
            model_prob: outcome.model.as_ref().map(|m| m.prob),
            model_logprob: outcome.model.as_ref().map(|m| m.logprob),
            model_top: outcome
                .model
                .as_ref()
                .map_or_else(Vec::new, |m| alternatives(&m.top)),
            mirostat_mu: outcome.mirostat.map(|m| m.mu),
            model_us: before_policy - model_started_us,
            policy_us: done - before_policy,
        };
        self.mirostat_mu = outcome.mirostat.map(|m| m.next);
        observer.on_step(&record);
        let token = record.token;
        self.steps.push(record);
        self.tokens.push(token);

        if self.config.policy.is_eos(token) {
            self.stop_reason = Some(StopReason::Eos);
            self.stop_token = Some(token);
        } else if self.config.stop.tokens.contains(&token) {
            self.stop_reason = Some(StopReason::StopToken);
            self.stop_token = Some(token);
        } else {
            let appended_from = self.output.len();
            self.output.extend_from_slice(vocabulary.token_bytes(token));
            if let Some((at, which)) =
                find_stop_string(&self.output, appended_from, &self.config.stop.strings)
            {
                self.output.truncate(at);
                self.stop_reason = Some(StopReason::StopSequence);
                self.stop_string = self.config.stop.strings.get(which).cloned();
            }
        }
        Ok(self.steps.last().expect("a step was just pushed"))
    }

    /// The record of the stopped run, with its content digest. `model` names the weights and
    /// `backend` what ran them.
    pub fn finish(self, model: ArtifactId, backend: Backend) -> RunRecord {
        let last_step = self.steps.len().saturating_sub(1);
        let mut record = RunRecord {
            app_version: self.config.app_version.clone(),
            policy_version: POLICY_VERSION.to_string(),
            model,
            tokenizer: self.vocabulary.id(),
            rendered_prompt: self.rendered_prompt,
            prompt_tokens: self.prompt,
            config: self.config,
            steps: self.steps,
            output_text: String::from_utf8_lossy(&self.output).into_owned(),
            // `next_call` names a reason before it returns `None`; a run finished early
            // (an error, or a driver that stopped asking) counts as cancelled.
            stop_reason: self.stop_reason.unwrap_or(StopReason::Cancelled),
            stop_step: matches!(
                self.stop_reason,
                Some(StopReason::Eos | StopReason::StopToken | StopReason::StopSequence)
            )
            .then_some(last_step),
            stop_string: self.stop_string,
            stop_token: self.stop_token,
            ttft_us: self.ttft_us.unwrap_or(0.0),
            token_latencies_us: self.latencies,
            degraded_reason: backend.degraded_reason.clone(),
            backend,
            record_digest: None,
            precision: None,
            tags: Default::default(),
            run_id: None,
            version_id: None,
        };
        record.seal();
        record
    }
}

/// Generates one run and returns its record.
pub fn generate<M: LanguageModel + ?Sized>(
    model: &mut M,
    vocabulary: &dyn Vocabulary,
    config: &RunConfig,
    clock: &mut dyn Clock,
    observer: &mut dyn Observer,
) -> Result<RunRecord, GenerateError> {
    let start = clock.now_us();
    let mut run = Generation::new(
        model.vocab_size(),
        model.context_len(),
        vocabulary,
        config,
        start,
    )?;
    loop {
        let before_model = clock.now_us();
        let draw = run.peek_draw();
        let policy = run.policy().clone();
        let Some(call) = run.next_call(observer) else {
            break;
        };
        if let Some(outcome) = model.choose_on_device(call, &policy, draw) {
            let outcome = outcome.map_err(GenerateError::model)?;
            run.accept_outcome(outcome, before_model, clock, observer)?;
            continue;
        }
        let logits = match call {
            ModelCall::Prefill(prompt) => model.prefill(prompt),
            ModelCall::Decode(token) => model.decode_step(token),
        }
        .map_err(GenerateError::model)?;
        run.accept(logits, before_model, clock, observer)?;
    }
    Ok(run.finish(model.id(), model.backend()))
}

/// The earliest start of a stop string that ends in the bytes appended at `appended_from`
/// (a stop string may span token boundaries, so the search reaches back before them), and
/// which string it is (the first listed, when two start there).
fn find_stop_string(
    output: &[u8],
    appended_from: usize,
    stops: &[String],
) -> Option<(usize, usize)> {
    stops
        .iter()
        .enumerate()
        .filter(|(_, s)| !s.is_empty())
        .filter_map(|(which, s)| {
            let s = s.as_bytes();
            let from = appended_from.saturating_sub(s.len() - 1);
            output[from..]
                .windows(s.len())
                .position(|w| w == s)
                .map(|p| (from + p, which))
        })
        .min_by_key(|&(at, _)| at)
}

/// A step a device took must report what a host step would: finite numbers, probabilities
/// in range, a chosen token with a positive probability (its log-probability is recorded).
fn check_device_outcome(outcome: &StepOutcome) -> Result<(), GenerateError> {
    let bad = |field, value, expected| GenerateError::DeviceOutcome {
        field,
        value,
        expected,
    };
    if !(outcome.prob > 0.0 && outcome.prob <= 1.0) {
        return Err(bad(
            "probability",
            outcome.prob,
            "greater than 0 and at most 1",
        ));
    }
    if !outcome.entropy.is_finite() {
        return Err(bad("entropy", outcome.entropy, "a finite number"));
    }
    if let Some(draw) = outcome.draw.filter(|d| !(0.0..1.0).contains(d)) {
        return Err(bad("draw", draw, "at least 0 and below 1"));
    }
    for t in &outcome.top {
        if !(0.0..=1.0).contains(&t.prob) {
            return Err(bad("a top probability", t.prob, "between 0 and 1"));
        }
        if !t.logit.is_finite() {
            return Err(bad("a top logit", t.logit, "a finite number"));
        }
    }
    if let Some(model) = &outcome.model {
        if !(0.0..=1.0).contains(&model.prob) {
            return Err(bad(
                "the model's probability",
                model.prob,
                "between 0 and 1",
            ));
        }
        if !(model.logprob <= 0.0 && model.logprob.is_finite()) {
            let expected = "a finite number at most 0";
            return Err(bad("the model's log-probability", model.logprob, expected));
        }
        if model.top.len() > MODEL_TOP {
            let expected = "at most 5 entries";
            return Err(bad(
                "the model's top list",
                model.top.len() as f64,
                expected,
            ));
        }
        if let Some(t) = model.top.iter().find(|t| !(0.0..=1.0).contains(&t.prob)) {
            return Err(bad("a model top probability", t.prob, "between 0 and 1"));
        }
    }
    Ok(())
}
