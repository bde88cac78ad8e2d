//! Policies in the forms people already have: a Hugging Face `generation_config.json`, an
//! OpenAI or vLLM request body, a llama.cpp command line. [`import`] reads one into the
//! knobs of [`KNOBS`](crate::KNOBS) (under the engine whose rules the form follows) and the
//! run's own settings (seed, length, stops), and lists every field it read with what it
//! became, every default the source engine switches on by itself, and every field it does
//! not understand. [`write`] turns a policy back into one of the forms, refusing by name
//! what the form cannot express.
//!
//! The readers follow each engine's own source and documentation:
//! - Hugging Face: `transformers`' `GenerationConfig` (`generation/configuration_utils.py`):
//!   greedy unless `do_sample`; then `temperature` 1.0 and `top_k` 50 where the file is
//!   silent, which the lab states, since its presets never switch a stage on by themselves.
//! - OpenAI and vLLM: the request body (`vllm/entrypoints/openai/protocol.py`,
//!   `vllm/sampling_params.py`): `temperature` 1.0 where silent; `top_k` 0 or −1 is off;
//!   `logit_bias` is keyed by token ids written as text.
//! - llama.cpp: `common/arg.cpp` and `common_params_sampling` in `common/common.h`: the
//!   command line's sampling flags, with the defaults llama.cpp switches on (temperature
//!   0.8, top-k 40, top-p 0.95, min-p 0.05) where the line is silent.
//!
//! Token ids in an imported policy are the source model's; the command that runs it checks
//! them against its own vocabulary ([`Policy::validate`]).

mod hf;
mod llama_cpp;
mod openai;

use std::fmt;

use serde_json::{Map, Value};

use crate::{Engine, Knob, KnobError, Policy, PolicyRequest, Sampler, Shortest};

/// The most bytes a policy in another form may hold: a generation config, a request body
/// or a command line is a few kB. A file or a text beyond it is refused, not read.
pub const MAX_BYTES: usize = 1 << 20;

/// A form a policy is written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// A Hugging Face `generation_config.json`.
    Hf,
    /// An OpenAI completion or chat request body.
    OpenAi,
    /// A vLLM request body: OpenAI's with vLLM's extra sampling fields.
    Vllm,
    /// A llama.cpp command line (`llama-cli`, `llama-server`).
    LlamaCpp,
}

impl Format {
    pub const ALL: [Format; 4] = [Format::Hf, Format::OpenAi, Format::Vllm, Format::LlamaCpp];

    /// The name `--policy-to` takes.
    pub fn name(self) -> &'static str {
        match self {
            Format::Hf => "hf",
            Format::OpenAi => "openai",
            Format::Vllm => "vllm",
            Format::LlamaCpp => "llama.cpp",
        }
    }

    /// What the form is, in words.
    pub fn title(self) -> &'static str {
        match self {
            Format::Hf => "a Hugging Face generation_config.json",
            Format::OpenAi => "an OpenAI request body",
            Format::Vllm => "a vLLM request body",
            Format::LlamaCpp => "a llama.cpp command line",
        }
    }

    /// The engine whose rules the form's settings follow.
    pub fn engine(self) -> Engine {
        match self {
            Format::Hf => Engine::Hf,
            Format::OpenAi | Format::Vllm => Engine::Vllm,
            Format::LlamaCpp => Engine::LlamaCpp,
        }
    }

    pub fn named(name: &str) -> Option<Format> {
        Format::ALL.into_iter().find(|f| f.name() == name)
    }
}

impl std::str::FromStr for Format {
    type Err = UnknownFormat;

    fn from_str(name: &str) -> Result<Format, UnknownFormat> {
        Format::named(name).ok_or_else(|| UnknownFormat(name.to_string()))
    }
}

/// A form's name that is none of [`Format::ALL`]'s.
#[derive(Clone, Debug, PartialEq)]
pub struct UnknownFormat(pub String);

impl fmt::Display for UnknownFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} is not a form (hf, openai, vllm or llama.cpp)",
            self.0
        )
    }
}

impl std::error::Error for UnknownFormat {}

