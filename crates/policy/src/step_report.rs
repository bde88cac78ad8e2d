//! One step's stage snapshots ([`Snapshots::Record`](crate::Snapshots::Record)) spread over
//! the whole vocabulary, and written as [`report`] parts. Each stage becomes a
//! [`StageView`]: a row per token (one an earlier stage removed keeps its row, at
//! probability 0), what a token this very stage removed would have had had it been kept,
//! and, for a stage that cut by likelihood, its cut-off. [`step_parts`] writes a part per
//! stage and one for the draw: `decode-lab pipeline --markdown` prints them, and the lab's
//! decoding step draws the same views and cells ([`TokenRow::cells`]) as bars and tables.

use report::{Block, Cell, Part, Row, Table};
use serde::{Deserialize, Serialize};

use crate::{StageSnapshot, StepOutcome};

/// One token after one stage.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TokenRow {
    pub id: u32,
    /// `None` when the token was removed by this stage or an earlier one.
    pub logit: Option<f64>,
    pub prob: f64,
    /// For a token this very stage removed: the probability it would have had if kept (its
    /// probability before the stage over the mass the stage kept).
    pub unkept: Option<f64>,
}

/// The distribution after one stage, over the whole vocabulary.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StageView {
    pub label: String,
    /// What the stage does, in one line.
    pub explanation: String,
    pub survivors: usize,
    pub rows: Vec<TokenRow>,
    /// For a stage that cut by likelihood ([`crate::Stage::cuts_by_likelihood`]) and removed
    /// something: the lowest probability it kept. Every token it removed would have had at
    /// most this much.
    pub cut_off: Option<f64>,
}

/// The columns of a stage's table, after the token's id.
pub const STAGE_HEADERS: &[&str] = &[
    "Token",
    "Logit",
    "Probability",
    "Status",
    "Had it been kept",
];

/// A probability as the step's tables show it: four decimals (a cell carries the full
/// figure in its value).
pub fn shown(p: f64) -> String {
    format!("{p:.4}")
}

impl TokenRow {
    /// Whether the stage kept it: `kept`, `removed here` or `removed` (earlier).
    pub fn status(&self) -> &'static str {
        match (self.logit, self.unkept) {
            (Some(_), _) => "kept",
            (None, Some(_)) => "removed here",
            (None, None) => "removed",
        }
    }

    /// Its cells after its id: logit, probability, status, and what it would have had had
    /// this stage kept it.
    pub fn cells(&self) -> Vec<Cell> {
        let dash = || Cell::text("—");
        vec![
            self.logit
                .map_or_else(dash, |l| Cell::number(format!("{l:.4}"), l)),
            Cell::number(shown(self.prob), self.prob),
            Cell::text(self.status()),
            self.unkept.map_or_else(dash, |p| Cell::number(shown(p), p)),
        ]
    }
}

/// Each stage of `stages` spread over a vocabulary of `vocab` tokens, in order.
pub fn spread(stages: &[StageSnapshot], vocab: usize) -> Vec<StageView> {
    let mut before: Option<&StageSnapshot> = None;
    let mut views = Vec::with_capacity(stages.len());
    for stage in stages {
        let mut rows: Vec<TokenRow> = (0..vocab as u32)
            .map(|id| TokenRow {
                id,
                logit: None,
                prob: 0.0,
                unkept: None,
            })
            .collect();
        for t in &stage.tokens {
            if let Some(row) = rows.get_mut(t.id as usize) {
                *row = TokenRow {
                    id: t.id,
                    logit: Some(t.logit),
                    prob: t.prob,
                    unkept: None,
                };
            }
        }
        let removed = before.is_some_and(|b| b.tokens.len() > stage.tokens.len());
        if let (Some(before), true) = (before, removed) {
            // Only a filter removes: the tokens it kept keep their logits, and its mass is
            // theirs before it.
            let kept: f64 = before
                .tokens
                .iter()
                .filter(|t| rows.get(t.id as usize).is_some_and(|r| r.logit.is_some()))
                .map(|t| t.prob)
                .sum();
            for t in &before.tokens {
                if let Some(row) = rows.get_mut(t.id as usize) {
                    if row.logit.is_none() && kept > 0.0 {
                        row.unkept = Some(t.prob / kept);
                    }
                }
            }
        }
        views.push(StageView {
            label: stage.stage.label().to_string(),
            explanation: match stage.temperature {
                Some(t) => format!(
                    "{} Here the entropy of the candidates set it to {t:.3}.",
                    stage.stage.explanation()
                ),
                None => stage.stage.explanation().to_string(),
            },
            survivors: stage.survivors,
            cut_off: (removed && stage.stage.cuts_by_likelihood())
                .then(|| {
                    stage
                        .tokens
                        .iter()
                        .map(|t| t.prob)
                        .fold(f64::INFINITY, f64::min)
                })
                .filter(|p| p.is_finite()),
            rows,
        });
        before = Some(stage);
    }
    views
}

impl StageView {
    /// The most probable token the stage kept (the lowest id among equals).
    pub fn top(&self) -> Option<&TokenRow> {
        self.rows
            .iter()
            .filter(|r| r.logit.is_some())
            .fold(None::<&TokenRow>, |best, r| match best {
                Some(b) if b.prob >= r.prob => Some(b),
                _ => Some(r),
            })
    }

