//! `?panel=compare`: two policies on the same model, prompt and seeded stream, and each
//! policy over many seeds as a tree of paths. The form and its check are the page's
//! ([`view_model`]); the runs happen in the model worker, which formats what the panel shows
//! ([`display`], built only with the `worker` feature), so the page draws a report it did
//! not compute.

#[cfg(feature = "worker")]
pub mod display;
pub mod panel;
pub mod view_model;
