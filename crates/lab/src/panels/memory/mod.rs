//! `?panel=memory`: the chapter's GPU memory ledger, a training-memory budget per block.

pub mod panel;
pub mod view_model;
