//! `?panel=generate`: a prompt and a policy in, tokens streamed from the tiny model in the
//! worker, the run record out, replay of a record, and a policy imported from another
//! engine's form.

pub mod import_box;
pub mod latency_chart;
pub mod panel;
pub mod run_state;
pub mod view_model;
