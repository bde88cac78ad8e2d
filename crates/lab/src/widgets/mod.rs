//! What every panel shares: the form model, its labelled fields and which of them a lesson
//! shows, reading numbers from them, the bar chart with its mirror table, and the worker-formatted report.

pub mod chart;
pub mod controls;
pub mod field;
pub mod form;
pub mod number;
pub mod report;
