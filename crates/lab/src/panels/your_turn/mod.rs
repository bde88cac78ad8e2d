//! `?panel=your-turn`: the chapter's predict-then-reveal exercise on temperature.

pub mod panel;
pub mod view_model;
