//! The run record: everything needed to explain an output or to replay it; reading records
//! (`parse_records`), what a record must satisfy (`RunRecord::check`), its content digest,
//! and `replay`.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use thiserror::Error;

use crate::generate::{
    generate, Alternative, Clock, GenerateError, LanguageModel, StepRecord, StopReason, Unobserved,
    Vocabulary,
};
use crate::version::{VersionKey, RUN_ID_DIGITS};
use crate::{Policy, PolicyError, Precision, Shortest};

/// A model or tokenizer: a name and a content hash of its files.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArtifactId {
    pub name: String,
    pub hash: String,
}

impl std::fmt::Display for ArtifactId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.name, self.hash)
    }
}

/// Where a seed came from: typed by the user, or drawn fresh from the OS (and then
/// recorded like any other, so even a "random" run replays).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SeedSource {
    #[default]
    User,
    Fresh,
}

/// When to stop besides `max_tokens`, the end-of-sequence token and a full context.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StopConfig {
    /// Stop strings, matched on the decoded bytes even across token boundaries.
    pub strings: Vec<String>,
    pub tokens: Vec<u32>,
}

/// What a user asks for: everything that decides the tokens of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunConfig {
    pub app_version: String,
    /// The template the prompt is rendered into; `{prompt}` marks where it goes.
    pub prompt_template: String,
    pub prompt: String,
    pub policy: Policy,
    pub seed: u64,
    pub seed_source: SeedSource,
    pub max_tokens: usize,
    pub stop: StopConfig,
}

/// Where the prompt goes in a template.
pub(crate) const PROMPT_SLOT: &str = "{prompt}";

impl RunConfig {
    /// The template with every `{prompt}` replaced by the prompt.
    pub fn rendered_prompt(&self) -> String {
        self.prompt_template.replace(PROMPT_SLOT, &self.prompt)
    }

    /// How many bytes [`rendered_prompt`](Self::rendered_prompt) makes, without making it
    /// (a template of many slots times a long prompt could not be held); `None` when the
    /// count passes `usize::MAX`.
    pub fn rendered_len(&self) -> Option<usize> {
        let slots = self.prompt_template.matches(PROMPT_SLOT).count();
        let fixed = self.prompt_template.len() - slots * PROMPT_SLOT.len();
        fixed.checked_add(slots.checked_mul(self.prompt.len())?)
    }

    /// Whether `rendered` is [`rendered_prompt`](Self::rendered_prompt), compared piece by
    /// piece without making it.
    fn renders_to(&self, rendered: &str) -> bool {
        let mut pieces = self.prompt_template.split(PROMPT_SLOT);
        let first = pieces.next().unwrap_or("");
        let Some(mut rest) = rendered.strip_prefix(first) else {
            return false;
        };
        for piece in pieces {
            match rest
                .strip_prefix(self.prompt.as_str())
                .and_then(|r| r.strip_prefix(piece))
            {
                Some(r) => rest = r,
                None => return false,
            }
        }
        rest.is_empty()
    }
}

/// One generated run, serialisable as one JSON object (one line of a JSONL export).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub app_version: String,
    pub policy_version: String,
    pub model: ArtifactId,
    pub tokenizer: ArtifactId,
    pub config: RunConfig,
    pub rendered_prompt: String,
    pub prompt_tokens: Vec<u32>,
    pub steps: Vec<StepRecord>,
    pub output_text: String,
    pub stop_reason: StopReason,
    /// The stop string that ended the run, when `stop_reason` is `stop_sequence`. Records
    /// made before it was recorded have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_string: Option<String>,
    /// The end-of-sequence or stop token that ended the run, when one did (a policy may
    /// have several end-of-sequence ids). Absent in records made before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_token: Option<u32>,
    /// The step whose token fired the stop (an end-of-sequence or stop token, or the last
    /// token of a stop string, where the output text then ends); absent for other stops.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_step: Option<usize>,
    /// Time to first token: from the start of the run to the first chosen token.
    pub ttft_us: f64,
    /// Model plus policy time of each step.
    pub token_latencies_us: Vec<f64>,
    /// What ran the model. Records made before backends existed read as `cpu-reference`.
    #[serde(default = "Backend::cpu_reference")]
    pub backend: Backend,
    /// Why the run fell back to the `cpu-reference` baseline, if it did (the same words as
    /// `backend.degraded_reason`, at the top level where a reader looks first). Absent in
    /// JSON when the run did not fall back: the policy's JSON holds no `null`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub degraded_reason: Option<String>,
    /// `sha256:` and the hex SHA-256 of everything above but the timings (see
    /// [`RunRecord::content_digest`]), written when the record is made, so that a record
    /// edited afterwards is told apart from a model or policy that now behaves differently.
    /// It guards against edits, not forgery: whoever edits a record can write a new digest.
    /// Records made before digests existed have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record_digest: Option<String>,
    /// How the weights were stored, as the caller that loaded them says
    /// ([`RunRecord::labelled`]). Records made before it was recorded have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precision: Option<Precision>,
    /// The user's `key=value` metadata (`slice=eu`, `tenant=course-a`), covered by the digest.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    /// The first 16 hex digits of `record_digest` (see [`crate::version`]); computed on
    /// load for records made before ids existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// The id of the run's exact version ([`VersionKey`]); computed on load for records
    /// made before ids existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version_id: Option<String>,
}

/// Which forward pass ran a model, by the name a run record gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum BackendKind {
    /// The CPU reference forward pass: the baseline every faster path falls back to.
    #[serde(rename = "cpu-reference")]
    CpuReference,
    /// WebGPU: in the browser, or natively through wgpu on Vulkan.
    #[serde(rename = "webgpu")]
    WebGpu,
}

