//! The importer's Web Worker: Generate's "Import a policy" box sends it a policy written in
//! another engine's form, which it reads with `policy::formats` off the page's thread and
//! out of the page's and the model worker's wasm (the readers and their messages are 30 kB
//! gzipped, loaded only when a learner imports). [`protocol`] is the typed seam both
//! binaries compile; [`host`] is the worker's global scope and [`reading`] the import
//! itself, both built only with the `importer` feature. The page reaches the worker through
//! [`crate::link`].

#[cfg(feature = "importer")]
pub mod host;
pub(crate) mod protocol;
#[cfg(feature = "importer")]
pub(crate) mod reading;
