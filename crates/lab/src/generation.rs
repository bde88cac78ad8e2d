//! The Generate panel's one interface to the core: the form (and the URL) in, a validated
//! request out; the model files fetched and checked; the generation loop driven over the
//! [`gpu::Runtime`] (WebGPU or the CPU reference) with every step handed back as plain data.
//!
//! Nothing here touches the DOM: fetching, the clock and yielding to the browser come in as
//! arguments, so the whole path runs natively in the tests (on the CPU backend) and the
//! components only draw.

use gpu::{BackendChoice, Faults, Runtime};
use model::{ModelConfig, Precision, Transformer};
use policy::generate::StepRecord;
use policy::{
    Backend, BackendKind, Clock, Generation, ModelCall, Observer, Policy, ReplayReport, RunConfig,
    RunRecord, SeedSource, StopConfig,
};
use tokenizer::Tokenizer;

use crate::engine::{number, sentence, whole};

/// Where the page finds the model, relative to itself (Trunk copies the directory there).
pub const MODEL_DIR: &str = "models/decode-lab-tiny-v1";

/// The Generate form, as the learner typed it (or as the URL gave it).
#[derive(Clone, Debug, PartialEq)]
pub struct GenerateForm {
    pub prompt: String,
    pub max_tokens: String,
    pub temperature: String,
    pub top_k: String,
    pub top_p: String,
    pub min_p: String,
    pub repetition_penalty: String,
    /// Stop strings, one per line, `\n` for a line break.
    pub stop: String,
    /// Stop token ids, comma-separated.
    pub stop_tokens: String,
    pub seed: String,
    pub precision: Precision,
    pub backend: BackendChoice,
    /// Faults to inject (`Faults::parse` names); empty for none. Only the URL sets it.
    pub fault: String,
}

impl Default for GenerateForm {
    fn default() -> GenerateForm {
        GenerateForm {
            prompt: "The model".into(),
            max_tokens: "32".into(),
            temperature: "0.7".into(),
            top_k: "40".into(),
            top_p: "1".into(),
            min_p: "0".into(),
            repetition_penalty: "1".into(),
            stop: String::new(),
            stop_tokens: String::new(),
            seed: "7".into(),
            precision: Precision::F32,
            backend: BackendChoice::Gpu,
            fault: String::new(),
        }
    }
}

/// A checked form: what to run, on which backend, with which faults.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    /// Everything that decides the tokens; `policy.eos_token` is set once the tokenizer is
    /// loaded ([`with_eos`]), as `decode-lab generate` does.
    pub config: RunConfig,
    pub precision: Precision,
    pub backend: BackendChoice,
    pub faults: Faults,
    /// The URL's `fault=panic`: the run panics, to test that the page reports it.
    pub inject_panic: bool,
}

impl GenerateForm {
    /// The form a URL's query asks for: `backend=gpu|cpu`, `fault=…`, `prompt`, `max`,
    /// `temperature`, `top_k`, `top_p`, `seed`, `precision=f32|int8` (and `run=1`, which the
    /// panel reads to start a run as soon as the page loads). Missing keys keep the
    /// defaults; an unknown backend or precision is reported by [`url_problems`].
    ///
    /// [`url_problems`]: GenerateForm::url_problems
    pub fn from_query<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> GenerateForm {
        let mut form = GenerateForm::default();
        for (key, value) in pairs {
            match key {
                "prompt" => form.prompt = value.to_string(),
                "max" | "max_tokens" => form.max_tokens = value.to_string(),
                "temperature" => form.temperature = value.to_string(),
                "top_k" => form.top_k = value.to_string(),
                "top_p" => form.top_p = value.to_string(),
                "min_p" => form.min_p = value.to_string(),
                "repetition_penalty" => form.repetition_penalty = value.to_string(),
                "stop" => form.stop = value.to_string(),
                "stop_tokens" => form.stop_tokens = value.to_string(),
                "seed" => form.seed = value.to_string(),
                "precision" => {
                    if let Ok(p) = value.trim().parse() {
                        form.precision = p;
                    }
                }
                "backend" => {
                    if let Ok(b) = value.trim().parse() {
                        form.backend = b;
                    }
                }
                "fault" => form.fault = value.to_string(),
                _ => {}
            }
        }
        form
    }

