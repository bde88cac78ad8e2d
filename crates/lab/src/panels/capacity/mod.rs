//! `?panel=capacity`: the capacity planner's form, sweep chart and report. The form is the
//! page's ([`view_model`]); its check and the plan run in the planner worker
//! ([`crate::planner`], which xtask holds the page's wasm to), and the worker formats what
//! the panel shows ([`display`], built only with the `planner` feature).

#[cfg(feature = "planner")]
pub mod display;
pub mod panel;
pub mod view_model;
