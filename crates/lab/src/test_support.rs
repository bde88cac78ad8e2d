//! What the lab's native tests share: the released model's files read from the repository
//! (the same `fetch` shape the browser uses), the CPU runtime the panels start, and a clock
//! that ticks 100 µs per reading.

use std::path::PathBuf;

use gpu::Runtime;
use policy::{BackendChoice, Clock, Precision};

use crate::link::fetch::{FetchError, FetchFailure};
use crate::worker::browser::MODEL_DIR;
use crate::worker::error::WorkerError;
use crate::worker::generation::{load_model, ModelFiles, Start};

fn model_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(MODEL_DIR)
}

/// A model file's bytes, as `load_model` and `ensure_weights` fetch them.
pub async fn read(path: &str) -> Result<Vec<u8>, WorkerError> {
    std::fs::read(model_dir().join(path)).map_err(|e| {
        WorkerError::Fetch(FetchError {
            name: path.to_string(),
            why: FetchFailure::Thrown(e.to_string()),
        })
    })
}

/// A clock that advances 100 µs each time it is read, from the value it holds.
pub struct Ticks(pub f64);

impl Clock for Ticks {
    fn now_us(&mut self) -> f64 {
        self.0 += 100.0;
        self.0
    }
}

/// The model's files and a started `cpu-reference` runtime on the f32 weights.
pub async fn cpu_runtime() -> (ModelFiles, Runtime) {
    let mut files = load_model(&read, &mut |_| {}).await.unwrap();
    let start = Start {
        backend: BackendChoice::Cpu,
        precision: Precision::F32,
        faults: gpu::Faults::default(),
    };
    files
        .ensure_weights(start.precision, start.backend, &read, &mut |_| {})
        .await
        .unwrap();
    let runtime = files.start(start).unwrap();
    (files, runtime)
}
