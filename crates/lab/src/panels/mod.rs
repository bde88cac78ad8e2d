//! One folder per panel, named by its URL slug (`?panel=kv-cache` is `kv_cache/`). Each holds
//! `panel.rs`, the Leptos component that only draws, and `view_model.rs`, the plain data it
//! draws (form text in, checked values and rows out), tested natively.

pub mod capacity;
pub mod checkpoint;
pub mod compare;
pub mod generate;
pub mod kv_cache;
pub mod memory;
pub mod observe;
pub mod step;
pub mod your_turn;