impl BackendKind {
    /// The kind's name in a record: `cpu-reference` or `webgpu`.
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::CpuReference => "cpu-reference",
            BackendKind::WebGpu => "webgpu",
        }
    }
}

by_name!(BackendKind);

/// What ran the model's forward pass: the backend's kind and, for a GPU, which adapter.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Backend {
    /// `cpu-reference` or `webgpu` (the field keeps the name records have always used).
    pub name: BackendKind,
    /// The adapter's name and driver, for a GPU backend.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adapter: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    /// Set when the run asked for a GPU and fell back to `cpu-reference`: why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub degraded_reason: Option<String>,
    /// The first step (0 = the prompt's prefill) that ran on the fallback.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub degraded_at_step: Option<usize>,
    /// For a run that asked for the GPU: each stretch of steps one backend ran, in order,
    /// and why it ran them (a run starts on `cpu-reference` while the GPU's canary runs,
    /// moves to the GPU when it passes, and back when the GPU fails). Absent for runs
    /// that asked for the CPU, and in records made before segments existed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub segments: Vec<Segment>,
    /// For a run that asked for `auto`: which backend the measurement chose and why, with
    /// the two decode steps' times, in words. Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto: Option<String>,
}

/// One stretch of a run's steps on one backend.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Segment {
    pub backend: BackendKind,
    /// The first and last step it ran (0 = the prompt's prefill), both included.
    pub first_step: usize,
    pub last_step: usize,
    /// Why the run was on this backend from `first_step`, in words.
    pub reason: String,
}

impl Backend {
    /// The CPU reference forward pass, with nothing to say about an adapter or a fallback.
    pub fn cpu_reference() -> Backend {
        Backend {
            name: BackendKind::CpuReference,
            adapter: None,
            driver: None,
            degraded_reason: None,
            degraded_at_step: None,
            segments: Vec::new(),
            auto: None,
        }
    }
}

/// What a replay found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum ReplayReport {
    /// Every regenerated field (timings aside) is the same, to the exact float.
    Identical { steps: usize },
    /// The first field that differs, at the step it belongs to (fields of the whole run,
    /// such as the prompt, count as step 0; the output and the stop, as the step after the
    /// last). `recorded` and `replayed` are the tokens of that step; `None` on a side means
    /// that run had already stopped, or that the field is not a step's.
    Differs {
        step: usize,
        /// The field's name in the record, `prompt_tokens` or `logprob`.
        field: String,
        recorded: Option<u32>,
        replayed: Option<u32>,
        /// The two values, in words.
        detail: String,
    },
    /// The record's `record_digest` does not match its content: it was edited after it
    /// was written. Nothing was regenerated.
    Altered {
        /// The digest written in the record.
        expected: String,
        /// The digest of its content now.
        found: String,
    },
}

impl fmt::Display for ReplayReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReplayReport::Identical { steps } => write!(f, "identical ({steps} steps)"),
            ReplayReport::Differs { step, detail, .. } => {
                write!(f, "differs at step {step}: {detail}")
            }
            ReplayReport::Altered { expected, found } => write!(
                f,
                "altered after it was written: its record_digest is {expected}, but its \
                 content hashes to {found}, so it no longer says what the run did"
            ),
        }
    }
}

/// Why [`RunRecord::audit`] refuses a record.
#[derive(Clone, Debug, PartialEq)]
pub enum Audit {
    /// Edited after it was written (a [`ReplayReport::Altered`]).
    Altered(ReplayReport),
    /// Not what a run could have written.
    Invalid(RecordError),
}

impl fmt::Display for Audit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Audit::Altered(report) => report.fmt(f),
            Audit::Invalid(e) => e.fmt(f),
        }
    }
}

/// The largest timing a record may hold, in microseconds: a day. A run that took longer is
/// a clock's fault, and no report should average it in.
pub const MAX_TIMING_US: f64 = 86_400e6;

/// Why a run record could not be read, or cannot be what a run wrote.
#[derive(Clone, Debug, Error, PartialEq)]
pub enum RecordError {
    #[error("the text holds no run record")]
    Empty,
    #[error(
        "run record {record} (line {line}, column {column}) is not a valid run record: {message}"
    )]
    Json {
        /// 1-based: the first record of the text is record 1.
        record: usize,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("the record's prompt_tokens is empty, but every run starts from at least one token")]
    EmptyPrompt,
    #[error(
        "the record's rendered_prompt is {recorded}, which is not its prompt_template with \
         its prompt in place of {{prompt}}"
    )]
    RenderedPrompt { recorded: String },
    #[error("the record holds {steps} steps, more than its max_tokens of {max_tokens}")]
    TooManySteps { steps: usize, max_tokens: usize },
    #[error(
        "step {position} of the record is numbered {found}: steps are numbered 0, 1, 2, … in order"
    )]
    StepNumber { position: usize, found: usize },
    #[error("step {step}'s {field} is {}, but it must be {expected}", Shortest(*.value))]
    StepValue {
        step: usize,
        field: &'static str,
        value: f64,
        expected: &'static str,
    },
    #[error(
        "step {step} lists {count} top alternatives, but a step lists at most 5 and no more \
         than its {survivors} survivors"
    )]
    TopCount {
        step: usize,
        count: usize,
        survivors: usize,
    },
    #[error("step {step} {found}, but the policy {expected}")]
    Draw {
        step: usize,
        found: &'static str,
        expected: &'static str,
    },
    #[error(
        "step {step} chose token {token}, the run's {role}, yet the run went on: it stops there"
    )]
    StopMissed {
        step: usize,
        token: u32,
        role: &'static str,
    },
    #[error("the record says it stopped because {reason}, but {why}")]
    StopReason { reason: &'static str, why: String },
    #[error(
        "the record's {field} is {}, but a timing is a finite number of microseconds from 0 to \
         {} (a day)",
        Shortest(*.value),
        Shortest(MAX_TIMING_US)
    )]
    Timing { field: String, value: f64 },
    #[error("the record's record_digest {0} is not `sha256:` followed by 64 lowercase hex digits")]
    DigestFormat(String),
    #[error("the record's {field} is {recorded}, but its content gives {computed}")]
    Id {
        field: &'static str,
        recorded: String,
        computed: String,
    },
    #[error("the record's policy is invalid: {0}")]
    Policy(#[from] PolicyError),
}