/// What became of one field of an imported policy.
#[derive(Clone, Debug, PartialEq)]
pub enum Became {
    /// A knob of the policy, with its text.
    Knob(&'static str, String),
    /// A setting of the run: the seed, the number of tokens, a stop.
    Run(String),
    /// Understood, and without effect on decoding here (metadata, or a setting the
    /// source engine itself ignores in this configuration): why.
    LeftAlone(String),
    /// Not understood: why. An error unless the import is lenient.
    NotUnderstood(String),
}

/// One field of an imported policy and what it became. A default the source engine
/// switches on where the source is silent is a reading with `value` "(not given)".
#[derive(Clone, Debug, PartialEq)]
pub struct Reading {
    pub field: String,
    pub value: String,
    pub became: Became,
}

impl fmt::Display for Became {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Became::Knob(flag, text) if text.is_empty() => write!(f, "--{flag} off"),
            Became::Knob(flag, text) => write!(f, "--{flag} {text}"),
            Became::Run(words) => f.write_str(words),
            Became::LeftAlone(why) => write!(f, "left alone ({why})"),
            Became::NotUnderstood(why) => write!(f, "not understood ({why})"),
        }
    }
}

impl fmt::Display for Reading {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.field, self.value, self.became)
    }
}

/// The run's own settings an imported policy carries, for the commands that take them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunSettings {
    pub seed: Option<u64>,
    pub max_tokens: Option<usize>,
    /// Stop strings.
    pub stop: Vec<String>,
    /// Token ids that stop the run (vLLM's `stop_token_ids`).
    pub stop_tokens: Vec<u32>,
    /// The only token ids that may be chosen (vLLM's `allowed_token_ids`): every other id
    /// of the vocabulary is forbidden, which the command that knows the vocabulary does.
    pub allowed_tokens: Option<Vec<u32>>,
    /// Bad words as text (vLLM's `bad_words`), for a command with a tokenizer.
    pub bad_word_texts: Vec<String>,
}

/// A tokenizer's encoding of text into token ids.
pub type Encode<'a> = dyn Fn(&str) -> Vec<u32> + 'a;

impl RunSettings {
    /// What of the settings needs the model: `allowed_tokens` forbids every other id of a
    /// vocabulary of `vocab` tokens; each of `bad_word_texts` becomes bad-word sequences,
    /// encoded with and without a leading space as vLLM encodes them, by `encode`, the
    /// command's tokenizer (`None`: the command has none, and bad words as text are refused).
    pub fn apply_to(
        &self,
        policy: &mut Policy,
        vocab: usize,
        encode: Option<&Encode<'_>>,
    ) -> Result<(), ImportError> {
        if let Some(allowed) = &self.allowed_tokens {
            if let Some(id) = allowed.iter().find(|id| **id as usize >= vocab) {
                return Err(ImportError::Field {
                    field: "allowed_token_ids".into(),
                    value: id.to_string(),
                    expected: "a token id of the model's vocabulary",
                });
            }
            let kept: std::collections::HashSet<u32> =
                allowed.iter().chain(&policy.forbidden).copied().collect();
            let others: Vec<u32> = (0..vocab as u32).filter(|id| !kept.contains(id)).collect();
            policy.forbidden.extend(others);
        }
        if let Some(word) = self.bad_word_texts.first() {
            let encode = encode.ok_or_else(|| ImportError::Field {
                field: "bad_words".into(),
                value: format!("{word:?}"),
                expected: "token ids here, which has no tokenizer to find text in",
            })?;
            for word in &self.bad_word_texts {
                for text in [word.clone(), format!(" {word}")] {
                    let ids = encode(&text);
                    if !ids.is_empty() && !policy.bad_words.contains(&ids) {
                        policy.bad_words.push(ids);
                    }
                }
            }
        }
        Ok(())
    }
}

/// A policy read from another form.
#[derive(Clone, Debug, PartialEq)]
pub struct Imported {
    pub format: Format,
    /// Each knob's text, with the field it came from.
    knobs: Vec<(&'static Knob, String, String)>,
    pub run: RunSettings,
    pub readings: Vec<Reading>,
}

impl Imported {
    fn new(format: Format) -> Imported {
        let engine = format.engine().name().to_string();
        Imported {
            format,
            knobs: vec![(knob("engine"), engine, "(the form)".to_string())],
            run: RunSettings::default(),
            readings: Vec::new(),
        }
    }

