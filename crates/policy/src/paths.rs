//! Many seeds, one policy: the tree of the first few tokens' paths, each path's empirical
//! frequency beside its analytic probability under the policy.
//!
//! Run the same configuration with N seeds, keep each run's first `depth` tokens, and
//! merge the runs into a prefix tree. A node is one token after the path above it:
//!
//! - its **empirical** frequency is the share of the N runs that took this path;
//! - its **analytic** probability is the product of the policy's final probability of each
//!   token on the path, each given the tokens before it (the `prob` of each step record).
//!
//! The policy's step is a function of the context alone (mirostat's μ too is a function of
//! the path), so every run through a node recorded the same probabilities for its tokens;
//! [`PathTree::from_records`] checks that, and refuses runs that disagree (XTC with a
//! chance below 1 draws a different distribution at the same context, so its path
//! probability is not one product). As N grows, each empirical frequency tends to its
//! analytic probability; a sampler that drew from anything but the distribution it reports
//! would show here.
//!
//! A run that stops (an end-of-sequence token) before `depth` ends its path at that token's
//! node. Per depth, [`PathTree::coverage`] is the analytic mass of the paths the runs found
//! (ended ones included), so one minus it is the mass of the paths no run took.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

use crate::generate::{generate, GenerateError, LanguageModel, Unobserved, Vocabulary};
use crate::record::{RunConfig, RunRecord};
use crate::Clock;

/// The most seeds a tree is built from, and the deepest it goes.
pub const MAX_SEEDS: usize = 10_000;
pub const MAX_DEPTH: usize = 8;

/// Two runs through the same path disagree by more than this on a token's probability:
/// not rounding (the same computation gives the same bits), a different distribution.
const SAME_PROB: f64 = 1e-12;

/// One node: a token after the path of its ancestors.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PathNode {
    /// Its depth: 1 for a first token.
    pub depth: usize,
    /// The tokens from the first to this one.
    pub path: Vec<u32>,
    /// This token's text (as its step record gives it).
    pub text: String,
    /// How many runs took this path.
    pub runs: usize,
    /// `runs` over all the tree's runs.
    pub empirical: f64,
    /// The policy's probability of this token given the path above it.
    pub step_prob: f64,
    /// The product of `step_prob` from the first token to this one.
    pub analytic: f64,
    /// Runs that stopped at this token before the tree's depth (an end-of-sequence token,
    /// or a budget shorter than the depth).
    pub ended: usize,
}

/// The tree of N runs' first tokens: its nodes depth first, siblings by how many runs took
/// them (then by token id).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PathTree {
    pub runs: usize,
    pub depth: usize,
    /// The seeds the runs used, in run order.
    pub seeds: Vec<u64>,
    pub nodes: Vec<PathNode>,
    /// Per depth from 1: the analytic mass of the paths the runs reached by that depth.
    pub coverage: Vec<f64>,
}

/// Why no tree can be built from the runs given.
#[derive(Clone, Debug, PartialEq)]
pub enum PathsError {
    NoRuns,
    /// The depth asked for, outside 1 to [`MAX_DEPTH`].
    Depth(usize),
    /// The number of seeds asked for, outside 1 to [`MAX_SEEDS`].
    Seeds(usize),
    /// A run with another prompt, policy or budget than the first run's.
    Mixed {
        seed: u64,
    },
    /// Two runs recorded different probabilities for the same token after the same path.
    Inconsistent {
        path: Vec<u32>,
        first: f64,
        seed: u64,
        other: f64,
    },
    Generate(String),
}

impl fmt::Display for PathsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathsError::NoRuns => write!(f, "a path tree needs at least one run"),
            PathsError::Depth(d) => {
                write!(f, "the tree's depth {d} is not between 1 and {MAX_DEPTH}")
            }
            PathsError::Seeds(n) => {
                write!(f, "{n} seeds: a tree is built from 1 to {MAX_SEEDS} seeds")
            }
            PathsError::Mixed { seed } => write!(
                f,
                "the run with seed {seed} has another prompt, policy or budget than the first run; a tree holds one configuration's runs"
            ),
            PathsError::Inconsistent {
                path,
                first,
                seed,
                other,
            } => write!(
                f,
                "the run with seed {seed} gave path {path:?} probability {other} where an earlier run gave {first}: the policy's distribution is not a function of the context (XTC with a chance below 1 draws it), so a path has no single analytic probability"
            ),
            PathsError::Generate(message) => write!(f, "{message}"),
        }
    }
}

impl std::error::Error for PathsError {}

impl From<GenerateError> for PathsError {
    fn from(e: GenerateError) -> PathsError {
        PathsError::Generate(e.to_string())
    }
}

