//! Reads the lab's model configuration at build time and writes what the KV-cache panel shows
//! of it: the model's shapes and the bytes a real `model::KvCache` built from it allocates.
//! The page's wasm so carries these figures without linking the model crate, which only the
//! worker may (see `panels/kv_cache/view_model.rs`).

use std::path::Path;

fn main() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models/decode-lab-tiny-v1/config.json");
    println!("cargo:rerun-if-changed={}", path.display());
    let written = std::fs::read_to_string(&path)
        .map_err(|e| format!("{}: {e}", path.display()))
        .and_then(|text| model::ModelConfig::from_json(&text).map_err(|e| e.to_string()))
        .map(|config| {
            let allocated = model::KvCache::new(&config).allocated_bytes();
            format!(
                "Ok(TinyModel {{ layers: {}, heads: {}, kv_heads: {}, head_dim: {}, context_len: {}, allocated: {} }})",
                config.n_layers,
                config.n_heads,
                config.n_kv_heads,
                config.head_dim(),
                config.context_len,
                allocated
            )
        })
        .unwrap_or_else(|e| format!("Err({e:?})"));
    let out =
        Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("tiny_model.rs");
    std::fs::write(&out, written).expect("OUT_DIR is writable");
}
