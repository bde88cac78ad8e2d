//! The importer's typed seam with the page: a policy's text in ([`ImportJob`]), the form's
//! texts and the markup of its readings out ([`ImporterEvent`]), each crossing as its JSON
//! text ([`crate::link::message`]).

use serde::{Deserialize, Serialize};

/// A policy written in another form (a Hugging Face `generation_config.json`, an OpenAI or
/// vLLM request body, a llama.cpp command line), to read; `id` comes back with the answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ImportJob {
    pub id: u64,
    pub text: String,
    /// Read the rest when a field is not understood (`--lenient`).
    pub lenient: bool,
}

/// A policy read from another form, as the Generate form takes it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ImportedPolicy {
    /// Every knob's text, in [`policy::KNOBS`]' order ([`policy::Knob::text`]); DRY's
    /// breakers are [`ImportedPolicy::breakers`].
    pub knobs: Vec<String>,
    /// DRY's sequence breakers, as text.
    pub breakers: Vec<String>,
    pub max_tokens: Option<usize>,
    pub seed: Option<u64>,
    pub stop: Vec<String>,
    pub stop_tokens: Vec<u32>,
    /// What was read, in a sentence, and every field with its value and what it became, as
    /// a table's markup ([`crate::widgets::markup`]).
    pub summary: String,
    pub html: String,
}

/// What the importer tells the page.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ImporterEvent {
    /// The worker's wasm is running and listening.
    Ready,
    /// The answer to job `id`: the policy.
    Imported {
        id: u64,
        policy: Box<ImportedPolicy>,
    },
    /// The answer to job `id`: why its text was refused, in words.
    Refused { id: u64, why: String },
    /// The page could not reach the worker, or the worker could not fetch what it needed.
    Failed(String),
    /// The worker's Rust code panicked; the worker is gone and the next import starts another.
    Panicked(String),
}

crate::link::protocol! {
    /// The importer's protocol, for the page's [`crate::link::WorkerLink`].
    Importer: ImportJob => ImporterEvent, "importer_loader.js", "importer",
    ready: ImporterEvent::Ready, failed: ImporterEvent::Failed
}
