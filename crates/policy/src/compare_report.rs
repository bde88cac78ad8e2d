//! A comparison's report and a path tree's, as [`report`] parts: a part per measure of a
//! [`Comparison`] ([`comparison_parts`]), each a chart with its table, and a part per
//! [`PathTree`] ([`tree_part`]). `decode-lab compare` and `paths` write them as Markdown;
//! the lab's model worker writes them as the Compare panel's HTML. `--json` prints the
//! values themselves.

use report::{Block, Cell, ChartRow, Part, Row, RowsChart, Table};

use crate::compare::{Comparison, RunShape};
use crate::paths::PathTree;
use crate::RunRecord;

/// A tree chart draws at most this many nodes; its table lists them all.
const MOST_TREE_ROWS: usize = 60;

/// The comparison's parts: the two runs token by token, the probability of a's token
/// under each policy, KL and total variation per step, and each output's shape. `words`
/// name each policy (`knob_words`, or a form's own words for the knobs it set).
pub fn comparison_parts(comparison: &Comparison, words: [&str; 2]) -> Vec<Part> {
    vec![
        runs_part(comparison, words),
        probability_part(comparison),
        kl_part(comparison),
        tv_part(comparison),
        shape_part(comparison),
    ]
}

fn token_words(record: &RunRecord, step: usize) -> String {
    record
        .steps
        .get(step)
        .map_or("nothing (it had stopped)".to_string(), |s| {
            format!("{} {:?}", s.token, s.text)
        })
}

/// Where the runs part, in a sentence (the lab's live region says it).
pub fn divergence_words(c: &Comparison) -> String {
    match c.first_divergence {
        None => format!("Both policies chose the same {} tokens.", c.a.steps.len()),
        Some(t) => format!(
            "The runs part at step {t}: a chose {}, b chose {}.",
            token_words(&c.a, t),
            token_words(&c.b, t)
        ),
    }
}

fn number(value: f64, places: usize) -> Cell {
    if value.is_infinite() {
        Cell::number("∞", "inf")
    } else {
        Cell::number(format!("{value:.places$}"), value)
    }
}

fn step_label(c: &Comparison, t: usize) -> String {
    format!("{t}: {:?}", c.a.steps[t].text)
}

fn runs_part(c: &Comparison, [words_a, words_b]: [&str; 2]) -> Part {
    let run = |name: &str, words: &str, record: &RunRecord, shape: &RunShape| {
        format!(
            "{name} ({words}): {:?}, {} tokens; it stopped because {}.",
            record.output_text,
            shape.tokens,
            record.stop_reason.describe()
        )
    };
    let longest = c.a.steps.len().max(c.b.steps.len());
    let rows = (0..longest)
        .map(|t| {
            let same = c.a.steps.get(t).map(|s| s.token) == c.b.steps.get(t).map(|s| s.token);
            Row {
                class: c
                    .first_divergence
                    .is_some_and(|d| t >= d)
                    .then(|| "cmp-parted".to_string()),
                header: t.to_string(),
                cells: vec![
                    Cell::text(token_words(&c.a, t)),
                    Cell::text(token_words(&c.b, t)),
                    Cell::text(if same { "same" } else { "different" }),
                ],
            }
        })
        .collect();
    Part {
        id: "cmp-runs".into(),
        title: "The two runs, token by token".into(),
        blocks: vec![
            Block::Text(run("a", words_a, &c.a, &c.shape_a)),
            Block::Text(run("b", words_b, &c.b, &c.shape_b)),
            Block::Text(divergence_words(c)),
            Block::Table(Table::mirror(
                "cmp-tokens",
                "The tokens aligned by step; rows from the first divergence on are marked",
                &["Step", "a's token", "b's token", "Same?"],
                rows,
            )),
        ],
    }
}

fn probability_part(c: &Comparison) -> Part {
    let rows = c
        .steps
        .iter()
        .map(|s| ChartRow {
            label: step_label(c, s.step),
            level: 0,
            values: vec![s.prob_a, s.prob_b],
            end_text: format!("{:.3} / {:.3}", s.prob_a, s.prob_b),
            title: format!(
                "step {}: a gives its token {:.4}, b gives it {:.4}",
                s.step, s.prob_a, s.prob_b
            ),
        })
        .collect();
    let table_rows = c
        .steps
        .iter()
        .map(|s| Row {
            class: None,
            header: step_label(c, s.step),
            cells: vec![
                number(s.prob_a, 4),
                number(s.prob_b, 4),
                Cell::number(s.survivors_a.to_string(), s.survivors_a),
                Cell::number(s.survivors_b.to_string(), s.survivors_b),
            ],
        })
        .collect();
    let zero = c.steps.iter().filter(|s| s.prob_b == 0.0).count();
    Part {
        id: "cmp-prob".into(),
        title: "How likely each policy makes a's token".into(),
        blocks: vec![Block::Rows(Box::new(RowsChart {
            caption: "The probability of a's token at each step of a's path, under a and under b (teacher-forced)".into(),
            summary: format!(
                "Over {} steps of a's path, b gives a's token probability 0 at {zero} of them.",
                c.steps.len()
            ),
            scale: 1.0,
            axis_label: "probability".into(),
            series: vec!["cmp-a".into(), "cmp-b".into()],
            rows,
            legend: "Upper bar: policy a; lower bar: policy b.".into(),
            table: Table::mirror(
                "cmp-prob-table",
                "a's token at each step. Its probability under a and under b. How many tokens each kept.",
                &["Step: a's token", "Under a", "Under b", "Kept by a", "Kept by b"],
                table_rows,
            ),
        }))],
    }
}