    /// The stage's takeaway, from its rows: the most probable token after the stage and its
    /// share of the probability, then what the stage removed: "After top-k, token 2 has
    /// 61.2 %, and token 1 was removed."
    pub fn takeaway(&self) -> String {
        let label = &self.label;
        let removed: Vec<String> = self
            .rows
            .iter()
            .filter(|r| r.unkept.is_some())
            .map(|r| r.id.to_string())
            .collect();
        let mut text = match self.top() {
            Some(r) => format!("After {label}, token {} has {:.1} %", r.id, 100.0 * r.prob),
            None => format!("After {label}, no token is left"),
        };
        // One short sentence, with no second naming of the stage, so that the takeaway
        // reads at grade 9 or below.
        text += &match removed.as_slice() {
            [] => ", and no token was removed.".to_string(),
            [one] => format!(", and token {one} was removed."),
            [init @ .., last] if removed.len() <= 5 => {
                format!(", and tokens {} and {last} were removed.", init.join(", "))
            }
            many => format!(", and {} tokens were removed.", many.len()),
        };
        text
    }

    /// The cut-off in a sentence, for a stage that drew one.
    pub fn cut_off_words(&self) -> Option<String> {
        self.cut_off.map(|cut| {
            format!(
                "Its cut-off is at {}: every token it removed would have had at most that much.",
                shown(cut)
            )
        })
    }

    /// The table of the tokens the stage holds or removed itself (a token an earlier stage
    /// removed is left out), in id order.
    pub fn table(&self, index: usize) -> Table {
        let rows = self
            .rows
            .iter()
            .filter(|r| r.logit.is_some() || r.unkept.is_some())
            .map(|r| Row {
                class: Some(r.status().replace(' ', "-")),
                header: r.id.to_string(),
                cells: r.cells(),
            })
            .collect();
        Table::mirror(
            &format!("stage-{index}-table"),
            format!(
                "Each token's share after {} ({} left)",
                self.label, self.survivors
            ),
            STAGE_HEADERS,
            rows,
        )
    }
}

/// The step as parts: one per stage (what it does, its takeaway, its cut-off and its table),
/// then the draw.
pub fn step_parts(stages: &[StageView], outcome: &StepOutcome, seed: u64) -> Vec<Part> {
    let mut parts: Vec<Part> = stages
        .iter()
        .enumerate()
        .map(|(i, stage)| {
            let mut blocks = vec![
                Block::Text(stage.explanation.clone()),
                Block::Text(stage.takeaway()),
            ];
            blocks.extend(stage.cut_off_words().map(Block::Text));
            blocks.push(Block::Table(stage.table(i)));
            Part {
                id: format!("stage-{i}"),
                title: format!("After {}", stage.label),
                blocks,
            }
        })
        .collect();
    let picked = match outcome.draw {
        Some(u) => format!("the uniform draw {u:.6} (seed {seed})"),
        None => "greedy: temperature 0 takes the argmax".to_string(),
    };
    parts.push(Part {
        id: "draw".into(),
        title: "The draw".into(),
        blocks: vec![Block::Text(format!(
            "Chosen token: {} with probability {}, picked by {picked}. {} tokens survived every filter; the final distribution's entropy is {:.4} nats.",
            outcome.token,
            shown(outcome.prob),
            outcome.survivors,
            outcome.entropy
        ))],
    });
    parts
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{step, NumpyRng, Policy, Snapshots, StepContext};

    /// The chapter's example by hand: logits 1.2, 0.1, 2.4, 1.7 at temperature 0.7 and
    /// top-k 3 (temperature first). Top-k removes token 1, which before it had
    /// e^(0.1/0.7) over the four weights; had it been kept it would have had that over the
    /// mass of the three kept, and the cut-off is the least kept share.
    #[test]
    fn top_k_removes_token_1_and_says_what_it_would_have_had() {
        let logits = [1.2, 0.1, 2.4, 1.7];
        let policy = Policy {
            temperature: 0.7,
            top_k: 3,
            ..Policy::default()
        };
        let outcome = step(
            &policy,
            &logits,
            StepContext::new(&[], 0),
            &mut NumpyRng::new(7),
            Snapshots::Record,
        )
        .unwrap();
        let views = spread(outcome.stages.as_deref().unwrap(), logits.len());
        let weights = logits.map(|l: f64| (l / 0.7).exp());
        let all: f64 = weights.iter().sum();
        let kept = all - weights[1];
        let top_k = views.iter().find(|v| v.label == "top-k").unwrap();
        let unkept = top_k.rows[1].unkept.unwrap();
        assert!((unkept - (weights[1] / all) / (kept / all)).abs() < 1e-12);
        assert_eq!(top_k.rows[1].status(), "removed here");
        assert!((top_k.cut_off.unwrap() - weights[0] / kept).abs() < 1e-12);
        assert_eq!(top_k.table(1).rows.len(), 4);
        assert_eq!(
            top_k.takeaway().split(", and ").nth(1),
            Some("token 1 was removed.")
        );
        // The draw's part closes the report; every stage has its own before it.
        let parts = step_parts(&views, &outcome, 7);
        assert_eq!(parts.len(), views.len() + 1);
        assert!(parts[views.len()].blocks.iter().any(
            |b| matches!(b, Block::Text(t) if t.starts_with(&format!("Chosen token: {}", outcome.token)))
        ));
    }
}
