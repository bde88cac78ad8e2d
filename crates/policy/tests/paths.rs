//! The many-seeds tree against references that share none of its code: each path's analytic
//! probability against a naive softmax of the toy model's logits written out here, and each
//! empirical frequency against its analytic probability (a binomial bound over thousands of
//! seeds, which a sampler drawing from anything but its reported distribution would fail).

mod support;

use policy::paths::{path_tree, PathTree, PathsError};
use policy::{Policy, StopConfig};
use support::{config, run, Bytes, Ticks, Toy, EOS, TOKENS};

/// The toy's logits after `last` at `position`, as `support::Toy` defines them.
fn toy_logits(last: u32, position: usize) -> Vec<f64> {
    (0..TOKENS.len())
        .map(|i| (((last as usize * 31 + i * 17 + position * 7) % 13) as f32 / 3.0) as f64)
        .collect()
}

/// Temperature, then top-k, then softmax, written plainly (the toy's logits have no ties).
fn naive(logits: &[f64], temperature: f64, k: usize) -> Vec<f64> {
    let scaled: Vec<f64> = logits.iter().map(|l| l / temperature).collect();
    let mut sorted = scaled.clone();
    sorted.sort_by(|a, b| b.partial_cmp(a).unwrap());
    let kth = sorted[k - 1];
    let max = sorted[0];
    let weights: Vec<f64> = scaled
        .iter()
        .map(|&l| if l >= kth { (l - max).exp() } else { 0.0 })
        .collect();
    let total: f64 = weights.iter().sum();
    weights.iter().map(|w| w / total).collect()
}

fn policy() -> Policy {
    Policy {
        temperature: 0.9,
        top_k: 4,
        ..Policy::default()
    }
}

fn tree(policy: Policy, first_seed: u64, seeds: usize, depth: usize) -> PathTree {
    let run = config(policy, 16, StopConfig::default());
    path_tree(
        &mut Toy::new(64),
        &Bytes,
        &run,
        first_seed,
        seeds,
        depth,
        &mut Ticks(0.0),
    )
    .unwrap()
}

#[test]
fn analytic_probabilities_are_the_naive_products() {
    let t = tree(policy(), 0, 300, 3);
    // The rendered prompt "a b" is three byte tokens; the last is "b" (2).
    let prompt_len = 3;
    assert!(t.nodes.len() > 10, "{}", t.nodes.len());
    for node in &t.nodes {
        let mut expected = 1.0;
        let mut last = 2;
        for (t, &token) in node.path.iter().enumerate() {
            let p = naive(&toy_logits(last, prompt_len + t), 0.9, 4);
            expected *= p[token as usize];
            last = token;
        }
        assert!(
            (node.analytic - expected).abs() < 1e-9,
            "{:?}: {} vs {expected}",
            node.path,
            node.analytic
        );
    }
}

#[test]
fn empirical_frequencies_converge_to_the_analytic_probabilities() {
    let n = 4000u64;
    let t = tree(policy(), 1000, n as usize, 2);
    assert_eq!(t.runs, n as usize);
    for node in &t.nodes {
        let p = node.analytic;
        let sd = (n as f64 * p * (1.0 - p)).sqrt();
        let gap = (node.runs as f64 - n as f64 * p).abs();
        assert!(
            gap <= 5.0 * sd + 1.0,
            "{:?}: {} runs, expected {:.1} ± {sd:.1}",
            node.path,
            node.runs,
            n as f64 * p
        );
        assert_eq!(node.empirical, node.runs as f64 / n as f64);
    }
    // Top-k 4 leaves four first tokens, each well above 1/4000: all are found, and they
    // hold all the mass.
    assert_eq!(t.nodes.iter().filter(|n| n.depth == 1).count(), 4);
    assert!((t.coverage[0] - 1.0).abs() < 1e-12, "{:?}", t.coverage);
    assert!(t.coverage[1] <= 1.0 + 1e-12 && t.coverage[1] > 0.99);
}

#[test]
fn the_tree_is_depth_first_and_its_counts_add_up() {
    let policy = Policy {
        eos_token: Some(EOS),
        ..policy()
    };
    let t = tree(policy, 0, 500, 3);
    let first: usize = t.children(&[]).map(|n| n.runs).sum();
    assert_eq!(first, 500);
    let mut ended = 0;
    for (i, node) in t.nodes.iter().enumerate() {
        // Each node's parent comes before it; siblings by descending runs.
        if node.depth > 1 {
            let parent = &node.path[..node.depth - 1];
            let at = t.nodes.iter().position(|n| n.path == parent).unwrap();
            assert!(at < i);
        }
        let below: usize = t.children(&node.path).map(|n| n.runs).sum();
        if node.depth < t.depth {
            assert_eq!(node.runs, below + node.ended, "{:?}", node.path);
        } else {
            assert_eq!(node.ended, 0);
        }
        ended += node.ended;
        if node.ended > 0 {
            assert_eq!(*node.path.last().unwrap(), EOS);
        }
        let siblings: Vec<usize> = t.children(&node.path).map(|n| n.runs).collect();
        assert!(siblings.windows(2).all(|w| w[0] >= w[1]), "{siblings:?}");
    }
    assert!(ended > 0, "no run stopped early: the test needs one");
}

#[test]
fn runs_that_are_not_one_distribution_are_refused_by_name() {
    let first = config(policy(), 3, StopConfig::default());
    let a = run(&mut Toy::new(64), &first);
    let mut other = config(
        Policy {
            top_k: 3,
            ..policy()
        },
        3,
        StopConfig::default(),
    );
    other.seed = 99;
    let b = run(&mut Toy::new(64), &other);
    assert_eq!(
        PathTree::from_records(&[a.clone(), b], 2),
        Err(PathsError::Mixed { seed: 99 })
    );
    assert_eq!(
        PathTree::from_records(std::slice::from_ref(&a), 0),
        Err(PathsError::Depth(0))
    );
    assert_eq!(PathTree::from_records(&[], 2), Err(PathsError::NoRuns));

    // XTC at a chance of one half: two runs at the same context keep different sets.
    let xtc = Policy {
        xtc_probability: 0.5,
        xtc_threshold: 0.1,
        top_k: 0,
        ..policy()
    };
    let err = path_tree(
        &mut Toy::new(64),
        &Bytes,
        &config(xtc, 16, StopConfig::default()),
        0,
        200,
        2,
        &mut Ticks(0.0),
    )
    .unwrap_err();
    assert!(matches!(err, PathsError::Inconsistent { .. }), "{err:?}");
    assert!(err.to_string().contains("XTC"), "{err}");
}

#[test]
fn a_single_seed_is_its_own_run() {
    let run_config = config(policy(), 3, StopConfig::default());
    let record = run(&mut Toy::new(64), &run_config);
    let t = tree(policy(), 7, 1, 3);
    let path: Vec<u32> = record.steps.iter().map(|s| s.token).collect();
    let leaf = t.nodes.last().unwrap();
    assert_eq!(leaf.path, path);
    let product: f64 = record.steps.iter().map(|s| s.prob).product();
    assert_eq!(leaf.analytic, product);
    assert_eq!(leaf.empirical, 1.0);
}
