//! `?panel=capacity`: the capacity planner's form, sweep chart and report. The form is the
//! page's ([`view_model`]); its check and the plan run in the planner worker
//! ([`crate::planner`], which xtask holds the page's wasm to), which formats what the panel
//! shows.

pub mod panel;
pub mod view_model;
