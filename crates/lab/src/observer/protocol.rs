//! The one typed protocol between the Observe panel and the observation worker: an
//! [`ObserveJob`] from the page, [`ObserverEvent`]s back, each crossing as its JSON text
//! ([`crate::link::message::to_js`]). What an observation shows crosses as an
//! [`ObserveDisplay`] of words and the markup of the report's parts, which the worker has
//! already formatted and written ([`report`]).

use serde::{Deserialize, Serialize};

/// Observe these logs, against `baseline` (a version id) when given.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ObserveJob {
    /// Echoed by every event about this job, so the page can drop news of an older one.
    pub id: u64,
    pub input: Input,
    pub baseline: Option<String>,
}

/// Where the runs and outcomes come from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Input {
    /// The telemetry the project ships (`demo/traffic.json` beside the model), against its
    /// stated baseline unless the job names another.
    Demo,
    /// The learner's files, as URLs the worker can fetch (the page's object URLs).
    Files {
        runs: Vec<Source>,
        outcomes: Vec<Source>,
    },
}

/// One file: the name reports give it, and where to fetch it. A name ending in `.gz` is
/// gzip-compressed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Source {
    pub name: String,
    pub url: String,
}

/// What the worker tells the page, in the order it happens.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ObserverEvent {
    /// The worker's wasm is running and listening; jobs sent before this are held by the page.
    Ready,
    /// Run lines read so far from `source`.
    Progress { id: u64, source: String, lines: u64 },
    Observed {
        id: u64,
        display: Box<ObserveDisplay>,
    },
    /// The observation could not be made: a file that cannot be fetched or read, an outcome
    /// line that does not parse, a baseline that is not among the versions.
    Failed { id: Option<u64>, message: String },
    /// The worker's Rust code panicked; the worker is gone and the next job starts another.
    Panicked(String),
}

/// Everything the page shows of an observation, formatted.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ObserveDisplay {
    /// "400 runs in 2 versions; 0 lines rejected."
    pub summary: String,
    /// The versions observed, as (version id, label) for the baseline's select.
    pub versions: Vec<(String, String)>,
    /// The baseline the drift was measured against, if any.
    pub baseline: Option<String>,
    /// Each candidate's verdict in words ("…: stop. … Roll back to …").
    pub verdicts: Vec<String>,
    /// `stop`, `continue` or `insufficient-data`, the worst of the candidates' (empty
    /// without a baseline).
    pub decision: String,
    /// The report's parts, as the markup `widgets::markup::html` writes.
    pub parts_html: String,
}

crate::link::protocol! {
    /// The observation worker's protocol, for the page's [`crate::link::WorkerLink`].
    Observer: ObserveJob => ObserverEvent, "observer_loader.js", "observation worker",
    ready: ObserverEvent::Ready, failed: |message| ObserverEvent::Failed { id: None, message }
}
