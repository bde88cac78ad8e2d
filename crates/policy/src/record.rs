//! The run record: everything needed to explain an output or to replay it, and `replay`.

use serde::{Deserialize, Serialize};

use crate::generate::{
    generate, Clock, GenerateError, LanguageModel, StepRecord, StopReason, Unobserved, Vocabulary,
};
use crate::Policy;

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

impl RunConfig {
    pub fn rendered_prompt(&self) -> String {
        self.prompt_template.replace("{prompt}", &self.prompt)
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
    /// Time to first token: from the start of the run to the first chosen token.
    pub ttft_us: f64,
    /// Model plus policy time of each step.
    pub token_latencies_us: Vec<f64>,
    /// What ran the model. Records made before backends existed read as `cpu-reference`.
    #[serde(default = "Backend::cpu_reference")]
    pub backend: Backend,
    /// Why the run fell back to the `cpu-reference` baseline, if it did (the same words as
    /// `backend.degraded_reason`, at the top level where a reader looks first).
    #[serde(default)]
    pub degraded_reason: Option<String>,
}

/// What ran the model's forward pass: the backend's name and, for a GPU, which adapter.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Backend {
    /// `cpu-reference` or `webgpu`.
    pub name: String,
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
}

impl Backend {
    /// The name of the CPU reference forward pass: the baseline every faster path falls
    /// back to.
    pub const CPU_REFERENCE: &'static str = "cpu-reference";
    pub const WEBGPU: &'static str = "webgpu";

    pub fn cpu_reference() -> Backend {
        Backend {
            name: Backend::CPU_REFERENCE.to_string(),
            adapter: None,
            driver: None,
            degraded_reason: None,
            degraded_at_step: None,
        }
    }
}

/// What a replay found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum ReplayReport {
    /// Every step chose the same token with the same probability and draw, and the run
    /// stopped for the same reason.
    Identical { steps: usize },
    /// The first step that differs; `None` on a side means that run had already stopped.
    Differs {
        step: usize,
        recorded: Option<u32>,
        replayed: Option<u32>,
        detail: String,
    },
}

/// Probabilities of a replayed step may differ from the record by this much (the JSON
/// round trip is exact; this only absorbs a different libm on another platform).
const REPLAY_PROB_TOLERANCE: f64 = 1e-9;

/// Regenerates `record` with the same model, tokenizer, seed and settings and compares.
pub fn replay(
    record: &RunRecord,
    model: &mut dyn LanguageModel,
    vocabulary: &dyn Vocabulary,
    clock: &mut dyn Clock,
) -> Result<ReplayReport, GenerateError> {
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
    Ok(compare(record, &again))
}

/// The first difference between two runs of the same configuration.
pub fn compare(recorded: &RunRecord, replayed: &RunRecord) -> ReplayReport {
    let longest = recorded.steps.len().max(replayed.steps.len());
    for i in 0..longest {
        let (a, b) = (recorded.steps.get(i), replayed.steps.get(i));
        let detail = match (a, b) {
            (Some(a), Some(b)) if a.token != b.token => {
                format!("token {} was recorded, {} replayed", a.token, b.token)
            }
            (Some(a), Some(b)) if (a.prob - b.prob).abs() > REPLAY_PROB_TOLERANCE => {
                format!("probability {} was recorded, {} replayed", a.prob, b.prob)
            }
            (Some(a), Some(b)) if a.draw != b.draw => {
                format!("draw {:?} was recorded, {:?} replayed", a.draw, b.draw)
            }
            (Some(_), Some(_)) => continue,
            (Some(_), None) => "the replay stopped earlier".to_string(),
            (None, _) => "the replay went on longer".to_string(),
        };
        return ReplayReport::Differs {
            step: i,
            recorded: a.map(|s| s.token),
            replayed: b.map(|s| s.token),
            detail,
        };
    }
    if recorded.stop_reason != replayed.stop_reason || recorded.output_text != replayed.output_text
    {
        return ReplayReport::Differs {
            step: longest,
            recorded: None,
            replayed: None,
            detail: format!(
                "stopped for {:?} with {:?}, replay for {:?} with {:?}",
                recorded.stop_reason,
                recorded.output_text,
                replayed.stop_reason,
                replayed.output_text
            ),
        };
    }
    ReplayReport::Identical { steps: longest }
}
