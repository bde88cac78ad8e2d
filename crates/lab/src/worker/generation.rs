//! The model worker's run of the Generate panel's request: the model's files fetched and
//! checked, the runtime started, and the generation loop driven over the [`gpu::Runtime`]
//! (WebGPU or the CPU reference) with every step handed back as plain data; and a record to
//! replay read from its file's text, replayed on its own configuration, and judged.
//!
//! Nothing here touches the browser: fetching, the clock and yielding come in as arguments,
//! so the whole path runs natively in the tests (on the CPU backend).

use gpu::{Faults, Runtime};
use model::{ModelConfig, Transformer};
use policy::generate::StepRecord;
use policy::{
    BackendChoice, Clock, Generation, ModelCall, Observer, Precision, ReplayReport, RunConfig,
    RunRecord,
};
use tokenizer::Tokenizer;

use crate::worker::error::WorkerError;
use crate::worker::protocol::GenerateRequest;

/// What decides which runtime a run starts: the backend, the weights and the faults.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Start {
    pub backend: BackendChoice,
    pub precision: Precision,
    pub faults: Faults,
}

impl Start {
    /// What a Generate request starts; its fault names are read here, where the GPU runtime
    /// that knows them is.
    pub fn of(request: &GenerateRequest) -> Result<Start, WorkerError> {
        Ok(Start {
            backend: request.backend,
            precision: request.precision,
            faults: Faults::parse(&request.faults).map_err(WorkerError::Fault)?,
        })
    }
}