/// Reads every run record of `text`: one JSON object, one pretty-printed over many lines,
/// or JSONL (one per line), or any mix separated by white space. The records are read as
/// written, but a record made before run and version ids existed gets them computed;
/// [`RunRecord::check`] says whether each could have come from a run.
// `#[inline]` here and on the ids' functions: not for speed but so that each caller builds
// them at its own opt-level. The lab's model worker builds this crate at 3 for the policy
// step; reading and sealing records is not hot, and at the worker's "z" it is a third the size.
#[inline]
pub fn parse_records(text: &str) -> Result<Vec<RunRecord>, RecordError> {
    let mut records = Vec::new();
    for parsed in serde_json::Deserializer::from_str(text).into_iter::<RunRecord>() {
        match parsed {
            Ok(record) => records.push(record),
            Err(e) => {
                return Err(RecordError::Json {
                    record: records.len() + 1,
                    line: e.line(),
                    column: e.column(),
                    message: e.to_string(),
                })
            }
        }
    }
    if records.is_empty() {
        return Err(RecordError::Empty);
    }
    for record in &mut records {
        record.fill_ids();
    }
    Ok(records)
}

impl RunRecord {
    /// The digest of the record's deterministic content: `sha256:` and 64 hex digits.
    ///
    /// It covers every field but the timings (`ttft_us`, `token_latencies_us`, each step's
    /// `model_us` and `policy_us`) and the digest itself. The fields are hashed in a
    /// canonical binary form (tagged values, floats by their bits, object keys sorted, null
    /// fields left out), not as JSON text, so that neither a JSON writer's number format,
    /// nor key order, nor whether `None` is written as `null` or left out can change it.
    pub fn content_digest(&self) -> String {
        let content = DigestedRecord {
            app_version: &self.app_version,
            policy_version: &self.policy_version,
            model: &self.model,
            tokenizer: &self.tokenizer,
            config: &self.config,
            rendered_prompt: &self.rendered_prompt,
            prompt_tokens: &self.prompt_tokens,
            steps: self
                .steps
                .iter()
                .map(|s| DigestedStep {
                    step: s.step,
                    token: s.token,
                    text: &s.text,
                    prob: s.prob,
                    logprob: s.logprob,
                    top: &s.top,
                    entropy: s.entropy,
                    survivors: s.survivors,
                    draw: s.draw,
                    model_prob: s.model_prob,
                    model_logprob: s.model_logprob,
                    model_top: &s.model_top,
                    mirostat_mu: s.mirostat_mu,
                })
                .collect(),
            output_text: &self.output_text,
            stop_reason: self.stop_reason,
            stop_string: self.stop_string.as_deref(),
            stop_token: self.stop_token,
            stop_step: self.stop_step,
            backend: &self.backend,
            degraded_reason: self.degraded_reason.as_deref(),
            precision: self.precision,
            tags: &self.tags,
        };
        let mut hasher = Sha256::new();
        hasher.update(DIGEST_DOMAIN);
        hash_canonical(&mut hasher, &content);
        format!("{DIGEST_PREFIX}{}", hex(&hasher.finalize()))
    }

    /// The run id its content gives: the first [`RUN_ID_DIGITS`] hex digits of
    /// [`content_digest`](Self::content_digest).
    #[inline]
    pub fn computed_run_id(&self) -> String {
        run_id_of(&self.content_digest())
    }

    /// The id of the run's exact version, [`VersionKey::id`].
    #[inline]
    pub fn computed_version_id(&self) -> String {
        VersionKey::of(self).id()
    }

    /// Computes the ids a record made before them lacks.
    #[inline]
    fn fill_ids(&mut self) {
        if self.run_id.is_none() {
            self.run_id = Some(self.computed_run_id());
        }
        if self.version_id.is_none() {
            self.version_id = Some(self.computed_version_id());
        }
    }

    /// Writes the digest and the two ids of the record's content as it is now.
    #[inline]
    pub fn seal(&mut self) {
        let digest = self.content_digest();
        self.run_id = Some(run_id_of(&digest));
        self.record_digest = Some(digest);
        self.version_id = Some(self.computed_version_id());
    }

    /// The record with what its caller knows and the generation loop does not: how the
    /// weights were stored, and the user's tags. Sealed again, so the digest and ids cover them.
    #[inline]
    pub fn labelled(
        mut self,
        precision: Option<Precision>,
        tags: BTreeMap<String, String>,
    ) -> RunRecord {
        self.precision = precision;
        self.tags = tags;
        self.seal();
        self
    }

    /// `Some(ReplayReport::Altered)` when the record carries a digest that its content no
    /// longer matches; `None` when it matches or the record has no digest.
    pub fn alteration(&self) -> Option<ReplayReport> {
        let expected = self.record_digest.as_ref()?;
        let found = self.content_digest();
        (*expected != found).then(|| ReplayReport::Altered {
            expected: expected.clone(),
            found,
        })
    }

