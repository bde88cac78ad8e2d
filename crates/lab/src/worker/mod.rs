//! The model worker and the page's link to it. `host` is the worker's global scope (jobs in,
//! events posted out), `runner` runs a job on the model, `link` is the page's handle.

pub mod host;
pub(crate) mod link;
pub(crate) mod runner;