    /// What a URL's query says that the form cannot take, in words.
    pub fn url_problems<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Vec<String> {
        let mut problems = Vec::new();
        for (key, value) in pairs {
            match key {
                "backend" if value.trim().parse::<BackendChoice>().is_err() => problems.push(format!(
                    "The URL asks for backend \"{value}\", which is not one of gpu or cpu; using WebGPU."
                )),
                "precision" if value.trim().parse::<Precision>().is_err() => problems.push(format!(
                    "The URL asks for precision \"{value}\", which is not one of f32 or int8; using f32."
                )),
                _ => {}
            }
        }
        problems
    }

    /// The query that reproduces this form (the inverse of [`from_query`](Self::from_query)).
    pub fn to_query(&self) -> Vec<(&'static str, String)> {
        let mut pairs = vec![
            ("backend", self.backend.to_string()),
            ("precision", self.precision.to_string()),
            ("prompt", self.prompt.clone()),
            ("max", self.max_tokens.trim().to_string()),
            ("temperature", self.temperature.trim().to_string()),
            ("top_k", self.top_k.trim().to_string()),
            ("top_p", self.top_p.trim().to_string()),
            ("seed", self.seed.trim().to_string()),
        ];
        for (key, value, default) in [
            ("min_p", &self.min_p, "0"),
            ("repetition_penalty", &self.repetition_penalty, "1"),
            ("stop_tokens", &self.stop_tokens, ""),
        ] {
            if value.trim() != default {
                pairs.push((key, value.trim().to_string()));
            }
        }
        if !self.stop.is_empty() {
            pairs.push(("stop", self.stop.clone()));
        }
        if !self.fault.trim().is_empty() {
            pairs.push(("fault", self.fault.trim().to_string()));
        }
        pairs
    }

    /// Checks every field; an error is one sentence naming the value.
    pub fn parse(&self) -> Result<Request, String> {
        if self.prompt.trim().is_empty() {
            return Err(
                "Type a prompt: the model needs at least one token to start from.".to_string(),
            );
        }
        let max_tokens = whole(&self.max_tokens, "Max new tokens")?;
        if max_tokens == 0 {
            return Err("Max new tokens must be at least 1, but it is 0.".to_string());
        }
        let policy = Policy {
            temperature: number(&self.temperature, "Temperature")?,
            top_k: whole(&self.top_k, "Top-k")? as usize,
            top_p: number(&self.top_p, "Top-p")?,
            min_p: number(&self.min_p, "Min-p")?,
            repetition_penalty: number(&self.repetition_penalty, "Repetition penalty")?,
            ..Policy::default()
        };
        // The ranges do not depend on the vocabulary (no token ids are set here).
        policy
            .validate(usize::MAX)
            .map_err(|e| sentence(e.to_string()))?;
        let seed = whole(&self.seed, "Seed")?;
        let (panics, gpu_faults): (Vec<&str>, Vec<&str>) = self
            .fault
            .split(',')
            .map(str::trim)
            .filter(|f| !f.is_empty())
            .partition(|f| *f == "panic");
        let faults = Faults::parse(&gpu_faults.join(","))
            .map_err(|e| sentence(format!("the URL's fault: {e}")))?;
        Ok(Request {
            config: RunConfig {
                app_version: env!("CARGO_PKG_VERSION").into(),
                prompt_template: "{prompt}".into(),
                prompt: self.prompt.clone(),
                policy,
                seed,
                seed_source: SeedSource::User,
                max_tokens: max_tokens as usize,
                stop: StopConfig {
                    strings: self
                        .stop
                        .lines()
                        .filter(|line| !line.is_empty())
                        .map(unescape)
                        .collect(),
                    tokens: stop_tokens(&self.stop_tokens)?,
                },
            },
            precision: self.precision,
            backend: self.backend,
            faults,
            inject_panic: !panics.is_empty(),
        })
    }
}

/// A stop string as typed on one line: `\n` is a line break, `\t` a tab, `\\` a backslash.
fn unescape(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('\\') => out.push('\\'),
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    out
}

/// Stop token ids, `5, 17`; whether they exist is checked against the vocabulary when the
/// run starts.
fn stop_tokens(text: &str) -> Result<Vec<u32>, String> {
    text.split(|c: char| c == ',' || c.is_whitespace())
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<u32>()
                .map_err(|_| format!("Stop token \"{s}\" is not a token id (a whole number)."))
        })
        .collect()
}

