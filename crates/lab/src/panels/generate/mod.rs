//! `?panel=generate`: a prompt and a policy in, tokens streamed from the tiny model in the
//! worker, the run record out, and replay of a record.

pub mod latency_chart;
pub mod panel;
pub mod run_state;
pub mod view_model;
