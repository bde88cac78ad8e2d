//! The Observe panel: run logs and their mature outcomes joined by exact version, the drift
//! verdict and the alternatives. The observation runs in its own worker
//! ([`crate::observer`]); `display` is that worker's formatting.

#[cfg(feature = "observer")]
pub mod display;
pub mod panel;
pub mod view_model;