/// A run record read from an exported file (the first, when a JSONL export holds several),
/// or what is wrong with it in words. `decode-lab replay` reads files the same way.
pub fn parse_record(text: &str) -> Result<RunRecord, String> {
    policy::parse_records(text)
        .map_err(|e| format!("This file is not a run record the lab can read: {e}."))?
        .into_iter()
        .next()
        .ok_or_else(|| "This file holds no run record.".to_string())
}

/// The request that replays `record`: its own configuration, on the weights it names, on
/// `backend`.
pub fn replay_request(
    record: &RunRecord,
    config: &ModelConfig,
    backend: BackendChoice,
) -> Result<Request, String> {
    let shipped = |precision: Precision| {
        config
            .file(precision.role())
            .is_ok_and(|f| f.sha256 == record.model.hash)
    };
    let precision = Precision::ALL
        .into_iter()
        .find(|&p| shipped(p))
        .ok_or_else(|| {
            format!(
                "This record was made with model {}, which is not one of the weights this lab ships ({}); it cannot be replayed here.",
                record.model,
                config.name
            )
        })?;
    Ok(Request {
        config: record.config.clone(),
        precision,
        backend,
        faults: Faults::default(),
        inject_panic: false,
    })
}

/// A replay's verdict in words: identical, or the first step that differs.
pub fn replay_verdict(recorded: &RunRecord, replayed: &RunRecord) -> (bool, String) {
    if recorded.tokenizer != replayed.tokenizer {
        return (
            false,
            format!(
                "Not replayable here: the record's tokenizer is {}, this lab's is {}.",
                recorded.tokenizer, replayed.tokenizer
            ),
        );
    }
    match policy::record::compare(recorded, replayed) {
        ReplayReport::Identical { steps } => (
            true,
            format!("Replay identical: all {steps} steps chose the same tokens with the same probabilities, and the run stopped for the same reason."),
        ),
        ReplayReport::Differs { step, detail, .. } => {
            (false, format!("Replay differs first at step {step}: {detail}."))
        }
        altered @ ReplayReport::Altered { .. } => (false, format!("This record was {altered}.")),
    }
}

/// The run configuration with the tokenizer's end-of-text token as the end of sequence, as
/// `decode-lab generate` sets it when `--eos` is not given.
pub fn with_eos(mut config: RunConfig, tokenizer: &Tokenizer) -> RunConfig {
    config
        .policy
        .eos_token
        .get_or_insert(tokenizer.end_of_text());
    config
}

/// The model's files, fetched and checked against the SHA-256 its config records.
pub struct ModelFiles {
    pub config: ModelConfig,
    pub tokenizer: Tokenizer,
    f32: Option<Vec<u8>>,
    int8: Option<Vec<u8>>,
}

/// Fetches `config.json` and `tokenizer.json` (checking the tokenizer's hash). `fetch`
/// gets a path relative to [`MODEL_DIR`] and returns the file's bytes; `progress` hears
/// each step in words.
pub async fn load_model(
    fetch: &impl AsyncFn(&str) -> Result<Vec<u8>, String>,
    progress: &mut impl FnMut(String),
) -> Result<ModelFiles, String> {
    progress("Fetching config.json…".to_string());
    let config_bytes = fetch("config.json").await?;
    let text = String::from_utf8(config_bytes)
        .map_err(|_| "config.json is not UTF-8 text.".to_string())?;
    let config =
        ModelConfig::from_json(&text).map_err(|e| sentence(format!("config.json: {e}")))?;
    let tokenizer_bytes = fetch_verified(&config, "tokenizer", fetch, progress).await?;
    let json = String::from_utf8(tokenizer_bytes)
        .map_err(|_| "tokenizer.json is not UTF-8 text.".to_string())?;
    let tokenizer =
        Tokenizer::from_json(&json).map_err(|e| sentence(format!("tokenizer.json: {e}")))?;
    config
        .check_vocabulary(tokenizer.vocab_size())
        .map_err(|e| sentence(format!("tokenizer.json: {e}")))?;
    Ok(ModelFiles {
        config,
        tokenizer,
        f32: None,
        int8: None,
    })
}