    /// Sets the knob `flag` to `text`, read from `field`'s `value`.
    fn knob(&mut self, field: &str, value: impl fmt::Display, flag: &'static str, text: String) {
        self.knobs
            .push((knob(flag), text.clone(), field.to_string()));
        self.read(field, value, Became::Knob(flag, text));
    }

    /// The knob `flag` at the source engine's default, which the source is silent on.
    fn default(&mut self, field: &str, flag: &'static str, text: &str) {
        self.knob(field, "(not given)", flag, text.to_string());
    }

    fn read(&mut self, field: &str, value: impl fmt::Display, became: Became) {
        self.readings.push(Reading {
            field: field.to_string(),
            value: value.to_string(),
            became,
        });
    }

    /// Stop strings: a string or a list of them.
    fn stops(&mut self, field: &str, value: &Value) -> Result<(), ImportError> {
        let stops = strings(field, value)?;
        let words = stops
            .iter()
            .map(|s| format!("--stop {s:?}"))
            .collect::<Vec<_>>()
            .join(" ");
        self.run.stop.extend(stops);
        self.read(field, value_text(value), Became::Run(words));
        Ok(())
    }

    fn left_alone(&mut self, field: &str, value: impl fmt::Display, why: &str) {
        self.read(field, value, Became::LeftAlone(why.to_string()));
    }

    fn not_understood(&mut self, field: &str, value: impl fmt::Display, why: &str) {
        self.read(field, value, Became::NotUnderstood(why.to_string()));
    }

    /// The fields not understood.
    pub fn not_understood_fields(&self) -> Vec<&str> {
        self.readings
            .iter()
            .filter(|r| matches!(r.became, Became::NotUnderstood(_)))
            .map(|r| r.field.as_str())
            .collect()
    }

    /// The policy's knobs as a request, each knob given on `typed` taking the place of the
    /// imported one: what a command line or a form says beats the file.
    pub fn request(&self, typed: &PolicyRequest) -> PolicyRequest {
        let kept = self
            .knobs
            .iter()
            .filter(|(k, _, _)| {
                !typed.given(k.flag)
                    && !k.conflicts.iter().any(|c| typed.given(c))
                    && !typed
                        .pairs()
                        .iter()
                        .any(|(t, _)| t.conflicts.contains(&k.flag))
            })
            .map(|(k, text, _)| (*k, text.clone()));
        PolicyRequest::new(kept.chain(typed.pairs().iter().cloned()))
    }

    /// The policy alone, each knob's refusal naming the field it was read from.
    pub fn policy(&self) -> Result<Policy, ImportError> {
        let request = PolicyRequest::new(self.knobs.iter().map(|(k, t, _)| (*k, t.clone())));
        request.policy(1.0).map_err(|error| {
            let field = self
                .knobs
                .iter()
                .find(|(k, t, _)| *k == error.knob && *t == error.text)
                .map(|(_, _, field)| field.clone())
                .unwrap_or_default();
            ImportError::Knob { field, error }
        })
    }
}

fn knob(flag: &str) -> &'static Knob {
    Knob::named(flag).expect("a knob of the table")
}

/// Why a policy could not be imported.
#[derive(Clone, Debug, PartialEq)]
pub enum ImportError {
    /// A command line that does not split into words.
    Syntax { format: Format, message: String },
    /// Text that begins as a JSON object and is not one.
    Json { message: String },
    /// A field's value is not what the form allows.
    Field {
        field: String,
        value: String,
        expected: &'static str,
    },
    /// A field's value read as a knob, which refused it.
    Knob { field: String, error: KnobError },
    /// Fields that are not understood, when the import is not lenient.
    NotUnderstood { format: Format, fields: Vec<String> },
    /// More than [`MAX_BYTES`] of text.
    TooLong { bytes: usize },
}

