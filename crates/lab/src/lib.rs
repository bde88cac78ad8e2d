//! The browser lab. Components live one per file; the only ways into the core are
//! [`engine`] (the decoding step) and [`generation`] (every run of the model, which the
//! model worker drives), so the UI never depends on the core's internals. [`web`] is the little that talks to the browser itself.

#![forbid(unsafe_code)]

mod app;
mod capacity_panel;
mod capacity_view;
mod checkpoint;
mod checkpoint_panel;
mod distribution;
pub mod engine;
mod generate_panel;
pub mod generation;
mod kv_memory;
mod kv_panel;
mod latency_chart;
mod ledger;
mod ledger_panel;
mod runner;
mod step_panel;
#[cfg(test)]
mod test_support;
mod url;
mod web;
pub mod worker;
mod worker_link;
mod your_turn;
mod your_turn_panel;

pub use app::App;
pub use capacity_panel::CapacityPanel;
pub use checkpoint_panel::CheckpointPanel;
pub use kv_panel::KvPanel;
pub use ledger_panel::LedgerPanel;
pub use web::report_panic;
pub use your_turn_panel::YourTurnPanel;
