//! `?panel=capacity`: the capacity planner's form, sweep chart and report.

pub mod panel;
pub mod view_model;
