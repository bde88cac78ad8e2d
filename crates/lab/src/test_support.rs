//! What the lab's native tests share: the released model's files read from the repository
//! (the same `fetch` shape the browser uses) and a clock that ticks 100 µs per reading.

use std::path::PathBuf;

use policy::Clock;

use crate::worker::browser::MODEL_DIR;

fn model_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(MODEL_DIR)
}

/// A model file's bytes, as `load_model` and `ensure_weights` fetch them.
pub async fn read(path: &str) -> Result<Vec<u8>, String> {
    std::fs::read(model_dir().join(path)).map_err(|e| format!("{path}: {e}"))
}

/// A clock that advances 100 µs each time it is read, from the value it holds.
pub struct Ticks(pub f64);

impl Clock for Ticks {
    fn now_us(&mut self) -> f64 {
        self.0 += 100.0;
        self.0
    }
}
