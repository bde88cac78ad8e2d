//! The one typed protocol between the page and the model worker: [`Job`]s from the page,
//! [`Event`]s back, each crossing as its JSON text ([`crate::link::message`]). JSON rather than
//! `serde-wasm-bindgen`'s JavaScript objects, because both binaries link `serde_json` for run
//! records anyway: measured, the page's wasm + JS was 506,682 bytes gzipped with
//! `serde-wasm-bindgen` and about 12,000 less with JSON, which brings it under its 500,000
//! budget. Forms are checked on the page; a job carries checked values, so the worker
//! parses no form text. The one text a job carries is a record to replay, which the worker
//! reads and judges so that the page links neither the record's digest nor the comparison.
//! This is the only model-worker file the page compiles; the rest needs the `worker`
//! feature (the model, the tokenizer, the GPU runtime).

use policy::generate::StepRecord;
use policy::{Backend, BackendChoice, Engine, Policy, Precision, RunConfig, RunRecord, TokenProb};
use serde::{Deserialize, Serialize};

use crate::link::PanelLink;

/// A checked Generate form: what to run, on which backend, with which faults.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GenerateRequest {
    /// Everything that decides the tokens; `policy.eos_token` is set once the tokenizer is
    /// loaded ([`crate::worker::generation::with_eos`]), as `decode-lab generate` does.
    pub config: RunConfig,
    pub precision: Precision,
    pub backend: BackendChoice,
    /// DRY's sequence breakers as typed, which the worker finds in the tokenizer's
    /// vocabulary when DRY is on (llama.cpp's when none is given), as `decode-lab generate`
    /// does.
    pub dry_breakers: Vec<String>,
    /// Faults to inject, by the names `gpu::Faults::parse` reads (the URL's `fault=`, for
    /// tests of the fallback); the worker, which has the GPU runtime, reads them.
    pub faults: String,
    /// The URL's `fault=panic`: the run panics, to test that the page reports it.
    pub inject_panic: bool,
}

/// What the page asks the worker for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Job {
    /// A new run of the Generate panel.
    Generate(Box<GenerateRequest>),
    /// Regenerate a record on a backend and compare. The record is the JSON text of an
    /// exported file (or of the page's own run): the worker reads and checks it, so the
    /// page links neither the record's digest nor the comparison.
    Replay {
        record: String,
        backend: BackendChoice,
    },
    /// The model's next-token logits after a prompt (f32, CPU reference), for the
    /// decoding-step panel.
    PromptLogits { prompt: String },
    /// The Your-turn exercise: both temperatures over every seed on the CPU reference.
    Exercise(Box<Exercise>),
    /// The Compare panel: two policies on the same draws, and each one's tree of paths over
    /// many seeds, on the CPU reference.
    Compare(Box<CompareRequest>),
    /// The decoding-step panel's step: every stage's distribution, the draw and the same
    /// settings under each engine. Answered at once, even while a run is in progress; `id`
    /// comes back with the answer, so the page keeps only its latest.
    Step { id: u64, input: Box<StepInput> },
    /// Stop the run in progress before its next model call.
    Cancel,
}

/// The Compare panel's report, formatted in the worker: its markup, and its first finding
/// in a sentence.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CompareReport {
    pub html: String,
    pub summary: String,
}

/// Mean GPU timings of a run's decode steps, in milliseconds (see [`gpu::StepTimings`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuTimings {
    pub dispatch_ms: f64,
    pub gpu_ms: f64,
    pub readback_ms: f64,
}

/// The worker's figures of a finished run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunFigures {
    /// Fetching and checking the model files in this run (0 when already loaded).
    pub load_ms: f64,
    /// Starting the backend before the run (the GPU's start runs beside it: `gpu_start`).
    pub start_ms: f64,
    /// The record's time to first token (prefill plus the first policy step).
    pub ttft_ms: f64,
    pub decode_tok_s: Option<f64>,
    pub gpu: Option<GpuTimings>,
    /// GPU-to-CPU read-backs of the run (one per model call on WebGPU).
    pub readbacks: u64,
    /// Where the GPU start beside the runs spent its time, once it passed: device
    /// request, weights and pipelines, canary (ms; `gpu::StartPhases`).
    pub gpu_start: Option<[f64; 3]>,
}

/// What the worker tells the page, in the order it happens.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Event {
    /// The worker's wasm is running and listening; jobs sent before this are held by the page.
    Ready,
    /// Loading files or starting the backend; the words say which.
    Working(String),
    /// Bytes of a model file received so far, and the total the server announced.
    Download {
        file: String,
        got: f64,
        total: Option<f64>,
    },
    /// The backend now running the model, and what the browser says about its adapter.
    Backend {
        backend: Backend,
        adapter: Option<String>,
    },
    Generating,
    /// One chosen token and the text it completed.
    Step {
        step: Box<StepRecord>,
        text: String,
    },
    Finished {
        record: Box<RunRecord>,
        figures: RunFigures,
    },
    /// The record a [`Job::Replay`] read, which the run now starting must reproduce.
    Replaying(Box<RunRecord>),
    /// After a replay's [`Event::Finished`]: whether it reproduced the record, in words.
    Verdict {
        identical: bool,
        words: String,
    },
    /// The answer to [`Job::PromptLogits`].
    Logits(Vec<f32>),
    /// Run `index + 1` of the exercise is starting.
    ExerciseRun(RunProgress),
    /// The exercise is over: complete, or cancelled after some runs.
    ExerciseDone(Box<Finished>),
    /// The answer to [`Job::Compare`]; `None` when it was cancelled.
    Compared(Option<Box<CompareReport>>),
    /// The answer to [`Job::Step`] `id`: the step, or the field whose value it refused.
    Stepped {
        id: u64,
        result: Box<Result<Stepped, StepRefused>>,
    },
    Failed(String),
    /// The worker's Rust code panicked; the worker is gone and the page starts another.
    Panicked(String),
}