    /// Checks what any record a run wrote satisfies, without the model: a prompt, steps
    /// numbered in order and no more than `max_tokens`, probabilities and draws in range,
    /// a draw exactly when the policy samples, no end-of-sequence or stop token before the
    /// last step, a stop reason the steps bear out, a valid policy and a well-formed digest.
    /// What needs the model (token ids within its vocabulary, the values themselves) is
    /// checked by [`replay`].
    pub fn check(&self) -> Result<(), RecordError> {
        let digest = (self.run_id.is_some()).then(|| self.content_digest());
        self.check_with(digest.as_deref())
    }

    /// Everything a reader of telemetry asks of a record, hashing it once: its digest
    /// matches its content ([`alteration`](Self::alteration)), then [`check`](Self::check).
    pub fn audit(&self) -> Result<(), Audit> {
        let digest = self.content_digest();
        if let Some(expected) = &self.record_digest {
            if *expected != digest {
                return Err(Audit::Altered(ReplayReport::Altered {
                    expected: expected.clone(),
                    found: digest,
                }));
            }
        }
        self.check_with(Some(&digest)).map_err(Audit::Invalid)
    }

    /// [`check`](Self::check), given the content digest when the record has a run id.
    fn check_with(&self, digest: Option<&str>) -> Result<(), RecordError> {
        let config = &self.config;
        config.policy.validate(usize::MAX)?;
        if let Some(digest) = &self.record_digest {
            let hex = digest.strip_prefix(DIGEST_PREFIX).unwrap_or("");
            if hex.len() != 64 || !hex.bytes().all(|b| HEX.contains(&b)) {
                return Err(RecordError::DigestFormat(quoted(digest)));
            }
        }
        if let (Some(recorded), Some(digest)) = (&self.run_id, digest) {
            let computed = run_id_of(digest);
            if *recorded != computed {
                return Err(RecordError::Id {
                    field: "run_id",
                    recorded: quoted(recorded),
                    computed,
                });
            }
        }
        if let Some(recorded) = &self.version_id {
            let computed = self.computed_version_id();
            if *recorded != computed {
                return Err(RecordError::Id {
                    field: "version_id",
                    recorded: quoted(recorded),
                    computed,
                });
            }
        }
        self.check_timings()?;
        if self.prompt_tokens.is_empty() {
            return Err(RecordError::EmptyPrompt);
        }
        if !config.renders_to(&self.rendered_prompt) {
            return Err(RecordError::RenderedPrompt {
                recorded: quoted(&self.rendered_prompt),
            });
        }
        if self.steps.len() > config.max_tokens {
            return Err(RecordError::TooManySteps {
                steps: self.steps.len(),
                max_tokens: config.max_tokens,
            });
        }
        let greedy = config.policy.is_greedy();
        let mut stop_tokens = config.stop.tokens.clone();
        stop_tokens.sort_unstable();
        let last = self.steps.len().saturating_sub(1);
        for (position, s) in self.steps.iter().enumerate() {
            if s.step != position {
                return Err(RecordError::StepNumber {
                    position,
                    found: s.step,
                });
            }
            check_step(s, greedy)?;
            if position < last {
                let role = if config.policy.is_eos(s.token) {
                    Some("end-of-sequence token")
                } else if stop_tokens.binary_search(&s.token).is_ok() {
                    Some("stop token")
                } else {
                    None
                };
                if let Some(role) = role {
                    return Err(RecordError::StopMissed {
                        step: position,
                        token: s.token,
                        role,
                    });
                }
            }
        }
        self.check_stop(&stop_tokens)
    }

    /// Every timing within [0, [`MAX_TIMING_US`]]: the digest does not cover them, so they
    /// are bounded here, where every reader of a record checks it, and no report built on
    /// them can print a negative or non-finite time.
    fn check_timings(&self) -> Result<(), RecordError> {
        // The field is named only when one is out of range: every line of a telemetry file
        // passes here.
        fn within(value: f64, field: impl FnOnce() -> String) -> Result<(), RecordError> {
            if (0.0..=MAX_TIMING_US).contains(&value) {
                Ok(())
            } else {
                Err(RecordError::Timing {
                    field: field(),
                    value,
                })
            }
        }
        within(self.ttft_us, || "ttft_us".to_string())?;
        for (i, &value) in self.token_latencies_us.iter().enumerate() {
            within(value, || format!("token_latencies_us[{i}]"))?;
        }
        for s in &self.steps {
            within(s.model_us, || format!("step {}'s model_us", s.step))?;
            within(s.policy_us, || format!("step {}'s policy_us", s.step))?;
        }
        Ok(())
    }

