//! `?panel=capacity`: the capacity planner's form, sweep chart and report. The form and its
//! check are the page's ([`view_model`]); the plan runs in the planner worker
//! ([`crate::planner`]), which formats what the panel shows ([`display`], built only with the
//! `planner` feature).

#[cfg(feature = "planner")]
pub mod display;
pub mod panel;
pub mod view_model;