/// A chart and table of one per-step distance: KL or total variation.
fn distance_part(
    c: &Comparison,
    id: &str,
    title: &str,
    unit: Option<&str>,
    value: fn(&crate::compare::Divergence) -> f64,
) -> Part {
    let values: Vec<f64> = c.steps.iter().map(|s| value(&s.divergence)).collect();
    let finite_max = values
        .iter()
        .copied()
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    let infinite = values.iter().filter(|v| v.is_infinite()).count();
    let largest = c
        .steps
        .iter()
        .zip(&values)
        .filter(|(_, v)| v.is_finite())
        .max_by(|x, y| x.1.total_cmp(y.1));
    let words = |v: f64| {
        if v.is_infinite() {
            "∞".to_string()
        } else {
            format!("{v:.4}")
        }
    };
    let mut summary = match largest {
        Some((s, v)) => format!(
            "The policies differ most at step {}: {title} is {}.",
            s.step,
            match unit {
                Some(unit) => format!("{v:.4} {unit}"),
                None => format!("{v:.4}"),
            }
        ),
        None => format!("{title} has no finite value."),
    };
    if infinite > 0 {
        summary += &format!(
            " It is infinite at {infinite} of {} steps, where a keeps a token b removes.",
            values.len()
        );
    }
    let rows = c
        .steps
        .iter()
        .zip(&values)
        .map(|(s, &v)| ChartRow {
            label: step_label(c, s.step),
            level: 0,
            values: vec![v],
            end_text: words(v),
            title: format!("step {}: {}", s.step, words(v)),
        })
        .collect();
    let table_rows = c
        .steps
        .iter()
        .zip(&values)
        .map(|(s, &v)| Row {
            class: None,
            header: step_label(c, s.step),
            cells: vec![number(v, 4)],
        })
        .collect();
    let in_unit = unit.map_or(String::new(), |u| format!(", in {u}"));
    Part {
        id: id.into(),
        title: format!("{title} at each step of a's path"),
        blocks: vec![Block::Rows(Box::new(RowsChart {
            caption: format!(
                "{title} between the two policies' distributions over the same logits{in_unit}"
            ),
            summary,
            scale: if finite_max > 0.0 { finite_max } else { 1.0 },
            axis_label: unit.unwrap_or("from 0 to 1").into(),
            series: vec!["cmp-a".into()],
            rows,
            legend: "A bar past the scale (drawn to its end with a dashed outline, written ∞) is infinite.".into(),
            table: Table::mirror(
                &format!("{id}-table"),
                format!("{title} per step{in_unit}"),
                &["Step: a's token", title],
                table_rows,
            ),
        }))],
    }
}

fn kl_part(c: &Comparison) -> Part {
    distance_part(c, "cmp-kl", "KL(a‖b)", Some("nats"), |d| d.kl)
}

fn tv_part(c: &Comparison) -> Part {
    distance_part(c, "cmp-tv", "Total variation", None, |d| d.tv)
}

/// One measure of a run's shape, absent below its n-gram's length.
type Measure = fn(&RunShape) -> Option<f64>;

fn shape_part(c: &Comparison) -> Part {
    let measures: [(&str, Measure); 3] = [
        ("distinct-1", |s| s.distinct_1),
        ("distinct-2", |s| s.distinct_2),
        ("repetition (4-grams seen before)", |s| s.repetition),
    ];
    let figure = |x: Option<f64>| x.map_or(Cell::text("–"), |v| number(v, 3));
    let rows = measures
        .iter()
        .map(|(name, of)| {
            let (a, b) = (of(&c.shape_a), of(&c.shape_b));
            ChartRow {
                label: name.to_string(),
                level: 0,
                values: vec![a.unwrap_or(0.0), b.unwrap_or(0.0)],
                end_text: format!(
                    "{} / {}",
                    a.map_or("–".into(), |v| format!("{v:.3}")),
                    b.map_or("–".into(), |v| format!("{v:.3}"))
                ),
                title: format!("{name} of a and b"),
            }
        })
        .collect();
    let table_rows = measures
        .iter()
        .map(|(name, of)| Row {
            class: None,
            header: name.to_string(),
            cells: vec![figure(of(&c.shape_a)), figure(of(&c.shape_b))],
        })
        .collect();
    Part {
        id: "cmp-shape".into(),
        title: "What each output looks like".into(),
        blocks: vec![Block::Rows(Box::new(RowsChart {
            caption: "Distinct token n-grams and repetition of each run's output".into(),
            summary: format!(
                "a's output has {} tokens and b's {}; distinct-1 {} against {}.",
                c.shape_a.tokens,
                c.shape_b.tokens,
                c.shape_a
                    .distinct_1
                    .map_or("–".into(), |v| format!("{v:.3}")),
                c.shape_b
                    .distinct_1
                    .map_or("–".into(), |v| format!("{v:.3}"))
            ),
            scale: 1.0,
            axis_label: "share".into(),
            series: vec!["cmp-a".into(), "cmp-b".into()],
            rows,
            legend: "Upper bar: policy a; lower bar: policy b; – below the n-gram's length.".into(),
            table: Table::mirror(
                "cmp-shape-table",
                "Each run's distinct-1, distinct-2 and repetition rate",
                &["Measure", "a", "b"],
                table_rows,
            ),
        }))],
    }
}

