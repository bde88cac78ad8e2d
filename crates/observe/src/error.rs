//! What stops an observation, and why a line is not read. A run line that cannot be read
//! is not an error but a rejected line of the report ([`crate::Rejected`]), its reason a
//! [`RunLineError`]; an outcome row that cannot be read ([`OutcomeError`]) stops the
//! observation ([`ObserveError`]): these are the inputs without which no honest report
//! exists.

use policy::{Audit, RecordError};
use thiserror::Error;

#[derive(Debug, Error, PartialEq)]
pub enum ObserveError {
    #[error("outcomes line {line}: {reason}")]
    Outcome { line: usize, reason: OutcomeError },
    #[error(
        "outcome for run_id {run_id:?} on line {again} repeats the one on line {first}: a run has one outcome"
    )]
    DuplicateOutcome {
        run_id: String,
        first: usize,
        again: usize,
    },
    #[error(
        "the cut-off {} s is before the first run, which arrived at {} s: nothing was known then",
        policy::Shortest(*.as_of_s),
        policy::Shortest(*.first_s)
    )]
    AsOfBeforeRuns { as_of_s: f64, first_s: f64 },
    #[error("baseline version {0:?} has no runs; the versions observed are {1}")]
    UnknownBaseline(String, String),
    #[error("{what} must be {expected}, got {value}")]
    Setting {
        what: &'static str,
        expected: &'static str,
        value: f64,
    },
}

/// Why an outcome row is not one.
#[derive(Debug, Error)]
pub enum OutcomeError {
    /// The row is not the JSON of an outcome (serde's words name the field or the value).
    #[error("{0}")]
    Row(serde_json::Error),
    /// The verdict is neither `accepted` nor `rejected`.
    #[error("{0}")]
    Verdict(serde_json::Error),
    /// The time it became known is not a finite number of seconds.
    #[error("at_s {at_s} is not a finite number of seconds")]
    NotFinite { at_s: f64 },
}

/// Two reasons are equal when they say the same: serde's error has no `PartialEq`.
impl PartialEq for OutcomeError {
    fn eq(&self, other: &OutcomeError) -> bool {
        use OutcomeError::*;
        match (self, other) {
            (Row(a), Row(b)) | (Verdict(a), Verdict(b)) => a.to_string() == b.to_string(),
            (NotFinite { at_s: a }, NotFinite { at_s: b }) => a.to_bits() == b.to_bits(),
            _ => false,
        }
    }
}

/// Why a run line is rejected: the reason the report names beside its source and line.
#[derive(Clone, Debug, Error, PartialEq)]
pub enum RunLineError {
    /// The line's bytes are not UTF-8.
    #[error("the line is not UTF-8 text: {0}")]
    NotUtf8(std::str::Utf8Error),
    /// The line is not a run record's JSON.
    #[error("{0}")]
    Record(#[from] RecordError),
    /// The line holds `count` records, not one.
    #[error("the line holds {count} records, not one")]
    Records { count: usize },
    /// The record was edited after it was written, or is not what a run could write.
    #[error("{0}")]
    Audit(Audit),
    /// The run was read before, at `first_source` line `first_line`, with other timings:
    /// two stories of one run.
    #[error(
        "run_id {run_id} was read at {first_source} line {first_line} with other timings; a \
         run happens once"
    )]
    Conflict {
        run_id: String,
        first_source: String,
        first_line: usize,
    },
    /// The reader of the line failed before it gave a verdict (a caller that reads lines on
    /// threads names each line of a reader that panicked, rather than drop them).
    #[error("the line's reader failed")]
    ReaderFailed,
}
