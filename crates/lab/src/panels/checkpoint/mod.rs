//! `?panel=checkpoint`: the chapter's questions, scored against the pass mark.

pub mod panel;
pub mod view_model;
