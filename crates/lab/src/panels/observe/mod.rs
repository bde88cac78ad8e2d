//! The Observe panel: run logs and their mature outcomes joined by exact version, the drift
//! verdict and the alternatives. The observation runs, and is formatted, in its own worker
//! ([`crate::observer`]).

pub mod panel;
pub mod view_model;
