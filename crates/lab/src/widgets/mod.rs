//! What every panel shares: form fields, the chart with its mirror table, number parsing and
//! formatting.

pub mod chart;
pub mod field;
pub mod form;
pub mod number;