impl fmt::Display for ImportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ImportError::Syntax { format, message } => {
                write!(f, "this is not {}: {message}", format.title())
            }
            ImportError::Json { message } => write!(
                f,
                "this is not a JSON object (a generation config or a request body): {message}"
            ),
            ImportError::Field {
                field,
                value,
                expected,
            } => write!(f, "{field} must be {expected}, but it is {value}"),
            ImportError::Knob { field, error } => write!(f, "{field}: {error}"),
            ImportError::NotUnderstood { format, fields } => write!(
                f,
                "{} has fields this lab does not understand: {} (--lenient reads the rest and warns)",
                format.title(),
                fields.join(", ")
            ),
            ImportError::TooLong { bytes } => write!(
                f,
                "a policy of {bytes} bytes is more than the {MAX_BYTES} a policy may hold"
            ),
        }
    }
}

impl std::error::Error for ImportError {}

/// Reads a policy from `text`: a JSON object is a Hugging Face `generation_config.json`
/// when it has one of its own fields, or else a request body (vLLM's when it has one of
/// vLLM's extra fields); anything else is a llama.cpp command line. Fields not understood
/// are an error unless `lenient`.
pub fn import(text: &str, lenient: bool) -> Result<Imported, ImportError> {
    if text.len() > MAX_BYTES {
        return Err(ImportError::TooLong { bytes: text.len() });
    }
    let trimmed = text.trim_start();
    let imported = if trimmed.starts_with('{') {
        let object: Map<String, Value> =
            serde_json::from_str(text).map_err(|e| ImportError::Json {
                message: e.to_string(),
            })?;
        if hf::is_hf(&object) {
            hf::read(&object)?
        } else {
            openai::read(&object)?
        }
    } else {
        llama_cpp::read(text)?
    };
    let unknown = imported.not_understood_fields();
    if !lenient && !unknown.is_empty() {
        return Err(ImportError::NotUnderstood {
            format: imported.format,
            fields: unknown.into_iter().map(str::to_string).collect(),
        });
    }
    Ok(imported)
}

/// A policy written in another form, and what of the run's settings it left out.
#[derive(Clone, Debug, PartialEq)]
pub struct Written {
    pub text: String,
    /// Run settings the form has no place for, by name.
    pub left_out: Vec<String>,
}

/// Knobs the target form cannot express, each with its value and why.
#[derive(Clone, Debug, PartialEq)]
pub struct WriteError {
    pub format: Format,
    pub knobs: Vec<(String, String)>,
}

impl fmt::Display for WriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let each: Vec<String> = self
            .knobs
            .iter()
            .map(|(knob, why)| format!("{knob} ({why})"))
            .collect();
        write!(
            f,
            "{} cannot express {}",
            self.format.title(),
            each.join("; ")
        )
    }
}

impl std::error::Error for WriteError {}

/// Writes `policy` and the run's settings as `format`; DRY's sequence breakers are written
/// from `breakers`, their texts, where the form takes text. Every knob the form cannot
/// express is named in the error.
pub fn write(
    policy: &Policy,
    run: &RunSettings,
    breakers: &[String],
    format: Format,
) -> Result<Written, WriteError> {
    let mut out = Out::default();
    match format {
        Format::Hf => hf::write(policy, run, &mut out),
        Format::OpenAi | Format::Vllm => openai::write(policy, run, format, &mut out),
        Format::LlamaCpp => llama_cpp::write(policy, run, breakers, &mut out),
    }
    if !out.refused.is_empty() {
        return Err(WriteError {
            format,
            knobs: out.refused,
        });
    }
    let text = match format {
        Format::LlamaCpp => out.line.join(" "),
        _ => serde_json::to_string_pretty(&Value::Object(out.json)).unwrap_or_default() + "\n",
    };
    Ok(Written {
        text,
        left_out: out.left_out,
    })
}

