//! The model worker and the page's link to it. [`protocol`] is the one typed seam both
//! binaries compile; [`link`] is the page's handle on the worker; [`host`] is the worker's
//! global scope (jobs in, events posted out), [`runner`] runs one job, [`generation`] and
//! [`exercise`] drive the model, and [`browser`] is the worker's fetch, clock and yield.

pub(crate) mod browser;
pub(crate) mod exercise;
pub(crate) mod generation;
pub mod host;
pub(crate) mod link;
pub(crate) mod protocol;
pub(crate) mod runner;
