//! The Observe panel's Web Worker: run logs are read, checked and grouped off the page's
//! thread, with progress. [`protocol`] is the typed seam both binaries compile: the files
//! (or the shipped demo) and a baseline in; progress, then an [`protocol::ObserveDisplay`]
//! of already-formatted parts, back. [`host`] is the worker's global scope, [`display`]
//! the code that observes and formats and [`error`] why an observation did not finish, all
//! built only with the `observer` feature: the page's wasm links neither the record reader
//! nor the language identifier. The page reaches the worker through [`crate::link`].

#[cfg(feature = "observer")]
pub(crate) mod display;
#[cfg(feature = "observer")]
pub(crate) mod error;
#[cfg(feature = "observer")]
pub mod host;
pub(crate) mod protocol;
