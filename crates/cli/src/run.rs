//! `decode-lab generate` and `decode-lab replay`: runs of the shipped model on the CPU or
//! on WebGPU (falling back to `cpu-reference`), streamed to the terminal or printed as run
//! records, and replays of those records.

use policy::formats::RunSettings;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use gpu::{BackendChoice, Faults, Promotion, Runtime};
use model::Precision;
use policy::generate::{Observer, StepRecord};
use policy::{Backend, ReplayReport, RunConfig, RunRecord, Vocabulary};
use tokenizer::Tokenizer;

use crate::error::CliError;
use crate::files;
use crate::model_dir::{self, WallClock};
use crate::output;

/// The forward pass a run asks for, and the faults to inject into its GPU path.
#[derive(Clone, Copy)]
pub struct BackendRequest {
    pub choice: BackendChoice,
    pub faults: Faults,
    /// Whether filter-only policy steps may run on the GPU.
    pub device_sampling: bool,
}

/// Loads the weights of `precision` (and, for a GPU run of weights other than f32, the f32
/// `cpu-reference` baseline) and starts the requested backend: the GPU with its fallback,
/// or the CPU.
/// The GPU start is waited for before the run (a script wants the GPU's record, not a race
/// with the canary); `promotion` says at which step the run takes the GPU.
fn start(
    dir: &Path,
    precision: Precision,
    request: BackendRequest,
    promotion: Promotion,
) -> Result<(Runtime, Tokenizer), CliError> {
    let loaded = model_dir::load(dir, precision)?;
    let baseline = match (request.choice, precision) {
        (choice, Precision::Int8) if choice.tries_gpu() => Some(model_dir::load_baseline(dir)?),
        _ => None,
    };
    let mut runtime = Runtime::start_beside(request.choice, loaded.model, baseline, request.faults);
    runtime.set_promotion(promotion);
    pollster::block_on(runtime.settle());
    runtime.set_device_sampling(request.device_sampling);
    Ok((runtime, loaded.tokenizer))
}

/// One line for standard error: what ran the model, and why it fell back if it did.
pub fn describe_backend(backend: &Backend) -> String {
    let mut line = format!("[backend: {}", backend.name);
    if let Some(adapter) = &backend.adapter {
        line += &format!(" on {adapter}");
    }
    if let Some(driver) = &backend.driver {
        line += &format!(" (driver {driver})");
    }
    if let Some(reason) = &backend.degraded_reason {
        line += &format!("; asked for webgpu, fell back to cpu-reference: {reason}");
        line += &match backend.degraded_at_step {
            Some(step) => format!(" (at step {step})"),
            None => " (before the run)".to_string(),
        };
    }
    if backend.segments.len() > 1 {
        line += &format!("; {}", segments(backend));
    }
    if let Some(auto) = &backend.auto {
        line += &format!("; {auto}");
    }
    line + "]"
}

/// A run's segments in words: `cpu-reference steps 0-4 (why), webgpu steps 5-31 (why)`.
fn segments(backend: &Backend) -> String {
    let words: Vec<String> = backend
        .segments
        .iter()
        .map(|s| {
            format!(
                "{} steps {}-{} ({})",
                s.backend,
                s.first_step,
                s.last_step,
                s.reason.trim_end().trim_end_matches('.')
            )
        })
        .collect();
    words.join(", ")
}

/// Prints generated text as it arrives, holding back what a stop string could still claim
/// and any unfinished UTF-8 character. A failed write cancels the run: nobody is reading
/// (`| head -1`), or the disk is full, and either way the rest would be lost.
struct Streamer<'a> {
    vocabulary: &'a dyn Vocabulary,
    silent: Vec<u32>,
    holdback: usize,
    bytes: Vec<u8>,
    printed: usize,
    failed: Option<std::io::Error>,
}

impl Streamer<'_> {
    fn flush_up_to(&mut self, end: usize) {
        let pending = &self.bytes[self.printed..end];
        let valid = match std::str::from_utf8(pending) {
            Ok(text) => text.len(),
            Err(e) => e.valid_up_to(),
        };
        let mut out = std::io::stdout().lock();
        match out.write_all(&pending[..valid]).and_then(|()| out.flush()) {
            Ok(()) => self.printed += valid,
            Err(e) => self.failed = Some(e),
        }
    }
}

