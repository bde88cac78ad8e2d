//! `?panel=kv-cache`: the chapter's KV-cache memory estimate with every substitution shown.

pub mod panel;
pub mod view_model;