/// The policy and the run's settings as `decode-lab`'s own flags: every knob away from its
/// default, the temperature always (the commands' defaults differ), DRY's breakers as
/// `breakers`' texts, then the run's; what no flag holds is named in `left_out`.
pub fn flags(policy: &Policy, run: &RunSettings, breakers: &[String]) -> Written {
    let mut words: Vec<String> = Vec::new();
    // DRY's breakers are text the command finds in its vocabulary, not the policy's ids.
    for knob in crate::KNOBS
        .iter()
        .filter(|k| k.kind != crate::KnobKind::Texts)
    {
        let text = match knob.flag {
            "temperature" => Some(knob.text(policy)),
            _ => knob.changed(policy),
        };
        if let Some(text) = text {
            words.push(format!("--{}", knob.flag));
            words.push(llama_cpp::quoted(&text));
        }
    }
    for breaker in breakers {
        words.push(format!(
            "--dry-sequence-breaker {}",
            llama_cpp::quoted(breaker)
        ));
    }
    if let Some(seed) = run.seed {
        words.push(format!("--seed {seed}"));
    }
    if let Some(n) = run.max_tokens {
        words.push(format!("--max-tokens {n}"));
    }
    for stop in &run.stop {
        words.push(format!("--stop {}", llama_cpp::quoted(stop)));
    }
    for id in &run.stop_tokens {
        words.push(format!("--stop-token {id}"));
    }
    let mut out = Out::default();
    out.leave_out_vocabulary(run);
    Written {
        text: words.join(" "),
        left_out: out.left_out,
    }
}

/// What a writer builds.
#[derive(Default)]
struct Out {
    json: Map<String, Value>,
    line: Vec<String>,
    refused: Vec<(String, String)>,
    left_out: Vec<String>,
}

impl Out {
    /// Refuses the knob `flag` at `policy`'s value, unless it is at its default.
    fn refuse_unless_default(&mut self, policy: &Policy, flag: &str, why: &str) {
        if let Some(text) = knob(flag).changed(policy) {
            self.refused
                .push((format!("{flag} {}", shown(&text)), why.to_string()));
        }
    }
}

/// The first two stages `policy` switches on that it runs in the other order from
/// `target`'s chain: a form whose order is fixed cannot express it. A greedy policy's
/// truncations that always keep the most probable token (top-k, top-p, min-p, ε, η,
/// top-nσ, top-H) do not count: the argmax survives them wherever they run. The penalties,
/// DRY, typical and XTC can move it, so their place against the greedy choice counts.
fn order_against(policy: &Policy, target: &[Sampler]) -> Option<(Sampler, Sampler)> {
    let greedy = policy.is_greedy();
    let keeps_the_top = |s: &Sampler| {
        matches!(
            s,
            Sampler::TopK
                | Sampler::TopP
                | Sampler::MinP
                | Sampler::Epsilon
                | Sampler::Eta
                | Sampler::TopNSigma
                | Sampler::TopH
        )
    };
    let on: Vec<Sampler> = policy
        .chain()
        .iter()
        .copied()
        .filter(|s| s.is_on(policy) && target.contains(s) && !(greedy && keeps_the_top(s)))
        .collect();
    let at = |s: &Sampler| target.iter().position(|t| t == s);
    on.windows(2)
        .find(|pair| at(&pair[0]) > at(&pair[1]))
        .map(|pair| (pair[0], pair[1]))
}

impl Out {
    /// Refuses penalties that count other tokens under `target`'s engine than under the
    /// policy's (`engine.rs`'s table): llama.cpp penalises the last `penalty_last_n` tokens
    /// of prompt and output (64 unless given), Hugging Face and vLLM the whole text for the
    /// repetition penalty, and vLLM (and the lab) only the output for the frequency and
    /// presence penalties. A window of -1 (all of it) is llama.cpp's way to the whole text.
    fn refuse_penalty_counts(&mut self, policy: &Policy, target: Engine) {
        let from = policy.engine;
        let llama = |e: Engine| e == Engine::LlamaCpp;
        if llama(from) == llama(target) {
            return;
        }
        let whole_window = policy.penalty_last_n == Some(-1);
        if llama(from) && policy.repetition_penalty != 1.0 && !whole_window {
            let n = policy
                .penalty_last_n
                .unwrap_or(crate::engine::LLAMA_CPP_PENALTY_LAST_N);
            self.refused.push((
                format!("repetition-penalty {}", num_text(policy.repetition_penalty)),
                format!(
                    "llama.cpp penalises the last {n} tokens, {} the whole text",
                    target.name()
                ),
            ));
        }
        for (flag, x) in [
            ("frequency-penalty", policy.frequency_penalty),
            ("presence-penalty", policy.presence_penalty),
        ] {
            if x != 0.0 {
                let why = match llama(from) {
                    true => "llama.cpp counts the prompt's tokens too, vLLM only the output's",
                    false => {
                        "this policy counts only the output's tokens, llama.cpp the prompt's too"
                    }
                };
                self.refused
                    .push((format!("{flag} {}", num_text(x)), why.to_string()));
            }
        }
    }