/// A run record read from an exported file (the first, when a JSONL export holds several),
/// or what is wrong with it. `decode-lab replay` reads files the same way.
pub fn parse_record(text: &str) -> Result<RunRecord, WorkerError> {
    policy::parse_records(text)
        .map_err(WorkerError::RecordFile)?
        .into_iter()
        .next()
        .ok_or(WorkerError::NoRecord)
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
/// What replays `record`: its own configuration, on the weights it names, on `backend`.
pub fn replay_request(
    record: &RunRecord,
    config: &ModelConfig,
    backend: BackendChoice,
) -> Result<(RunConfig, Start), WorkerError> {
    let shipped = |precision: Precision| {
        config
            .file(precision.role())
            .is_ok_and(|f| f.sha256 == record.model.hash)
    };
    let precision = Precision::ALL
        .into_iter()
        .find(|&p| shipped(p))
        .ok_or_else(|| WorkerError::NotShipped {
            model: record.model.clone(),
            lab: config.name.clone(),
        })?;
    let start = Start {
        backend,
        precision,
        faults: Faults::default(),
    };
    Ok((record.config.clone(), start))
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

/// The run configuration with DRY's sequence breakers found in the tokenizer's vocabulary
/// when DRY is on (`breakers` as typed, llama.cpp's when none is), as `decode-lab generate`
/// finds them. A replayed record keeps its own.
pub fn with_breakers(
    mut config: RunConfig,
    breakers: &[String],
    tokenizer: &Tokenizer,
) -> RunConfig {
    if config.policy.dry_multiplier != 0.0 {
        config.policy.dry_sequence_breakers = tokenizer.dry_sequence_breakers(breakers);
    }
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
/// gets a path relative to [`MODEL_DIR`](crate::worker::browser::MODEL_DIR) and returns the file's bytes; `progress` hears
/// each step in words.
pub async fn load_model(
    fetch: &impl AsyncFn(&str) -> Result<Vec<u8>, WorkerError>,
    progress: &mut impl FnMut(String),
) -> Result<ModelFiles, WorkerError> {
    progress("Fetching config.json…".to_string());
    let config_bytes = fetch("config.json").await?;
    let text = String::from_utf8(config_bytes).map_err(|_| WorkerError::NotUtf8 {
        file: "config.json",
    })?;
    let config = ModelConfig::from_json(&text).map_err(WorkerError::Config)?;
    let tokenizer_bytes = fetch_verified(&config, "tokenizer", fetch, progress).await?;
    let json = String::from_utf8(tokenizer_bytes).map_err(|_| WorkerError::NotUtf8 {
        file: "tokenizer.json",
    })?;
    let tokenizer = Tokenizer::from_json(&json).map_err(WorkerError::Tokenizer)?;
    config
        .check_vocabulary(tokenizer.vocab_size())
        .map_err(WorkerError::Vocabulary)?;
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
    fetch: &impl AsyncFn(&str) -> Result<Vec<u8>, WorkerError>,
    progress: &mut impl FnMut(String),
) -> Result<Vec<u8>, WorkerError> {
    let file = config.file(role).map_err(WorkerError::File)?;
    progress(format!("Fetching {}…", file.path));
    let bytes = fetch(&file.path).await?;
    progress(format!("Checking the SHA-256 of {}…", file.path));
    config.verify(role, &bytes).map_err(WorkerError::File)?;
    Ok(bytes)
}

impl ModelFiles {
    /// Fetches (once) the weights a request needs: its precision's and, for int8 on the GPU,
    /// the f32 `cpu-reference` baseline it would fall back to.
    pub async fn ensure_weights(
        &mut self,
        precision: Precision,
        backend: BackendChoice,
        fetch: &impl AsyncFn(&str) -> Result<Vec<u8>, WorkerError>,
        progress: &mut impl FnMut(String),
    ) -> Result<(), WorkerError> {
        let need_f32 = precision == Precision::F32 || backend.tries_gpu();
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

    fn transformer(&self, precision: Precision) -> Result<Transformer, WorkerError> {
        let bytes = match precision {
            Precision::F32 => &self.f32,
            Precision::Int8 => &self.int8,
        }
        .as_ref()
        .ok_or(WorkerError::NotLoaded { precision })?;
        Transformer::from_safetensors(self.config.clone(), bytes).map_err(|source| {
            WorkerError::Weights {
                role: precision.role(),
                source,
            }
        })
    }

    /// Starts the runtime a request asks for (after [`ensure_weights`](Self::ensure_weights)),
    /// without waiting: on the GPU the device, the upload and the canary run beside the
    /// runs, which decode on `cpu-reference` until the canary passes (see
    /// [`gpu::Runtime::start_beside`]); a failed start stays on the CPU and says why.
    pub fn start(&self, start: Start) -> Result<Runtime, WorkerError> {
        let reference = self.transformer(start.precision)?;
        let baseline = match (start.precision, start.backend) {
            (Precision::Int8, backend) if backend.tries_gpu() => {
                Some(self.transformer(Precision::F32)?)
            }
            _ => None,
        };
        Ok(Runtime::start_beside(
            start.backend,
            reference,
            baseline,
            start.faults,
        ))
    }
}

/// The model's next-token logits after `prompt` (the f32 weights on the CPU reference), for
/// the decoding-step panel: the distribution a real model gives, one position.
pub async fn prompt_logits(
    files: &mut ModelFiles,
    prompt: &str,
    fetch: &impl AsyncFn(&str) -> Result<Vec<u8>, WorkerError>,
    progress: &mut impl FnMut(String),
) -> Result<Vec<f32>, WorkerError> {
    let tokens = files.tokenizer.encode(prompt);
    if tokens.is_empty() {
        return Err(WorkerError::EmptyPrompt);
    }
    files
        .ensure_weights(Precision::F32, BackendChoice::Cpu, fetch, progress)
        .await?;
    let mut model = files.transformer(Precision::F32)?;
    let context = model.config().context_len;
    if tokens.len() > context {
        return Err(WorkerError::PromptTooLong {
            tokens: tokens.len(),
            context,
        });
    }
    model
        .prefill(&tokens)
        .map(<[f32]>::to_vec)
        .map_err(WorkerError::Model)
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
    on_step: &mut dyn FnMut(&StepRecord, &Runtime),
    pause: &impl AsyncFn(),
) -> Result<RunRecord, WorkerError> {
    let start = clock.now_us();
    let mut run = Generation::new(
        runtime.vocab_size(),
        runtime.context_len(),
        tokenizer,
        config,
        start,
    )?;
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
                let outcome = outcome.map_err(WorkerError::Gpu)?;
                run.accept_outcome(outcome, started, clock, &mut observer)
            }
            None => {
                let logits = match &prompt {
                    Some(prompt) => runtime.prefill(prompt).await,
                    None => runtime.decode_step(token).await,
                }
                .map_err(WorkerError::Model)?;
                run.accept(logits, started, clock, &mut observer)
            }
        }?;
        on_step(step, runtime);
        pause().await;
    }
    Ok(run.finish(runtime.id(), runtime.backend().clone()))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{read, Ticks};
    use policy::BackendKind;

    use crate::panels::generate::view_model::GenerateForm;
    use crate::widgets::form::Form;

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
            let request = form.check().unwrap();
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
                .check()
                .unwrap();
                let mut runtime = files.start(Start::of(&request).unwrap()).unwrap();
                // The GPU start's verdict before the run, so that the fallback is certain
                // to be in the record.
                runtime.settle().await;
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
            let mut form = GenerateForm {
                max_tokens: "10".into(),
                backend: BackendChoice::Cpu,
                precision: Precision::Int8,
                stop: "\\n\\n\nThe end".into(),
                ..GenerateForm::default()
            };
            form.policy[crate::widgets::knobs::at("min-p").unwrap()] = "0.05".into();
            let request = form.check().unwrap();
            assert_eq!(request.config.stop.strings, ["\n\n", "The end"]);
            files
                .ensure_weights(request.precision, request.backend, &read, &mut |_| {})
                .await
                .unwrap();
            let run = async |files: &ModelFiles, (config, start): (RunConfig, Start)| {
                let config = with_eos(config, &files.tokenizer);
                let mut runtime = files.start(start).unwrap();
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
            let start = Start::of(&request).unwrap();
            let record = run(&files, (request.config, start)).await;
            for text in [
                serde_json::to_string_pretty(&record).unwrap(),
                format!("{}\n", serde_json::to_string(&record).unwrap()),
            ] {
                let imported = parse_record(&text).unwrap();
                let again = replay_request(&imported, &files.config, BackendChoice::Cpu).unwrap();
                assert_eq!(again.1.precision, Precision::Int8);
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
            // As a record made before digests and ids existed.
            altered.record_digest = None;
            altered.run_id = None;
            altered.version_id = None;
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
                .to_string()
                .contains("not one of the weights this lab ships"));
            let error = parse_record("{\"not\": \"a record\"}")
                .unwrap_err()
                .to_string();
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
            let parsed = crate::panels::step::view_model::parse_logits(
                &crate::panels::step::view_model::logits_text(&logits),
            )
            .unwrap();
            for (a, b) in parsed.iter().zip(&logits) {
                assert!((a - f64::from(*b)).abs() <= 5e-5);
            }
            assert!(prompt_logits(&mut files, "", &read, &mut |_| {})
                .await
                .unwrap_err()
                .to_string()
                .starts_with("Type a prompt"));
        });
    }

    #[test]
    fn a_bad_file_is_named() {
        pollster::block_on(async {
            let tampered = async |path: &str| -> Result<Vec<u8>, WorkerError> {
                let mut bytes = read(path).await?;
                if path == "tokenizer.json" {
                    bytes.push(b' ');
                }
                Ok(bytes)
            };
            let error = load_model(&tampered, &mut |_| {})
                .await
                .err()
                .unwrap()
                .to_string();
            assert!(
                error.starts_with("The tokenizer file has SHA-256"),
                "{error}"
            );
        });
    }

    #[test]
    fn stop_cancels_before_the_next_call() {
        pollster::block_on(async {
            let (files, mut runtime) = crate::test_support::cpu_runtime().await;
            let request = GenerateForm::default().check().unwrap();
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