    /// The stop reason against the steps and the configuration.
    fn check_stop(&self, stop_tokens: &[u32]) -> Result<(), RecordError> {
        let config = &self.config;
        let last = self.steps.last().map(|s| s.token);
        let why = match self.stop_reason {
            StopReason::MaxTokens if self.steps.len() != config.max_tokens => Some(format!(
                "it holds {} steps and its max_tokens is {}",
                self.steps.len(),
                config.max_tokens
            )),
            StopReason::Eos if last.is_none_or(|t| !config.policy.is_eos(t)) => Some(format!(
                "its last token is {} and its end-of-sequence token {}",
                token_words(last),
                token_words(config.policy.eos_token)
            )),
            StopReason::StopToken
                if last.is_none_or(|t| stop_tokens.binary_search(&t).is_err()) =>
            {
                Some(format!(
                    "its last token, {}, is not one of its stop tokens",
                    token_words(last)
                ))
            }
            StopReason::StopSequence if config.stop.strings.iter().all(|s| s.is_empty()) => {
                Some("it has no stop string".to_string())
            }
            _ => None,
        };
        if let Some(why) = why {
            return Err(RecordError::StopReason {
                reason: self.stop_reason.describe(),
                why,
            });
        }
        let stopped_by_token = matches!(self.stop_reason, StopReason::Eos | StopReason::StopToken);
        if let Some(token) = self.stop_token {
            if !stopped_by_token || last != Some(token) {
                return Err(RecordError::StopReason {
                    reason: self.stop_reason.describe(),
                    why: format!(
                        "it names stop token {token}, but its last token is {}",
                        token_words(last)
                    ),
                });
            }
        }
        if let Some(step) = self.stop_step {
            if self.steps.len() != step + 1 {
                return Err(RecordError::StopReason {
                    reason: self.stop_reason.describe(),
                    why: format!(
                        "it says the stop fired at step {step}, but it holds {} steps",
                        self.steps.len()
                    ),
                });
            }
        }
        if let Some(stop) = &self.stop_string {
            if self.stop_reason != StopReason::StopSequence || !config.stop.strings.contains(stop) {
                return Err(RecordError::StopReason {
                    reason: self.stop_reason.describe(),
                    why: format!(
                        "it names the stop string {}, which {}",
                        quoted(stop),
                        if config.stop.strings.contains(stop) {
                            "only a run stopped by a stop string names"
                        } else {
                            "is not one of its stop strings"
                        }
                    ),
                });
            }
        }
        Ok(())
    }
}

/// One step's numbers: in range and finite, as every step writes them.
fn check_step(s: &StepRecord, greedy: bool) -> Result<(), RecordError> {
    let value = |field, value, expected| RecordError::StepValue {
        step: s.step,
        field,
        value,
        expected,
    };
    if !(s.prob > 0.0 && s.prob <= 1.0) {
        return Err(value("prob", s.prob, "greater than 0 and at most 1"));
    }
    if !(s.logprob <= 0.0 && s.logprob.is_finite()) {
        return Err(value("logprob", s.logprob, "a finite number at most 0"));
    }
    if !s.entropy.is_finite() {
        return Err(value("entropy", s.entropy, "a finite number"));
    }
    if let Some(draw) = s.draw {
        if !(0.0..1.0).contains(&draw) {
            return Err(value("draw", draw, "at least 0 and below 1"));
        }
    }
    match (greedy, s.draw.is_some()) {
        (true, true) => {
            return Err(RecordError::Draw {
                step: s.step,
                found: "has a draw",
                expected: "is greedy (temperature 0) and draws nothing",
            })
        }
        (false, false) => {
            return Err(RecordError::Draw {
                step: s.step,
                found: "has no draw",
                expected: "samples, and every sampled step draws once",
            })
        }
        _ => {}
    }
    if s.survivors == 0 || s.top.len() > s.survivors.min(5) {
        return Err(RecordError::TopCount {
            step: s.step,
            count: s.top.len(),
            survivors: s.survivors,
        });
    }
    if let Some(t) = s.top.iter().find(|t| !(0.0..=1.0).contains(&t.prob)) {
        return Err(value("top probability", t.prob, "between 0 and 1"));
    }
    if let Some(p) = s.model_prob.filter(|p| !(0.0..=1.0).contains(p)) {
        return Err(value("model_prob", p, "between 0 and 1"));
    }
    if let Some(l) = s.model_logprob.filter(|l| !(*l <= 0.0 && l.is_finite())) {
        return Err(value("model_logprob", l, "a finite number at most 0"));
    }
    if let Some(mu) = s.mirostat_mu.filter(|mu| !mu.is_finite()) {
        return Err(value("mirostat_mu", mu, "a finite number"));
    }
    if s.model_top.len() > crate::MODEL_TOP {
        let count = s.model_top.len() as f64;
        return Err(value("model_top", count, "at most 5 entries"));
    }
    if let Some(t) = s.model_top.iter().find(|t| !(0.0..=1.0).contains(&t.prob)) {
        return Err(value("model_top probability", t.prob, "between 0 and 1"));
    }
    Ok(())
}

/// Hashed before the content, so that the digest of a record can never be mistaken for
/// the digest of anything else; a new canonical form would change it.
const DIGEST_DOMAIN: &[u8] = b"decode-lab run record content, v1\n";
const DIGEST_PREFIX: &str = "sha256:";
const HEX: &[u8; 16] = b"0123456789abcdef";

/// The run id of a content digest: its first [`RUN_ID_DIGITS`] hex digits.
fn run_id_of(digest: &str) -> String {
    digest
        .strip_prefix(DIGEST_PREFIX)
        .unwrap_or(digest)
        .chars()
        .take(RUN_ID_DIGITS)
        .collect()
}

/// SHA-256 of `bytes` as lowercase hex: the one form in which every file hash, digest and
/// training-text hash of the project is written.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        out.push(char::from(HEX[usize::from(byte >> 4)]));
        out.push(char::from(HEX[usize::from(byte & 15)]));
    }
    out
}

/// What the digest covers: the record without its timings and without the digest.
#[derive(Serialize)]
struct DigestedRecord<'a> {
    app_version: &'a str,
    policy_version: &'a str,
    model: &'a ArtifactId,
    tokenizer: &'a ArtifactId,
    config: &'a RunConfig,
    rendered_prompt: &'a str,
    prompt_tokens: &'a [u32],
    steps: Vec<DigestedStep<'a>>,
    output_text: &'a str,
    stop_reason: StopReason,
    stop_string: Option<&'a str>,
    /// These two are absent (and so hashed as before they existed) when not recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    stop_token: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stop_step: Option<usize>,
    backend: &'a Backend,
    degraded_reason: Option<&'a str>,
    /// Absent (and so hashed as before they existed) when not recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    precision: Option<Precision>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    tags: &'a BTreeMap<String, String>,
}