async fn fetch_verified(
    config: &ModelConfig,
    role: &str,
    fetch: &impl AsyncFn(&str) -> Result<Vec<u8>, String>,
    progress: &mut impl FnMut(String),
) -> Result<Vec<u8>, String> {
    let file = config.file(role).map_err(|e| sentence(e.to_string()))?;
    progress(format!("Fetching {}…", file.path));
    let bytes = fetch(&file.path).await?;
    progress(format!("Checking the SHA-256 of {}…", file.path));
    config
        .verify(role, &bytes)
        .map_err(|e| sentence(e.to_string()))?;
    Ok(bytes)
}

impl ModelFiles {
    /// Fetches (once) the weights a request needs: its precision's and, for int8 on the GPU,
    /// the f32 `cpu-reference` baseline it would fall back to.
    pub async fn ensure_weights(
        &mut self,
        precision: Precision,
        backend: BackendChoice,
        fetch: &impl AsyncFn(&str) -> Result<Vec<u8>, String>,
        progress: &mut impl FnMut(String),
    ) -> Result<(), String> {
        let need_f32 = precision == Precision::F32 || backend == BackendChoice::Gpu;
        if need_f32 && self.f32.is_none() {
            self.f32 =
                Some(fetch_verified(&self.config, Precision::F32.role(), fetch, progress).await?);
        }
        if precision == Precision::Int8 && self.int8.is_none() {
            self.int8 =
                Some(fetch_verified(&self.config, Precision::Int8.role(), fetch, progress).await?);
        }
        Ok(())
    }

    fn transformer(&self, precision: Precision) -> Result<Transformer, String> {
        let bytes = match precision {
            Precision::F32 => &self.f32,
            Precision::Int8 => &self.int8,
        }
        .as_ref()
        .ok_or_else(|| format!("The {precision} weights are not loaded yet."))?;
        Transformer::from_safetensors(self.config.clone(), bytes)
            .map_err(|e| sentence(format!("{}: {e}", precision.role())))
    }

    /// Starts the runtime a request asks for (after [`ensure_weights`](Self::ensure_weights)).
    /// On the GPU this requests a device, uploads the weights and runs the canary; it falls
    /// back to `cpu-reference` (f32) rather than fail.
    pub async fn start(&self, request: &Request) -> Result<Runtime, String> {
        let reference = self.transformer(request.precision)?;
        let baseline = match (request.precision, request.backend) {
            (Precision::Int8, BackendChoice::Gpu) => Some(self.transformer(Precision::F32)?),
            _ => None,
        };
        Ok(Runtime::start(request.backend, reference, baseline, request.faults).await)
    }
}

/// The model's next-token logits after `prompt` (the f32 weights on the CPU reference), for
/// the decoding-step panel: the distribution a real model gives, one position.
pub async fn prompt_logits(
    files: &mut ModelFiles,
    prompt: &str,
    fetch: &impl AsyncFn(&str) -> Result<Vec<u8>, String>,
    progress: &mut impl FnMut(String),
) -> Result<Vec<f32>, String> {
    let tokens = files.tokenizer.encode(prompt);
    if tokens.is_empty() {
        return Err("Type a prompt: the model needs at least one token to start from.".to_string());
    }
    files
        .ensure_weights(Precision::F32, BackendChoice::Cpu, fetch, progress)
        .await?;
    let mut model = files.transformer(Precision::F32)?;
    let context = model.config().context_len;
    if tokens.len() > context {
        return Err(format!(
            "The prompt is {} tokens long, more than the model's context of {context}.",
            tokens.len()
        ));
    }
    model
        .prefill(&tokens)
        .map(<[f32]>::to_vec)
        .map_err(|e| sentence(format!("the model failed: {e}")))
}

