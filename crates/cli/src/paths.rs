//! `decode-lab paths`: one policy over many seeds, the tree of the first tokens' paths with
//! each path's empirical frequency beside its analytic probability ([`policy::paths`]),
//! printed as its report (`policy::compare_report::tree_part`) in Markdown or as JSON.

use std::path::Path;

use policy::paths::{path_tree, PathTree};
use policy::{Precision, RunConfig};

use crate::error::CliError;
use crate::model_dir;
use crate::model_dir::WallClock;

/// What `paths` was asked.
pub struct Request<'a> {
    pub dir: &'a Path,
    pub precision: Precision,
    /// The run every seed makes (its seed is replaced); end-of-text is set here when unset.
    pub config: RunConfig,
    pub first_seed: u64,
    pub seeds: usize,
    pub depth: usize,
}

pub fn run(request: &Request) -> Result<PathTree, CliError> {
    let mut loaded = model_dir::load(request.dir, request.precision)?;
    let mut config = request.config.clone();
    config
        .policy
        .eos_token
        .get_or_insert(loaded.tokenizer.end_of_text());
    Ok(path_tree(
        &mut loaded.model,
        &loaded.tokenizer,
        &config,
        request.first_seed,
        request.seeds,
        request.depth,
        &mut WallClock::new(),
    )?)
}