/// A step without its timings.
#[derive(Serialize)]
struct DigestedStep<'a> {
    step: usize,
    token: u32,
    text: &'a str,
    prob: f64,
    logprob: f64,
    top: &'a [Alternative],
    entropy: f64,
    survivors: usize,
    draw: Option<f64>,
    /// These three are absent (and so hashed as before they existed) when not recorded.
    model_prob: Option<f64>,
    model_logprob: Option<f64>,
    #[serde(skip_serializing_if = "<[Alternative]>::is_empty")]
    model_top: &'a [Alternative],
    #[serde(skip_serializing_if = "Option::is_none")]
    mirostat_mu: Option<f64>,
}

/// Feeds `value`'s canonical form ([`crate::canonical`]) to the hasher. Plain structs of
/// strings, numbers and lists always have one; were that ever to fail, the error's text is
/// hashed and the digest simply matches nothing.
pub(crate) fn hash_canonical<T: Serialize + ?Sized>(hasher: &mut Sha256, value: &T) {
    let mut bytes = Vec::with_capacity(4096);
    match crate::canonical::write(value, &mut bytes) {
        Ok(()) => hasher.update(&bytes),
        Err(e) => hasher.update(e.to_string()),
    }
}

/// The reference the canonical form is held to: feeds a JSON value to the hasher in a
/// canonical binary form: a tag byte per value,
/// lengths as 8 little-endian bytes, integers and floats by their 8 bytes (floats by their
/// bits, so 0.1 is hashed exactly), object keys in sorted order, null fields left out.
#[cfg(test)]
pub(crate) fn hash_value(hasher: &mut Sha256, value: &serde_json::Value) {
    use serde_json::Value;
    let length = |hasher: &mut Sha256, n: usize| hasher.update((n as u64).to_le_bytes());
    match value {
        Value::Null => hasher.update(b"n"),
        Value::Bool(b) => hasher.update(if *b { b"t" } else { b"f" }),
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                hasher.update(b"u");
                hasher.update(u.to_le_bytes());
            } else if let Some(i) = n.as_i64() {
                hasher.update(b"i");
                hasher.update(i.to_le_bytes());
            } else {
                hasher.update(b"d");
                hasher.update(n.as_f64().unwrap_or(f64::NAN).to_bits().to_le_bytes());
            }
        }
        Value::String(s) => {
            hasher.update(b"s");
            length(hasher, s.len());
            hasher.update(s.as_bytes());
        }
        Value::Array(items) => {
            hasher.update(b"a");
            length(hasher, items.len());
            for item in items {
                hash_value(hasher, item);
            }
        }
        Value::Object(fields) => {
            // A field that is null is hashed as absent, so that writing `None` as `null` or
            // leaving it out (`skip_serializing_if`) is the same content.
            let mut sorted: Vec<_> = fields.iter().filter(|(_, v)| !v.is_null()).collect();
            hasher.update(b"o");
            length(hasher, sorted.len());
            sorted.sort_unstable_by(|a, b| a.0.cmp(b.0));
            for (key, item) in sorted {
                hasher.update(b"s");
                length(hasher, key.len());
                hasher.update(key.as_bytes());
                hash_value(hasher, item);
            }
        }
    }
}

/// Regenerates `record` with the same model, tokenizer, seed and settings and compares.
///
/// A record whose digest no longer matches its content is reported as
/// [`ReplayReport::Altered`] before anything runs; a record that no run could have written
/// (see [`RunRecord::check`]) is an error.
pub fn replay<M: LanguageModel + ?Sized>(
    record: &RunRecord,
    model: &mut M,
    vocabulary: &dyn Vocabulary,
    clock: &mut dyn Clock,
) -> Result<ReplayReport, GenerateError> {
    // One hash of the content answers both the digest and the run id.
    match record.audit() {
        Err(Audit::Altered(report)) => return Ok(report),
        Err(Audit::Invalid(e)) => return Err(e.into()),
        Ok(()) => {}
    }
    for (kind, recorded, current) in [
        ("model", &record.model, model.id()),
        ("tokenizer", &record.tokenizer, vocabulary.id()),
    ] {
        if *recorded != current {
            return Err(GenerateError::ArtifactMismatch {
                kind,
                recorded: recorded.to_string(),
                current: current.to_string(),
            });
        }
    }
    let again = generate(model, vocabulary, &record.config, clock, &mut Unobserved)?;
    // The digest was checked above; the comparison need not hash the record again.
    Ok(compare_content(record, &again))
}

/// The first difference between a record and its replay, field by field in the order a
/// run writes them: the versions, model and tokenizer, the prompt, every step (number,
/// token, text, probability, log-probability, draw, survivors, entropy, top alternatives),
/// then the output text and the stop. Floats are compared exactly; timings are not
/// compared. A `recorded` whose digest does not match its content is
/// [`ReplayReport::Altered`].
pub fn compare(recorded: &RunRecord, replayed: &RunRecord) -> ReplayReport {
    recorded
        .alteration()
        .unwrap_or_else(|| compare_content(recorded, replayed))
}