/// Logits as the decoding-step panel's text: four decimals, comma-separated.
pub fn logits_text(logits: &[f32]) -> String {
    logits
        .iter()
        .map(|l| format!("{l:.4}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Asks the page whether the learner pressed Stop.
struct Cancel<'a>(&'a dyn Fn() -> bool);

impl Observer for Cancel<'_> {
    fn cancelled(&mut self) -> bool {
        (self.0)()
    }
}

/// Generates one run on `runtime`, the same loop `decode-lab generate` runs: each step is
/// shown to `on_step` with the runtime as it is at that moment (its backend, its GPU's
/// timings of the call); `pause` is awaited after each
/// step so the page can draw; `cancelled` is asked before every model call.
pub async fn generate(
    runtime: &mut Runtime,
    tokenizer: &Tokenizer,
    config: &RunConfig,
    clock: &mut dyn Clock,
    cancelled: &dyn Fn() -> bool,
    on_step: &mut impl FnMut(&StepRecord, &Runtime),
    pause: &impl AsyncFn(),
) -> Result<RunRecord, String> {
    let start = clock.now_us();
    let mut run = Generation::new(
        runtime.vocab_size(),
        runtime.context_len(),
        tokenizer,
        config,
        start,
    )
    .map_err(|e| sentence(e.to_string()))?;
    let mut observer = Cancel(cancelled);
    loop {
        let draw = run.peek_draw();
        let policy = run.policy().clone();
        // The prompt is borrowed from the run; copy it before awaiting the model.
        let (prompt, token) = match run.next_call(&mut observer) {
            None => break,
            Some(ModelCall::Prefill(prompt)) => (Some(prompt.to_vec()), 0),
            Some(ModelCall::Decode(token)) => (None, token),
        };
        let started = clock.now_us();
        // The policy step on the GPU when it can take it there (one small read-back), else
        // the logits and the step here.
        let step = match runtime
            .choose(prompt.as_deref(), token, &policy, draw)
            .await
        {
            Some(outcome) => {
                let outcome = outcome.map_err(|e| sentence(format!("the model failed: {e}")))?;
                run.accept_outcome(outcome, started, clock, &mut observer)
            }
            None => {
                let logits = match &prompt {
                    Some(prompt) => runtime.prefill(prompt).await,
                    None => runtime.decode_step(token).await,
                }
                .map_err(|e| sentence(format!("the model failed: {e}")))?;
                run.accept(logits, started, clock, &mut observer)
            }
        }
        .map_err(|e| sentence(e.to_string()))?;
        on_step(step, runtime);
        pause().await;
    }
    Ok(run.finish(runtime.id(), runtime.backend().clone()))
}

/// The backend in words, for the status line. `browser_adapter` is what the browser itself
/// says about its adapter, which names it better than wgpu does on the web.
pub fn backend_status(backend: &Backend, browser_adapter: Option<&str>) -> String {
    if backend.name == BackendKind::WebGpu {
        let adapter = browser_adapter
            .or(backend.adapter.as_deref())
            .unwrap_or("unnamed");
        format!("Running on WebGPU (adapter: {adapter}).")
    } else if let Some(reason) = &backend.degraded_reason {
        let from = match backend.degraded_at_step {
            Some(step) if step > 0 => format!(" from model call {step} on"),
            _ => String::new(),
        };
        format!(
            "WebGPU unavailable — fell back to cpu-reference{from}: {}.",
            reason.trim_end().trim_end_matches('.')
        )
    } else {
        "Running on the CPU reference (cpu-reference).".to_string()
    }
}

/// A run's speed: time to first token (from the run's start) and decode tokens per second
/// (every step after the first, model and policy time).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Speed {
    pub ttft_ms: f64,
    pub decode_tok_s: Option<f64>,
}

pub fn speed(record: &RunRecord) -> Speed {
    let decode: Vec<f64> = record.token_latencies_us.iter().skip(1).copied().collect();
    let total: f64 = decode.iter().sum();
    Speed {
        ttft_ms: record.ttft_us / 1e3,
        decode_tok_s: (!decode.is_empty() && total > 0.0)
            .then(|| decode.len() as f64 / (total / 1e6)),
    }
}