impl Observer for Streamer<'_> {
    fn on_step(&mut self, step: &StepRecord) {
        if self.failed.is_some() || self.silent.contains(&step.token) {
            return;
        }
        self.bytes
            .extend_from_slice(self.vocabulary.token_bytes(step.token));
        let end = self
            .bytes
            .len()
            .saturating_sub(self.holdback)
            .max(self.printed);
        self.flush_up_to(end);
    }

    fn cancelled(&mut self) -> bool {
        self.failed.is_some()
    }
}

/// What of a run's policy is found in the model's vocabulary once it is loaded: DRY's
/// breakers as text, and an imported policy's allowed ids and bad words as text.
pub struct FoundInVocabulary<'a> {
    pub breakers: &'a [String],
    pub run: &'a RunSettings,
}

/// Generates one run. With `json`, returns the run record; otherwise streams the text to
/// standard output, prints a summary to standard error, and returns nothing more to print.
pub fn generate(
    dir: &Path,
    precision: Precision,
    request: BackendRequest,
    mut config: RunConfig,
    vocabulary: FoundInVocabulary,
    tags: BTreeMap<String, String>,
    json: bool,
) -> Result<String, CliError> {
    let (mut model, tokenizer) = start(dir, precision, request, Promotion::AtStep(0))?;
    if config.policy.dry_multiplier != 0.0 {
        config.policy.dry_sequence_breakers = tokenizer.dry_sequence_breakers(vocabulary.breakers);
    }
    vocabulary
        .run
        .apply_to(
            &mut config.policy,
            tokenizer.vocab_size(),
            Some(&|text: &str| tokenizer.encode(text)),
        )
        .map_err(CliError::Import)?;
    config
        .policy
        .eos_token
        .get_or_insert(tokenizer.end_of_text());
    let config = &config;
    let mut clock = WallClock::new();
    let record = if json {
        policy::generate(
            &mut model,
            &tokenizer,
            config,
            &mut clock,
            &mut policy::generate::Unobserved,
        )
    } else {
        let mut silent = config.stop.tokens.clone();
        silent.extend(config.policy.eos_ids());
        let mut streamer = Streamer {
            vocabulary: &tokenizer,
            silent,
            holdback: config
                .stop
                .strings
                .iter()
                .map(|s| s.len().saturating_sub(1))
                .max()
                .unwrap_or(0),
            bytes: Vec::new(),
            printed: 0,
            failed: None,
        };
        let record = policy::generate(&mut model, &tokenizer, config, &mut clock, &mut streamer);
        if let Some(e) = streamer.failed {
            return Err(CliError::Stdout(e));
        }
        if let Ok(record) = &record {
            // What was held back and survived the stop string (the printed bytes are a
            // valid UTF-8 prefix of the output text).
            let rest = record
                .output_text
                .get(streamer.printed..)
                .unwrap_or_default();
            output::print_line(rest)?;
        }
        record
    }?
    .labelled(Some(precision), tags);
    if json {
        // Standard output holds only the record; what ran it goes beside it.
        output::note(&describe_backend(&record.backend));
        if request.choice == BackendChoice::Gpu {
            describe_gpu_run(&model, &record);
        }
        return Ok(serde_json::to_string(&record)?);
    }
    // Standard output holds only the generated text; the summary goes beside it.
    output::note(&summary(&record));
    output::note(&describe_backend(&record.backend));
    if request.choice == BackendChoice::Gpu {
        describe_gpu_run(&model, &record);
    }
    if let Some(p) = model.start_phases() {
        output::note(&format!(
            "GPU start: device {:.0} ms, weights and pipelines {:.0} ms, canary {:.0} ms",
            p.device_ms, p.upload_ms, p.canary_ms
        ));
    }
    Ok(String::new())
}

/// On standard error: where the policy steps ran, the read-backs, and the compute
/// dispatches of a decode step.
fn describe_gpu_run(model: &Runtime, record: &RunRecord) {
    output::note(&describe_sampling(model, record));
    if let Some(dispatches) = model.dispatches_per_decode_step() {
        output::note(&format!("dispatches per decode step: {dispatches}"));
    }
}