/// [`compare`] of a record whose digest is already known to match.
fn compare_content(recorded: &RunRecord, replayed: &RunRecord) -> ReplayReport {
    match first_difference(recorded, replayed) {
        Some((step, field, detail)) => ReplayReport::Differs {
            step,
            field,
            recorded: recorded.steps.get(step).map(|s| s.token),
            replayed: replayed.steps.get(step).map(|s| s.token),
            detail,
        },
        None => ReplayReport::Identical {
            steps: recorded.steps.len(),
        },
    }
}

/// (step, field, detail) of the first difference.
fn first_difference(a: &RunRecord, b: &RunRecord) -> Option<(usize, String, String)> {
    let at = |step: usize, (field, detail): (String, String)| Some((step, field, detail));
    if a.policy_version != b.policy_version {
        let (x, y) = (quoted(&a.policy_version), quoted(&b.policy_version));
        return at(0, differs("policy_version", x, y));
    }
    if a.app_version != b.app_version {
        let (x, y) = (quoted(&a.app_version), quoted(&b.app_version));
        return at(0, differs("app_version", x, y));
    }
    if a.model != b.model {
        return at(
            0,
            differs("model", a.model.to_string(), b.model.to_string()),
        );
    }
    if a.tokenizer != b.tokenizer {
        let (x, y) = (a.tokenizer.to_string(), b.tokenizer.to_string());
        return at(0, differs("tokenizer", x, y));
    }
    if a.rendered_prompt != b.rendered_prompt {
        let (x, y) = (quoted(&a.rendered_prompt), quoted(&b.rendered_prompt));
        return at(0, differs("rendered_prompt", x, y));
    }
    if a.prompt_tokens != b.prompt_tokens {
        let (x, y) = (&a.prompt_tokens, &b.prompt_tokens);
        let detail = match (0..x.len().min(y.len())).find(|&k| x[k] != y[k]) {
            Some(k) => format!(
                "prompt_tokens: token {k} of the prompt is {} in the record, {} in the replay",
                x[k], y[k]
            ),
            None => format!(
                "prompt_tokens: the prompt is {} tokens in the record, {} in the replay",
                x.len(),
                y.len()
            ),
        };
        return at(0, ("prompt_tokens".to_string(), detail));
    }
    let longest = a.steps.len().max(b.steps.len());
    for i in 0..longest {
        let found = match (a.steps.get(i), b.steps.get(i)) {
            (Some(x), Some(y)) => step_difference(x, y),
            (Some(_), None) => Some((
                "steps".to_string(),
                format!(
                    "the record has {} steps, the replay stopped after {}",
                    a.steps.len(),
                    b.steps.len()
                ),
            )),
            (None, _) => Some((
                "steps".to_string(),
                format!(
                    "the record stops after {} steps, the replay went on to {}",
                    a.steps.len(),
                    b.steps.len()
                ),
            )),
        };
        if let Some(found) = found {
            return at(i, found);
        }
    }
    if a.output_text != b.output_text {
        let (x, y) = (quoted(&a.output_text), quoted(&b.output_text));
        return at(longest, differs("output_text", x, y));
    }
    if a.stop_reason != b.stop_reason {
        let (x, y) = (
            a.stop_reason.name().to_string(),
            b.stop_reason.name().to_string(),
        );
        return at(longest, differs("stop_reason", x, y));
    }
    // Records made before the stop string was written have none to compare.
    let stop_string_known = a.stop_string.is_some() || a.record_digest.is_some();
    if stop_string_known && a.stop_string != b.stop_string {
        let (x, y) = (optional_text(&a.stop_string), optional_text(&b.stop_string));
        return at(longest, differs("stop_string", x, y));
    }
    // Records made before the stop token and step were written have none to compare.
    let words = |x: Option<usize>| x.map_or_else(|| "none".to_string(), |x| x.to_string());
    if a.stop_token.is_some() && a.stop_token != b.stop_token {
        let (x, y) = (
            words(a.stop_token.map(|t| t as usize)),
            words(b.stop_token.map(|t| t as usize)),
        );
        return at(longest, differs("stop_token", x, y));
    }
    if a.stop_step.is_some() && a.stop_step != b.stop_step {
        return at(
            longest,
            differs("stop_step", words(a.stop_step), words(b.stop_step)),
        );
    }
    None
}

/// (field, "field X was recorded, Y replayed").
fn differs(field: &str, recorded: String, replayed: String) -> (String, String) {
    (
        field.to_string(),
        format!("{field} {recorded} was recorded, {replayed} replayed"),
    )
}

