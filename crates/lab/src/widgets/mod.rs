//! What every panel shares: the form model, its labelled fields and which of them a lesson
//! shows, reading numbers from them, the bar chart with its mirror table, the worker-formatted report, and the keyboard walk
//! every chart shares.

pub mod chart;
pub mod controls;
pub mod field;
pub mod form;
pub mod knobs;
#[cfg(any(
    feature = "planner",
    feature = "observer",
    feature = "worker",
    feature = "importer"
))]
// The importer writes only a table.
#[cfg_attr(
    not(any(feature = "planner", feature = "observer", feature = "worker")),
    allow(dead_code)
)]
pub mod markup;
pub mod number;
pub mod walk;
