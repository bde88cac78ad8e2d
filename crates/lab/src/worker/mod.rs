//! The model worker. [`protocol`] is its typed seam with the page, which both binaries
//! compile (the page reaches the worker through [`crate::link`]). The rest is the worker's
//! alone, built only with the `worker` feature (which brings the model, the tokenizer and the
//! GPU runtime): [`host`] is its global scope (jobs in, events posted out), [`runner`] runs
//! one job, [`generation`] and [`exercise`] drive the model, [`stepping`] takes the
//! decoding-step panel's step, [`comparison`] runs the Compare panel's two policies and
//! trees and writes their report (built by [`policy::compare_report`]) as HTML,
//! [`browser`] is its clock and yield, and [`error`] says why a job did not finish.

#[cfg(feature = "worker")]
pub(crate) mod browser;
#[cfg(feature = "worker")]
pub(crate) mod comparison;
#[cfg(feature = "worker")]
pub(crate) mod error;
#[cfg(feature = "worker")]
pub(crate) mod exercise;
#[cfg(feature = "worker")]
pub(crate) mod generation;
#[cfg(feature = "worker")]
pub mod host;
pub(crate) mod protocol;
#[cfg(feature = "worker")]
pub(crate) mod runner;
#[cfg(feature = "worker")]
pub(crate) mod stepping;