/// The first field of one step that differs: (field, detail).
fn step_difference(a: &StepRecord, b: &StepRecord) -> Option<(String, String)> {
    let differs = |field, recorded, replayed| Some(differs(field, recorded, replayed));
    let number = |x: f64| Shortest(x).to_string();
    let same = |x: f64, y: f64| x.to_bits() == y.to_bits();
    if a.step != b.step {
        return differs("step", a.step.to_string(), b.step.to_string());
    }
    if a.token != b.token {
        return differs("token", a.token.to_string(), b.token.to_string());
    }
    if a.text != b.text {
        return differs("text", quoted(&a.text), quoted(&b.text));
    }
    if !same(a.prob, b.prob) {
        return differs("prob", number(a.prob), number(b.prob));
    }
    if !same(a.logprob, b.logprob) {
        return differs("logprob", number(a.logprob), number(b.logprob));
    }
    if a.draw.map(f64::to_bits) != b.draw.map(f64::to_bits) {
        return differs("draw", draw_words(a.draw), draw_words(b.draw));
    }
    if a.survivors != b.survivors {
        return differs(
            "survivors",
            a.survivors.to_string(),
            b.survivors.to_string(),
        );
    }
    if !same(a.entropy, b.entropy) {
        return differs("entropy", number(a.entropy), number(b.entropy));
    }
    let same_alternative = |x: Option<&Alternative>, y: Option<&Alternative>| match (x, y) {
        (Some(x), Some(y)) => x.id == y.id && x.text == y.text && same(x.prob, y.prob),
        (x, y) => x.is_none() && y.is_none(),
    };
    let longest = a.top.len().max(b.top.len());
    if let Some(k) = (0..longest).find(|&k| !same_alternative(a.top.get(k), b.top.get(k))) {
        return Some((
            "top".to_string(),
            format!(
                "top alternative {k}: {} was recorded, {} replayed",
                alternative(a.top.get(k)),
                alternative(b.top.get(k))
            ),
        ));
    }
    if a.mirostat_mu.map(f64::to_bits) != b.mirostat_mu.map(f64::to_bits) {
        let optional = |x: Option<f64>| x.map_or_else(|| "none".to_string(), number);
        let (x, y) = (optional(a.mirostat_mu), optional(b.mirostat_mu));
        return differs("mirostat_mu", x, y);
    }
    // A record made before the model's own distribution was recorded has none to compare.
    if a.model_prob.is_none() && a.model_logprob.is_none() && a.model_top.is_empty() {
        return None;
    }
    let optional = |x: Option<f64>| x.map_or_else(|| "none".to_string(), number);
    if a.model_prob.map(f64::to_bits) != b.model_prob.map(f64::to_bits) {
        return differs("model_prob", optional(a.model_prob), optional(b.model_prob));
    }
    if a.model_logprob.map(f64::to_bits) != b.model_logprob.map(f64::to_bits) {
        let (x, y) = (optional(a.model_logprob), optional(b.model_logprob));
        return differs("model_logprob", x, y);
    }
    let longest = a.model_top.len().max(b.model_top.len());
    let mut model_top = (0..longest).map(|k| (a.model_top.get(k), b.model_top.get(k)));
    if let Some(k) = model_top.position(|(x, y)| !same_alternative(x, y)) {
        return Some((
            "model_top".to_string(),
            format!(
                "the model's top token {k}: {} was recorded, {} replayed",
                alternative(a.model_top.get(k)),
                alternative(b.model_top.get(k))
            ),
        ));
    }
    None
}

/// A string as a JSON string literal: quoted, with control characters escaped.
/// A recorded text as a message quotes it: JSON-quoted, at most an [`Excerpt`] of it.
fn quoted(s: &str) -> String {
    let (text, all) = crate::Excerpt(s).parts();
    let json = serde_json::Value::String(text.to_string()).to_string();
    match all {
        None => json,
        Some(all) => format!("{json}… ({all} characters in all)"),
    }
}

fn optional_text(s: &Option<String>) -> String {
    s.as_deref().map_or_else(|| "none".to_string(), quoted)
}

fn token_words(token: Option<u32>) -> String {
    token.map_or_else(|| "none".to_string(), |t| t.to_string())
}

fn draw_words(draw: Option<f64>) -> String {
    draw.map_or_else(|| "none (greedy)".to_string(), |d| Shortest(d).to_string())
}

/// One top alternative as `id "text" prob`, or `nothing` past the end of the list.
fn alternative(alternative: Option<&Alternative>) -> String {
    alternative.map_or_else(
        || "nothing".to_string(),
        |t| format!("{} {} {}", t.id, quoted(&t.text), Shortest(t.prob)),
    )
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn a_backend_kind_is_written_by_its_name_and_an_unknown_one_is_refused() {
        for kind in [BackendKind::CpuReference, BackendKind::WebGpu] {
            let json = serde_json::to_string(&kind).unwrap();
            assert_eq!(json, format!("\"{kind}\""));
            assert_eq!(serde_json::from_str::<BackendKind>(&json).unwrap(), kind);
        }
        let unknown = serde_json::from_str::<Backend>(r#"{"name": "tpu"}"#).unwrap_err();
        assert!(unknown.to_string().contains("tpu"), "{unknown}");
    }

    fn with(template: &str, prompt: &str) -> RunConfig {
        RunConfig {
            app_version: "test".into(),
            prompt_template: template.into(),
            prompt: prompt.into(),
            policy: Policy::default(),
            seed: 0,
            seed_source: SeedSource::User,
            max_tokens: 1,
            stop: StopConfig::default(),
        }
    }

    /// Text made of the pieces a template and a prompt can confuse: slots, braces, letters.
    fn tricky() -> impl Strategy<Value = String> {
        prop::collection::vec(
            prop::sample::select(vec!["{prompt}", "{", "}", "prompt", "p", "a", "é"]),
            0..8,
        )
        .prop_map(|pieces| pieces.concat())
    }

    proptest! {
        #[test]
        fn a_rendering_is_measured_and_recognised_without_being_made(
            template in tricky(),
            prompt in tricky(),
            other in tricky(),
        ) {
            let config = with(&template, &prompt);
            let rendered = config.rendered_prompt();
            prop_assert_eq!(config.rendered_len(), Some(rendered.len()));
            prop_assert!(config.renders_to(&rendered));
            prop_assert_eq!(config.renders_to(&other), other == rendered);
            let longer = format!("{rendered}a");
            prop_assert!(!config.renders_to(&longer));
        }
    }

    #[test]
    fn a_huge_rendering_is_counted_not_made() {
        let config = with(&"{prompt}".repeat(1 << 20), &"x".repeat(1 << 20));
        assert_eq!(config.rendered_len(), Some(1 << 40));
        let config = with("{prompt}{prompt}", &"x".repeat(8));
        assert_eq!(config.rendered_len(), Some(16));
    }
}
