//! The browser lab. Components live one per file; the only way into the policy core is
//! [`engine`], so the UI never depends on the core's internals.

mod app;
mod distribution;
pub mod engine;
mod step_panel;

pub use app::App;