crate::link::protocol! {
    /// The model worker's protocol, for the page's [`crate::link::WorkerLink`].
    Model: Job => Event, "worker_loader.js", "model worker",
    ready: Event::Ready, failed: Event::Failed
}

/// An [`Event::Download`] in words: the file and how many of its megabytes have arrived.
pub fn download_words(file: &str, got: f64, total: Option<f64>) -> String {
    match total {
        Some(total) => format!("{file}: {:.1} of {:.1} MB", got / 1e6, total / 1e6),
        None => format!("{file}: {:.1} MB", got / 1e6),
    }
}

/// The model worker, as a panel keeps it.
pub type PanelWorker = PanelLink<Model>;

impl PanelWorker {
    /// Asks the run in progress, if any, to stop before its next model call.
    pub fn cancel(self) {
        self.tell(&Job::Cancel)
    }
}

/// What the worker runs: the two runs (the same prompt, seed and budget) and the tree's size.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CompareRequest {
    pub a: RunConfig,
    pub b: RunConfig,
    /// Each policy's DRY breakers as typed (see [`GenerateRequest::dry_breakers`]).
    pub breakers: [Vec<String>; 2],
    /// Each policy in words, the knobs its form set ([`crate::widgets::knobs::knob_words`]).
    pub words: [String; 2],
    /// How many runs each tree takes, seeds counting up from the runs' seed.
    pub seeds: usize,
    /// How many tokens deep the trees go.
    pub depth: usize,
}

// The Your turn exercise (`panels/your_turn`): what the page asks, and what comes back.

/// The two settings the chapter compares, low first.
pub const TEMPERATURES: [f64; 2] = [0.2, 1.5];

/// The chapter's `choose()` keeps the three highest logits (`top_k=3`); its reasoning speaks
/// of the *retained* distribution, so both settings keep the same three.
pub const TOP_K: usize = 3;

/// A checked exercise: one prompt, run at both temperatures with each of `seeds`
/// consecutive seeds from `first_seed`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Exercise {
    pub prompt: String,
    pub seeds: usize,
    pub max_tokens: usize,
    pub first_seed: u64,
    /// Every knob but the temperature, which each setting sets: the chapter's top-k by
    /// default, and whatever else the learner adds to both settings.
    pub policy: Policy,
    /// DRY's breakers as typed (see [`GenerateRequest::dry_breakers`]).
    pub dry_breakers: Vec<String>,
}

impl Exercise {
    pub fn total_runs(&self) -> usize {
        TEMPERATURES.len() * self.seeds
    }
}

/// What one run made, reduced to what the exercise compares.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    pub seed: u64,
    pub text: String,
    pub tokens: Vec<u32>,
    /// Each step's entropy of the final (scaled, top-k) distribution, in nats.
    pub entropies: Vec<f64>,
    /// Each step's probability of the token it chose.
    pub probs: Vec<f64>,
}

/// Where the exercise is, for the progress line: run `index + 1` of `total` is starting.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunProgress {
    pub index: usize,
    pub total: usize,
    pub temperature: f64,
    pub seed: u64,
}

/// How a run of the exercise ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Finished {
    /// Every planned run made its sample; the page summarises them (`Results::new`).
    Complete {
        exercise: Box<Exercise>,
        samples: [Vec<Sample>; 2],
    },
    /// Stopped by the learner after `done` of `total` runs.
    Cancelled { done: usize, total: usize },
}

// The decoding-step panel (`panels/step`): what the page asks, and what comes back.

/// A checked decoding-step form: the logits, the policy, the tokens before the step (the
/// prompt's, then those generated) and the seed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepInput {
    pub logits: Vec<f64>,
    pub policy: Policy,
    pub prompt: Vec<u32>,
    pub output: Vec<u32>,
    pub seed: u64,
}

/// A stage's distribution over the whole vocabulary, and one token's row in it: the
/// policy's own ([`policy::step_report`]), which the CLI's `pipeline --markdown` writes too.
pub use policy::step_report::{StageView, TokenRow as Row};

/// One survivor of the final distribution as the interval of [0, 1) whose draws choose it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Segment {
    pub id: u32,
    pub prob: f64,
    pub from: f64,
    pub to: f64,
}

/// Everything the decoding-step panel shows of the step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepView {
    pub stages: Vec<StageView>,
    pub token: u32,
    pub prob: f64,
    pub draw: Option<f64>,
    /// Entropy of the final distribution, in nats; e^entropy is its effective vocabulary.
    pub entropy: f64,
    /// The final distribution laid along [0, 1) in ascending ids, as `Generator.choice`
    /// reads it (`policy::rng::choice_bounds`): the draw lands in the chosen token's segment.
    pub strip: Vec<Segment>,
    pub seed: u64,
    /// What the chapter's decode.py prints for the same logits, temperature, top-k and
    /// seed, when those settings are expressible there.
    pub chapter_line: Option<String>,
}

/// One engine's final distribution in the conformance view (ascending ids), or `None` where
/// the engine refuses the settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EngineColumn {
    pub engine: Engine,
    pub kept: Option<Vec<TokenProb>>,
}

/// The step and the same settings under every engine ([`policy::conformance`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Stepped {
    pub view: StepView,
    pub engines: Vec<EngineColumn>,
    /// Which engines keep which tokens, in words.
    pub summary: String,
}

/// A value the step refused when it ran (a temperature or bias that takes a logit beyond
/// the range of a float): the field that caused it (`temperature`, `bias`, ...) and why.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepRefused {
    pub field: String,
    pub message: String,
}