    /// Names the run's settings found in a vocabulary, which only vLLM's form holds.
    fn leave_out_vocabulary(&mut self, run: &RunSettings) {
        if run.allowed_tokens.is_some() {
            self.left_out.push("allowed token ids".into());
        }
        if !run.bad_word_texts.is_empty() {
            self.left_out.push("bad words as text".into());
        }
    }

    /// Refuses the policy's order where it differs from `target`'s, which `whose` runs.
    fn refuse_order(&mut self, policy: &Policy, target: &[Sampler], whose: &str) {
        if let Some((a, b)) = order_against(policy, target) {
            self.refused.push((
                format!("the order {} before {}", a.name(), b.name()),
                format!("{whose} runs {} first", b.name()),
            ));
        }
    }
}

fn shown(text: &str) -> &str {
    match text {
        "" => "off",
        t => t,
    }
}

/// A JSON number from an f64 (finite: every knob's number is).
fn number(x: f64) -> Value {
    serde_json::Number::from_f64(x)
        .map(Value::Number)
        .unwrap_or(Value::Null)
}

/// A JSON value as the readings show it.
fn value_text(value: &Value) -> String {
    match value {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}

/// The number in `value`, or a field error.
fn read_number(field: &str, value: &Value) -> Result<f64, ImportError> {
    value
        .as_f64()
        .filter(|x| x.is_finite())
        .ok_or_else(|| field_error(field, value, "a number"))
}

/// The whole number in `value` (a JSON integer of at least 0), or a field error.
fn read_whole(field: &str, value: &Value) -> Result<u64, ImportError> {
    value
        .as_u64()
        .ok_or_else(|| field_error(field, value, "a whole number of at least 0"))
}

/// A token id (a JSON integer from 0 to 2³² − 1).
fn read_id(field: &str, value: &Value) -> Result<u32, ImportError> {
    value
        .as_u64()
        .and_then(|id| u32::try_from(id).ok())
        .ok_or_else(|| field_error(field, value, "a token id"))
}

/// A list of token ids, or one.
fn read_ids(field: &str, value: &Value) -> Result<Vec<u32>, ImportError> {
    match value {
        Value::Array(items) => items.iter().map(|v| read_id(field, v)).collect(),
        one => Ok(vec![read_id(field, one)?]),
    }
}

/// A string or a list of strings.
fn strings(key: &str, value: &Value) -> Result<Vec<String>, ImportError> {
    let expected = "a string or a list of strings";
    match value {
        Value::String(s) => Ok(vec![s.clone()]),
        Value::Array(items) => items
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| field_error(key, v, expected))
            })
            .collect(),
        other => Err(field_error(key, other, expected)),
    }
}

/// Sets the knob `flag` to the number in `field`'s `value`.
fn knob_number(
    out: &mut Imported,
    field: &str,
    value: &Value,
    flag: &'static str,
) -> Result<(), ImportError> {
    let x = read_number(field, value)?;
    out.knob(field, value, flag, num_text(x));
    Ok(())
}

fn field_error(field: &str, value: &Value, expected: &'static str) -> ImportError {
    ImportError::Field {
        field: field.to_string(),
        value: value_text(value),
        expected,
    }
}

fn ids_text(ids: &[u32]) -> String {
    ids.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
}

fn num_text(x: f64) -> String {
    Shortest(x).to_string()
}

#[cfg(test)]
mod tests;