/// The tree of a policy's paths (called `name`, or "the policy" when it is empty; `words`
/// name its knobs): each path's empirical frequency beside its analytic probability, and
/// how much of the policy's probability the paths found hold.
pub fn tree_part(name: &str, words: &str, tree: &PathTree) -> Part {
    let who = match name {
        "" => "the policy".to_string(),
        name => format!("policy {name}"),
    };
    let id = match name {
        "" => "tree".to_string(),
        name => format!("cmp-tree-{name}"),
    };
    let texts: std::collections::HashMap<&[u32], &str> = tree
        .nodes
        .iter()
        .map(|n| (n.path.as_slice(), n.text.as_str()))
        .collect();
    let path_words = |path: &[u32]| -> String {
        (1..=path.len())
            .map(|k| {
                texts
                    .get(&path[..k])
                    .map_or(path[k - 1].to_string(), |t| format!("{t:?}"))
            })
            .collect::<Vec<_>>()
            .join(" → ")
    };
    let rows: Vec<ChartRow> = tree
        .nodes
        .iter()
        .take(MOST_TREE_ROWS)
        .map(|n| ChartRow {
            label: format!("{:?}", n.text),
            level: n.depth - 1,
            values: vec![n.empirical, n.analytic],
            end_text: format!("{:.3} / {:.3}", n.empirical, n.analytic),
            title: format!(
                "{}: {} of {} runs, analytic {:.4}",
                path_words(&n.path),
                n.runs,
                tree.runs,
                n.analytic
            ),
        })
        .collect();
    let table_rows = tree
        .nodes
        .iter()
        .map(|n| Row {
            class: Some(format!("cmp-depth-{}", n.depth)),
            header: path_words(&n.path),
            cells: vec![
                Cell::number(n.runs.to_string(), n.runs),
                number(n.empirical, 4),
                number(n.analytic, 4),
                number(n.step_prob, 4),
                Cell::number(n.ended.to_string(), n.ended),
            ],
        })
        .collect();
    let coverage = tree
        .coverage
        .iter()
        .enumerate()
        .map(|(d, m)| {
            format!(
                "by token {}, the paths found hold {:.1} % of the policy's probability (no run took the other {:.1} %)",
                d + 1,
                m * 100.0,
                (1.0 - m).max(0.0) * 100.0
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    let first = tree.seeds.first().copied().unwrap_or_default();
    let last = tree.seeds.last().copied().unwrap_or_default();
    let shown = if tree.nodes.len() > MOST_TREE_ROWS {
        format!(
            " The chart draws the first {MOST_TREE_ROWS} of its {} nodes; the table lists them all.",
            tree.nodes.len()
        )
    } else {
        String::new()
    };
    let top = tree.nodes.first();
    Part {
        id: id.clone(),
        title: format!(
            "{} over {} seeds: the paths of its first {} tokens",
            capitalised(&who),
            tree.runs,
            tree.depth
        ),
        blocks: vec![
            Block::Text(format!(
                "{} runs of {who} ({}), seeds {first} to {last}. Beside each path, the share of runs that took it (empirical) and the product of the policy's probabilities of its tokens (analytic); as the runs grow, the two meet. {}.{shown}",
                tree.runs,
                words,
                capitalised(&coverage)
            )),
            Block::Rows(Box::new(RowsChart {
                caption: format!("{}'s tree of paths: empirical frequency and analytic probability of each", capitalised(&who)),
                summary: match top {
                    Some(n) => format!(
                        "The most taken first token is {:?}: {} of {} runs ({:.1} %), analytic {:.1} %.",
                        n.text,
                        n.runs,
                        tree.runs,
                        n.empirical * 100.0,
                        n.analytic * 100.0
                    ),
                    None => "No run chose a token.".into(),
                },
                scale: 1.0,
                axis_label: "probability".into(),
                series: vec!["cmp-empirical".into(), "cmp-analytic".into()],
                rows,
                legend: "Each token indented under the one before it. Upper bar: the share of runs (empirical); lower bar: the policy's probability of the path (analytic).".into(),
                table: Table::mirror(
                    &format!("{id}-table"),
                    format!("Every path of {who}'s runs, depth first"),
                    &["Path", "Runs", "Empirical", "Analytic", "Step probability", "Ended here"],
                    table_rows,
                ),
            })),
        ],
    }
}

fn capitalised(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map_or(String::new(), |c| {
        c.to_uppercase().collect::<String>() + chars.as_str()
    })
}
