//! The capacity planner's Web Worker, so that a long sweep runs off the page's thread and the
//! page shows its progress, and so that the page links none of the form's check: the worker
//! checks the fields as they change, too. [`protocol`] is the typed seam both binaries
//! compile: the form's pairs in, to check or to plan; whether they read, or progress, then a
//! [`protocol::PlanDisplay`] of already-formatted text and rows, or the form's problems, back.
//! [`host`] is the worker's global scope and [`display`] the code that plans and formats,
//! both built only with the `planner` feature: the page's wasm links neither the form's
//! check (only the worker calls it), the simulator nor the report. The page reaches the
//! worker through [`crate::link`], as it does the model.

#[cfg(feature = "planner")]
pub(crate) mod display;
pub(crate) mod form;
#[cfg(feature = "planner")]
pub mod host;
pub(crate) mod protocol;
