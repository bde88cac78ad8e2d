//! `?panel=step`: one decoding step on logits the learner types (or the tiny model's), every
//! stage's distribution drawn and listed.

pub mod distribution_chart;
pub mod draw_strip;
pub mod panel;
pub mod view_model;
