//! The model worker and the page's link to it. [`protocol`] is the one typed seam both
//! binaries compile, and [`link`] is the page's handle on the worker (and on the capacity
//! planner's, [`crate::planner`]); [`scope`] is a worker's own side of that link, shared by
//! both workers. The rest is the model worker's alone, built only with the `worker` feature
//! (which brings the model, the tokenizer and the GPU runtime): [`host`] is its global scope
//! (jobs in, events posted out), [`runner`] runs one job, [`generation`] and [`exercise`]
//! drive the model, [`comparison`] runs the Compare panel's two policies and trees, and [`browser`] is its clock and yield. [`fetch`] streams a file from the
//! page's origin, for the model worker and the observation worker.

#[cfg(feature = "worker")]
pub(crate) mod browser;
#[cfg(feature = "worker")]
pub(crate) mod comparison;
#[cfg(feature = "worker")]
pub(crate) mod exercise;
#[cfg(any(feature = "worker", feature = "observer"))]
pub(crate) mod fetch;
#[cfg(feature = "worker")]
pub(crate) mod generation;
#[cfg(feature = "worker")]
pub mod host;
pub(crate) mod link;
pub(crate) mod protocol;
#[cfg(feature = "worker")]
pub(crate) mod runner;
#[cfg(any(feature = "worker", feature = "planner", feature = "observer"))]
pub(crate) mod scope;