/// A token's text for a table cell: whitespace and control characters made visible.
pub fn visible(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            ' ' => "␣".to_string(),
            '\n' => "\\n".to_string(),
            '\t' => "\\t".to_string(),
            c if c.is_control() => c.escape_unicode().to_string(),
            c => c.to_string(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{read, Ticks};

    #[test]
    fn the_default_form_parses() {
        let request = GenerateForm::default().parse().unwrap();
        assert_eq!(request.config.prompt, "The model");
        assert_eq!(request.config.max_tokens, 32);
        assert_eq!(request.config.policy.temperature, 0.7);
        assert_eq!(request.config.policy.top_k, 40);
        assert_eq!(request.config.seed, 7);
        assert_eq!(request.backend, BackendChoice::Gpu);
        assert_eq!(request.faults, Faults::default());
    }

    #[test]
    fn bad_input_becomes_a_sentence() {
        let error = |f: fn(&mut GenerateForm)| {
            let mut form = GenerateForm::default();
            f(&mut form);
            form.parse().unwrap_err()
        };
        assert_eq!(
            error(|f| f.prompt = "  ".into()),
            "Type a prompt: the model needs at least one token to start from."
        );
        assert_eq!(
            error(|f| f.max_tokens = "many".into()),
            "Max new tokens must be a whole number of at least 0, but it is \"many\"."
        );
        assert_eq!(
            error(|f| f.max_tokens = "0".into()),
            "Max new tokens must be at least 1, but it is 0."
        );
        assert_eq!(
            error(|f| f.temperature = "-1".into()),
            "Temperature -1 is invalid: it must be a finite number, at least 0 (0 means greedy)."
        );
        assert_eq!(
            error(|f| f.top_p = "1.5".into()),
            "Top-p 1.5 is invalid: it must be greater than 0 and at most 1."
        );
        assert_eq!(
            error(|f| f.seed = "x".into()),
            "Seed must be a whole number of at least 0, but it is \"x\"."
        );
        assert_eq!(
            error(|f| f.stop_tokens = "5, five".into()),
            "Stop token \"five\" is not a token id (a whole number)."
        );
        assert_eq!(
            error(|f| f.repetition_penalty = "strong".into()),
            "Repetition penalty must be a number, but it is \"strong\"."
        );
        assert!(error(|f| f.fault = "gremlins".into())
            .starts_with("The URL's fault: unknown fault \"gremlins\""));
    }

    #[test]
    fn the_url_round_trips() {
        let form = GenerateForm {
            prompt: "Once upon".into(),
            max_tokens: "16".into(),
            temperature: "0".into(),
            backend: BackendChoice::Cpu,
            precision: Precision::Int8,
            fault: "device-lost@3".into(),
            stop: "\n\nThe end".into(),
            stop_tokens: "3".into(),
            min_p: "0.1".into(),
            repetition_penalty: "1.3".into(),
            ..GenerateForm::default()
        };
        let query = form.to_query();
        let back = GenerateForm::from_query(query.iter().map(|(k, v)| (*k, v.as_str())));
        assert_eq!(back, form);
        assert!(GenerateForm::url_problems(query.iter().map(|(k, v)| (*k, v.as_str()))).is_empty());

        let odd = [("backend", "tpu"), ("precision", "f16"), ("unknown", "1")];
        let form = GenerateForm::from_query(odd);
        assert_eq!(form.backend, BackendChoice::Gpu);
        assert_eq!(form.precision, Precision::F32);
        let problems = GenerateForm::url_problems(odd);
        assert_eq!(problems.len(), 2);
        assert!(problems[0].contains("\"tpu\""));
    }

    #[test]
    fn the_status_names_the_backend() {
        assert_eq!(
            backend_status(&Backend::cpu_reference(), None),
            "Running on the CPU reference (cpu-reference)."
        );
        let gpu = Backend {
            name: BackendKind::WebGpu,
            adapter: Some("swiftshader".into()),
            driver: None,
            degraded_reason: None,
            degraded_at_step: None,
        };
        assert_eq!(
            backend_status(&gpu, None),
            "Running on WebGPU (adapter: swiftshader)."
        );
        assert_eq!(
            backend_status(&gpu, Some("google swiftshader, fallback adapter")),
            "Running on WebGPU (adapter: google swiftshader, fallback adapter)."
        );
        let degraded = Backend {
            degraded_reason: Some("WebGPU is not available here".into()),
            ..Backend::cpu_reference()
        };
        assert_eq!(
            backend_status(&degraded, None),
            "WebGPU unavailable — fell back to cpu-reference: WebGPU is not available here."
        );
        let lost = Backend {
            degraded_reason: Some("the GPU device was lost: destroyed.\n".into()),
            degraded_at_step: Some(3),
            ..Backend::cpu_reference()
        };
        assert_eq!(
            backend_status(&lost, None),
            "WebGPU unavailable — fell back to cpu-reference from model call 3 on: the GPU device was lost: destroyed."
        );
    }

    #[test]
    fn visible_shows_whitespace() {
        assert_eq!(visible(" the\n"), "␣the\\n");
    }

    /// The panel's loop, on the CPU backend, makes the same tokens as the CLI's
    /// `policy::generate` over the CPU reference; a GPU request without a GPU (the `no-webgpu`
    /// fault) falls back, names the fallback and still makes them.
    #[test]
    fn the_panel_loop_matches_the_reference_generation() {
        pollster::block_on(async {
            let mut progress = Vec::new();
            let mut files = load_model(&read, &mut |m| progress.push(m)).await.unwrap();
            let form = GenerateForm {
                max_tokens: "12".into(),
                backend: BackendChoice::Cpu,
                ..GenerateForm::default()
            };
            let request = form.parse().unwrap();
            files
                .ensure_weights(request.precision, request.backend, &read, &mut |m| {
                    progress.push(m)
                })
                .await
                .unwrap();
            assert!(progress
                .iter()
                .any(|m| m.contains("SHA-256 of model.f32.safetensors")));
            let config = with_eos(request.config.clone(), &files.tokenizer);

            let mut reference = files.transformer(Precision::F32).unwrap();
            let expected = policy::generate(
                &mut reference,
                &files.tokenizer,
                &config,
                &mut Ticks(0.0),
                &mut policy::generate::Unobserved,
            )
            .unwrap();
            let expected: Vec<u32> = expected.steps.iter().map(|s| s.token).collect();
            assert_eq!(expected.len(), 12);

            for (backend, fault) in [(BackendChoice::Cpu, ""), (BackendChoice::Gpu, "no-webgpu")] {
                let request = GenerateForm {
                    backend,
                    fault: fault.into(),
                    ..form.clone()
                }
                .parse()
                .unwrap();
                let mut runtime = files.start(&request).await.unwrap();
                let mut seen = Vec::new();
                let record = generate(
                    &mut runtime,
                    &files.tokenizer,
                    &config,
                    &mut Ticks(0.0),
                    &|| false,
                    &mut |step, runtime| seen.push((step.token, runtime.backend().name)),
                    &async || {},
                )
                .await
                .unwrap();
                let tokens: Vec<u32> = record.steps.iter().map(|s| s.token).collect();
                assert_eq!(tokens, expected, "{fault}");
                assert_eq!(seen.len(), 12);
                assert!(seen
                    .iter()
                    .all(|(_, name)| *name == BackendKind::CpuReference));
                assert_eq!(record.backend.name, BackendKind::CpuReference);
                assert_eq!(
                    record.degraded_reason.is_some(),
                    backend == BackendChoice::Gpu
                );
                assert!(speed(&record).decode_tok_s.is_some());
            }
        });
    }

    /// A record exported as JSON (pretty or as a JSONL line) and imported again replays as
    /// identical on the CPU; one changed token is found at its step; garbage is named.
    #[test]
    fn an_exported_record_replays_identically() {
        pollster::block_on(async {
            let mut files = load_model(&read, &mut |_| {}).await.unwrap();
            let form = GenerateForm {
                max_tokens: "10".into(),
                backend: BackendChoice::Cpu,
                precision: Precision::Int8,
                stop: "\\n\\n\nThe end".into(),
                min_p: "0.05".into(),
                ..GenerateForm::default()
            };
            let request = form.parse().unwrap();
            assert_eq!(request.config.stop.strings, ["\n\n", "The end"]);
            files
                .ensure_weights(request.precision, request.backend, &read, &mut |_| {})
                .await
                .unwrap();
            let run = async |files: &ModelFiles, request: Request| {
                let config = with_eos(request.config.clone(), &files.tokenizer);
                let mut runtime = files.start(&request).await.unwrap();
                generate(
                    &mut runtime,
                    &files.tokenizer,
                    &config,
                    &mut Ticks(0.0),
                    &|| false,
                    &mut |_, _| {},
                    &async || {},
                )
                .await
                .unwrap()
            };
            let record = run(&files, request).await;
            for text in [
                serde_json::to_string_pretty(&record).unwrap(),
                format!("{}\n", serde_json::to_string(&record).unwrap()),
            ] {
                let imported = parse_record(&text).unwrap();
                let again = replay_request(&imported, &files.config, BackendChoice::Cpu).unwrap();
                assert_eq!(again.precision, Precision::Int8);
                let replayed = run(&files, again).await;
                let (same, words) = replay_verdict(&imported, &replayed);
                assert!(same, "{words}");
                assert!(words.starts_with("Replay identical"), "{words}");
            }
            let mut altered = record.clone();
            altered.steps[3].token ^= 1;
            let (same, words) = replay_verdict(&altered, &record);
            assert!(!same);
            assert!(
                words.starts_with("This record was altered after it was written"),
                "{words}"
            );
            // Without its digest (as a record written before digests), the step is named.
            altered.record_digest = None;
            let (same, words) = replay_verdict(&altered, &record);
            assert!(!same);
            assert!(
                words.starts_with("Replay differs first at step 3"),
                "{words}"
            );

            let mut foreign = record.clone();
            foreign.model.hash = "0".repeat(64);
            assert!(replay_request(&foreign, &files.config, BackendChoice::Cpu)
                .unwrap_err()
                .contains("not one of the weights this lab ships"));
            let error = parse_record("{\"not\": \"a record\"}").unwrap_err();
            assert!(
                error.starts_with("This file is not a run record the lab can read"),
                "{error}"
            );
        });
    }

    /// The step panel's logits for a prompt are the model's: equal to feeding the prompt one
    /// token at a time through the KV cache (prefill and decode are bit-identical), and their
    /// text parses back within the four decimals it keeps.
    #[test]
    fn prompt_logits_are_the_models_next_token_scores() {
        pollster::block_on(async {
            let mut files = load_model(&read, &mut |_| {}).await.unwrap();
            let logits = prompt_logits(&mut files, "The model", &read, &mut |_| {})
                .await
                .unwrap();
            assert_eq!(logits.len(), files.config.vocab_size);
            let tokens = files.tokenizer.encode("The model");
            assert!(tokens.len() > 1);
            let mut stepwise = files.transformer(Precision::F32).unwrap();
            let mut last = stepwise.prefill(&tokens[..1]).unwrap().to_vec();
            for &t in &tokens[1..] {
                last = stepwise.decode_step(t).unwrap().to_vec();
            }
            assert_eq!(logits, last);
            let parsed = crate::engine::parse_logits(&logits_text(&logits)).unwrap();
            for (a, b) in parsed.iter().zip(&logits) {
                assert!((a - f64::from(*b)).abs() <= 5e-5);
            }
            assert!(prompt_logits(&mut files, "", &read, &mut |_| {})
                .await
                .unwrap_err()
                .starts_with("Type a prompt"));
        });
    }

    #[test]
    fn a_bad_file_is_named() {
        pollster::block_on(async {
            let tampered = async |path: &str| -> Result<Vec<u8>, String> {
                let mut bytes = read(path).await?;
                if path == "tokenizer.json" {
                    bytes.push(b' ');
                }
                Ok(bytes)
            };
            let error = load_model(&tampered, &mut |_| {}).await.err().unwrap();
            assert!(
                error.starts_with("The tokenizer file has SHA-256"),
                "{error}"
            );
        });
    }

    #[test]
    fn stop_cancels_before_the_next_call() {
        pollster::block_on(async {
            let mut files = load_model(&read, &mut |_| {}).await.unwrap();
            let request = GenerateForm {
                backend: BackendChoice::Cpu,
                ..GenerateForm::default()
            }
            .parse()
            .unwrap();
            files
                .ensure_weights(request.precision, request.backend, &read, &mut |_| {})
                .await
                .unwrap();
            let mut runtime = files.start(&request).await.unwrap();
            let count = std::cell::Cell::new(0);
            let record = generate(
                &mut runtime,
                &files.tokenizer,
                &with_eos(request.config, &files.tokenizer),
                &mut Ticks(0.0),
                &|| count.get() >= 3,
                &mut |_, _| count.set(count.get() + 1),
                &async || {},
            )
            .await
            .unwrap();
            assert_eq!(record.steps.len(), 3);
            assert_eq!(record.stop_reason, policy::StopReason::Cancelled);
        });
    }
}