impl PathTree {
    /// The tree of `records`' first `depth` tokens (see the module docs). Every record must
    /// be a run of the first one's configuration, with another seed.
    pub fn from_records(records: &[RunRecord], depth: usize) -> Result<PathTree, PathsError> {
        if !(1..=MAX_DEPTH).contains(&depth) {
            return Err(PathsError::Depth(depth));
        }
        let first = records.first().ok_or(PathsError::NoRuns)?;
        let same_run = |r: &RunRecord| RunConfig {
            seed: first.config.seed,
            seed_source: first.config.seed_source,
            ..r.config.clone()
        };
        let mut nodes: BTreeMap<Vec<u32>, PathNode> = BTreeMap::new();
        for record in records {
            if same_run(record) != first.config {
                return Err(PathsError::Mixed {
                    seed: record.config.seed,
                });
            }
            let steps = &record.steps[..record.steps.len().min(depth)];
            let mut analytic = 1.0;
            let mut path = Vec::with_capacity(steps.len());
            for (t, step) in steps.iter().enumerate() {
                analytic *= step.prob;
                path.push(step.token);
                let ended = usize::from(t + 1 == steps.len() && steps.len() < depth);
                match nodes.get_mut(&path) {
                    Some(node) => {
                        if (node.step_prob - step.prob).abs() > SAME_PROB {
                            return Err(PathsError::Inconsistent {
                                path,
                                first: node.step_prob,
                                seed: record.config.seed,
                                other: step.prob,
                            });
                        }
                        node.runs += 1;
                        node.ended += ended;
                    }
                    None => {
                        nodes.insert(
                            path.clone(),
                            PathNode {
                                depth: t + 1,
                                path: path.clone(),
                                text: step.text.clone(),
                                runs: 1,
                                empirical: 0.0,
                                step_prob: step.prob,
                                analytic,
                                ended,
                            },
                        );
                    }
                }
            }
        }
        let runs = records.len();
        for node in nodes.values_mut() {
            node.empirical = node.runs as f64 / runs as f64;
        }
        let coverage = (1..=depth)
            .map(|d| {
                nodes
                    .values()
                    .filter(|n| n.depth == d || (n.depth < d && n.ended > 0))
                    .map(|n| n.analytic)
                    .sum::<f64>()
            })
            .collect();
        Ok(PathTree {
            runs,
            depth,
            seeds: records.iter().map(|r| r.config.seed).collect(),
            nodes: depth_first(&nodes),
            coverage,
        })
    }

    /// The nodes one level below `parent` (the first tokens for an empty path), in the
    /// tree's order.
    pub fn children<'a>(&'a self, parent: &'a [u32]) -> impl Iterator<Item = &'a PathNode> {
        self.nodes
            .iter()
            .filter(move |n| n.path.len() == parent.len() + 1 && n.path.starts_with(parent))
    }
}

/// The nodes depth first, siblings by descending runs, then ascending token id.
fn depth_first(nodes: &BTreeMap<Vec<u32>, PathNode>) -> Vec<PathNode> {
    fn visit(nodes: &BTreeMap<Vec<u32>, PathNode>, parent: &[u32], out: &mut Vec<PathNode>) {
        // A node's descendants sort right after it, so its children are in that run.
        let mut children: Vec<&PathNode> = nodes
            .range(parent.to_vec()..)
            .take_while(|(path, _)| path.starts_with(parent))
            .map(|(_, node)| node)
            .filter(|node| node.path.len() == parent.len() + 1)
            .collect();
        children.sort_by_key(|n| (std::cmp::Reverse(n.runs), n.path[parent.len()]));
        for child in children {
            out.push(child.clone());
            visit(nodes, &child.path, out);
        }
    }
    let mut out = Vec::with_capacity(nodes.len());
    visit(nodes, &[], &mut out);
    out
}

/// Runs `config` once for each of `seeds` consecutive seeds from `first_seed` (wrapping
/// past `u64::MAX`; the config's own seed is replaced), each for at most `depth` tokens, and
/// builds their tree.
pub fn path_tree<M: LanguageModel + ?Sized>(
    model: &mut M,
    vocabulary: &dyn Vocabulary,
    config: &RunConfig,
    first_seed: u64,
    seeds: usize,
    depth: usize,
    clock: &mut dyn Clock,
) -> Result<PathTree, PathsError> {
    if !(1..=MAX_DEPTH).contains(&depth) {
        return Err(PathsError::Depth(depth));
    }
    if !(1..=MAX_SEEDS).contains(&seeds) {
        return Err(PathsError::Seeds(seeds));
    }
    let records = (0..seeds as u64)
        .map(|i| {
            let seed = first_seed.wrapping_add(i);
            let run = tree_run(config, seed, depth);
            generate(model, vocabulary, &run, clock, &mut Unobserved)
        })
        .collect::<Result<Vec<_>, _>>()?;
    PathTree::from_records(&records, depth)
}

/// The run one seed of a tree makes: `config` with that seed, for at most `depth` tokens.
pub fn tree_run(config: &RunConfig, seed: u64, depth: usize) -> RunConfig {
    RunConfig {
        seed,
        max_tokens: config.max_tokens.min(depth),
        ..config.clone()
    }
}
