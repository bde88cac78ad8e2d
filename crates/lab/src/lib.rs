//! The browser lab: five wasm binaries from one crate. The page (`main.rs`) is the [`shell`]
//! and the [`panels`]; the model worker (`bin/worker.rs`) is [`worker::host`] and
//! [`worker::runner`]; the capacity planner (`bin/planner.rs`) is [`planner::host`]; the observation worker
//! (`bin/observer.rs`) is [`observer::host`]; the importer (`bin/importer.rs`) is
//! [`importer::host`].
//! ARCHITECTURE.md has the map.

#![forbid(unsafe_code)]

pub mod importer;
mod js;
mod link;
pub mod observer;
mod panels;
pub mod planner;
mod shell;
#[cfg(all(test, feature = "worker"))]
mod test_support;
mod widgets;
pub mod worker;

pub use shell::app::App;
pub use shell::web::report_panic;
