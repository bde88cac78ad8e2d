//! What stops an observation. A run line that cannot be read is not an error but a
//! rejected line of the report ([`crate::Rejected`]); these are the inputs without which no
//! honest report exists.

use thiserror::Error;

#[derive(Debug, Error, PartialEq)]
pub enum ObserveError {
    #[error("outcomes line {line}: {reason}")]
    Outcome { line: usize, reason: String },
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
