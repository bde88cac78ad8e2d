//! Why a model-worker job did not finish: one enum, [`WorkerError`], for the worker's
//! loading, starting, generating and replaying. Each variant names the file, the weights or
//! the value that was wrong and carries the domain crate's error whole; its `Display` is the
//! sentence the page shows ([`crate::worker::protocol::Event::Failed`]).

use std::error::Error;
use std::fmt;

use gpu::GpuError;
use model::ModelError;
use policy::generate::GenerateError;
use policy::paths::PathsError;
use policy::{ArtifactId, Precision, RecordError};
use report::sentence;
use tokenizer::TokenizerError;

use crate::link::fetch::FetchError;

/// Why a model-worker job did not finish.
#[derive(Debug)]
pub enum WorkerError {
    /// A model file that could not be fetched.
    Fetch(FetchError),
    /// A fault name in the URL that the GPU runtime does not know (the `gpu` crate's words).
    Fault(gpu::UnknownFault),
    /// The file to replay is not a run record.
    RecordFile(RecordError),
    /// The file to replay holds no run record.
    NoRecord,
    /// The record to replay was not read before its job ran.
    RecordNotRead,
    /// A record made with weights (`model`) that this lab does not ship (`lab`: its model's
    /// name).
    NotShipped { model: ArtifactId, lab: String },
    /// A model file (`file`) whose bytes are not UTF-8 text.
    NotUtf8 { file: &'static str },
    /// `config.json` refused by the model crate.
    Config(ModelError),
    /// `tokenizer.json` refused by the tokenizer crate.
    Tokenizer(TokenizerError),
    /// `tokenizer.json`'s vocabulary is not the model's.
    Vocabulary(ModelError),
    /// A file the model's config names (by role) that it lacks or whose hash differs.
    File(ModelError),
    /// The weights of `precision`, asked for before they were fetched.
    NotLoaded { precision: Precision },
    /// The weights of `role`, refused by the model crate.
    Weights {
        role: &'static str,
        source: ModelError,
    },
    /// A prompt of no token.
    EmptyPrompt,
    /// A prompt of `tokens` tokens, longer than the model's `context`.
    PromptTooLong { tokens: usize, context: usize },
    /// The model's forward pass failed (on the CPU reference).
    Model(ModelError),
    /// The policy step on the GPU failed.
    Gpu(GpuError),
    /// The generation refused its configuration or a step.
    Generate(GenerateError),
    /// The Compare panel's trees of paths.
    Paths(PathsError),
    /// The runtime was asked for before it started.
    NotStarted,
    /// The model files were asked for before they were loaded.
    FilesNotLoaded,
    /// One of the Compare panel's two runs did not finish.
    RunsUnfinished,
    /// A Cancel with no job to cancel.
    NothingToRun,
    /// The tokenizer's decoder held text over from a run that took no step.
    TailWithoutSteps,
}

impl fmt::Display for WorkerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use WorkerError::*;
        match self {
            Fetch(e) => write!(f, "{e}"),
            Fault(why) => f.write_str(&sentence(format!("the URL's fault: {why}"))),
            RecordFile(e) => write!(
                f,
                "This file is not a run record the lab can read: {e}."
            ),
            NoRecord => f.write_str("This file holds no run record."),
            RecordNotRead => f.write_str("The record to replay was not read."),
            NotShipped { model, lab } => write!(
                f,
                "This record was made with model {model}, which is not one of the weights this lab ships ({lab}); it cannot be replayed here."
            ),
            NotUtf8 { file } => write!(f, "{file} is not UTF-8 text."),
            Config(e) => f.write_str(&sentence(format!("config.json: {e}"))),
            Tokenizer(e) => f.write_str(&sentence(format!("tokenizer.json: {e}"))),
            Vocabulary(e) => f.write_str(&sentence(format!("tokenizer.json: {e}"))),
            File(e) => f.write_str(&sentence(e.to_string())),
            NotLoaded { precision } => {
                write!(f, "The {precision} weights are not loaded yet.")
            }
            Weights { role, source } => f.write_str(&sentence(format!("{role}: {source}"))),
            EmptyPrompt => f.write_str(
                "Type a prompt: the model needs at least one token to start from.",
            ),
            PromptTooLong { tokens, context } => write!(
                f,
                "The prompt is {tokens} tokens long, more than the model's context of {context}."
            ),
            Model(e) => f.write_str(&sentence(format!("the model failed: {e}"))),
            Gpu(e) => f.write_str(&sentence(format!("the model failed: {e}"))),
            Generate(e) => f.write_str(&sentence(e.to_string())),
            Paths(e) => f.write_str(&sentence(e.to_string())),
            NotStarted => f.write_str("The backend did not start."),
            FilesNotLoaded => f.write_str("The model files are not loaded."),
            RunsUnfinished => f.write_str("The two runs did not both finish."),
            NothingToRun => f.write_str("Nothing to run."),
            TailWithoutSteps => f.write_str("A run with no steps left text over."),
        }
    }
}

impl Error for WorkerError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        use WorkerError::*;
        match self {
            Fetch(e) => Some(e),
            RecordFile(e) => Some(e),
            Config(e) | Vocabulary(e) | File(e) | Model(e) => Some(e),
            Weights { source, .. } => Some(source),
            Tokenizer(e) => Some(e),
            Gpu(e) => Some(e),
            Generate(e) => Some(e),
            Paths(e) => Some(e),
            _ => None,
        }
    }
}

/// `?` carries the generation's refusal here whole.
impl From<GenerateError> for WorkerError {
    fn from(e: GenerateError) -> WorkerError {
        WorkerError::Generate(e)
    }
}