/// Where the policy steps ran and how many read-backs the run cost.
fn describe_sampling(model: &Runtime, record: &RunRecord) -> String {
    let report = model.sampling();
    format!(
        "[policy steps on the GPU: {} of {} ({} re-taken by the CPU policy, {} disagreed); GPU read-backs: {}, the canary's included]",
        report.device_steps,
        record.steps.len(),
        report.checked,
        report.mismatches,
        model.readbacks()
    )
}

fn summary(record: &RunRecord) -> String {
    let n = record.steps.len();
    let decode: Vec<f64> = record.token_latencies_us.iter().skip(1).copied().collect();
    let per_token = if decode.is_empty() {
        0.0
    } else {
        decode.iter().sum::<f64>() / decode.len() as f64 / 1000.0
    };
    format!(
        "[stopped: {}; {n} tokens; time to first token {:.1} ms; {per_token:.2} ms per later token; seed {}; run {}, version {}]",
        record.stop_reason.describe(),
        record.ttft_us / 1000.0,
        record.config.seed,
        record.run_id.as_deref().unwrap_or("?"),
        record.version_id.as_deref().unwrap_or("?")
    )
}

/// Replays every record of a JSON or JSONL file on the requested backend; true when all
/// are identical. What ran each replay goes to standard error.
pub fn replay(
    dir: &Path,
    request: BackendRequest,
    file: &Path,
) -> Result<(String, bool), CliError> {
    let text = files::read_text(file)?;
    // One record, pretty or on one line, or JSONL: one reader for the CLI and the lab.
    let records = policy::parse_records(&text).map_err(|e| CliError::in_file(file, e))?;
    let mut lines = Vec::new();
    let mut all_identical = true;
    for record in records {
        // An edited record is reported before any model is loaded for it.
        if let Some(altered) = record.alteration() {
            all_identical = false;
            lines.push(altered.to_string());
            continue;
        }
        let precision = model_dir::precision_by_hash(dir, &record.model.hash)?;
        let promotion = Promotion::replaying(&record.backend);
        let (mut model, tokenizer) = start(dir, precision, request, promotion)?;
        if let Some(reason) = &model.backend().degraded_reason {
            if model.id() != record.model {
                return Err(CliError::FallbackWeights {
                    reason: reason.clone(),
                    role: precision.role(),
                });
            }
        }
        let report = policy::replay(&record, &mut model, &tokenizer, &mut WallClock::new())?;
        let replayed = model.backend().clone();
        output::note(&describe_backend(&replayed));
        lines.push(match report {
            ReplayReport::Identical { steps } => format!("identical ({steps} steps)"),
            ReplayReport::Differs { step, detail, .. } => {
                all_identical = false;
                let mut line = format!("differs at step {step}: {detail}");
                if replayed.name != record.backend.name
                    || replayed.degraded_at_step != record.backend.degraded_at_step
                    || !same_segments(&replayed, &record.backend)
                {
                    line += &format!(
                        " (recorded on {}, replayed on {}: the GPU's and the CPU's logits \
                         differ in their last bits)",
                        ran_on(&record.backend),
                        ran_on(&replayed)
                    );
                }
                line
            }
            altered @ ReplayReport::Altered { .. } => {
                all_identical = false;
                altered.to_string()
            }
        });
    }
    Ok((lines.join("\n"), all_identical))
}

/// Whether two runs ran the same steps on the same backends (the reasons aside).
fn same_segments(a: &Backend, b: &Backend) -> bool {
    let steps = |x: &Backend| -> Vec<_> {
        x.segments
            .iter()
            .map(|s| (s.backend, s.first_step, s.last_step))
            .collect()
    };
    steps(a) == steps(b)
}

/// A backend in a few words: `webgpu`, `cpu-reference`, or where a run switched.
fn ran_on(backend: &Backend) -> String {
    if backend.segments.len() > 1 {
        return segments(backend);
    }
    match backend.degraded_at_step {
        Some(step) => format!("webgpu until step {step}, then cpu-reference"),
        None => backend.name.to_string(),
    }
}
