//! `?panel=compare`: two policies on the same model, prompt and seeded stream, and each
//! policy over many seeds as a tree of paths. The form and its check are the page's
//! ([`view_model`]); the runs happen in the model worker, which formats what the panel shows
//! ([`crate::worker`]), so the page draws a report it did not compute.

pub mod panel;
pub mod view_model;
