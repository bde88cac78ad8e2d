//! `decode-lab paths`: one policy over many seeds, the tree of the first tokens' paths with
//! each path's empirical frequency beside its analytic probability ([`policy::paths`]),
//! printed as an indented table or as JSON.

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

/// The tree for people: one line per node, indented by depth, then the mass per depth that
/// no run reached.
pub fn table(tree: &PathTree) -> String {
    let (first, last) = (
        tree.seeds.first().copied().unwrap_or_default(),
        tree.seeds.last().copied().unwrap_or_default(),
    );
    let mut out = format!(
        "{} runs (seeds {first} to {last}), their first {} tokens\n",
        tree.runs, tree.depth
    );
    out += "path | runs | empirical | analytic | step probability\n";
    for node in &tree.nodes {
        let ended = if node.ended > 0 {
            format!(" (ended {})", node.ended)
        } else {
            String::new()
        };
        out += &format!(
            "{}{} {:?}{ended} | {} | {:.4} | {:.4} | {:.4}\n",
            "  ".repeat(node.depth - 1),
            node.path.last().copied().unwrap_or_default(),
            node.text,
            node.runs,
            node.empirical,
            node.analytic,
            node.step_prob
        );
    }
    for (d, covered) in tree.coverage.iter().enumerate() {
        out += &format!(
            "depth {}: the paths found hold {:.4} of the policy's probability; no run took the other {:.4}\n",
            d + 1,
            covered,
            (1.0 - covered).max(0.0)
        );
    }
    out.trim_end().to_string()
}
