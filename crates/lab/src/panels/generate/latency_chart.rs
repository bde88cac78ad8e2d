//! A run's latency per token drawn twice from the same rows by the shared
//! [`BarChart`](crate::widgets::chart::BarChart): bars (the first is the prefill, i.e. the
//! time to first token) and a table that is always in the DOM.

use leptos::prelude::*;
use policy::generate::StepRecord;
use report::Cell;

use crate::widgets::chart::{Bar, BarChart, Layout, Mark};

/// One bar and one table row: a step's model and policy time, in milliseconds.
#[derive(Clone, Debug, PartialEq)]
pub struct LatencyRow {
    pub step: usize,
    pub model_ms: f64,
    pub policy_ms: f64,
}

impl LatencyRow {
    pub fn total_ms(&self) -> f64 {
        self.model_ms + self.policy_ms
    }

    pub fn of(steps: &[StepRecord]) -> Vec<LatencyRow> {
        steps
            .iter()
            .map(|s| LatencyRow {
                step: s.step,
                model_ms: s.model_us / 1e3,
                policy_ms: s.policy_us / 1e3,
            })
            .collect()
    }
}

#[component]
pub fn LatencyChart(rows: Vec<LatencyRow>) -> impl IntoView {
    let highest = rows.iter().map(LatencyRow::total_ms).fold(0.0, f64::max);
    let decode: Vec<f64> = rows.iter().skip(1).map(LatencyRow::total_ms).collect();
    let mean_decode =
        (!decode.is_empty()).then(|| decode.iter().sum::<f64>() / decode.len() as f64);
    let summary = match (rows.first(), mean_decode) {
        (Some(first), Some(mean)) => format!(
            "The first token took {:.1} ms, with the prompt. Later tokens took {:.2} ms each on average.",
            first.total_ms(),
            mean
        ),
        (Some(first), None) => format!("The only token took {:.1} ms.", first.total_ms()),
        _ => "No tokens yet.".to_string(),
    };
    // The tallest bar's level, so the bars read in milliseconds.
    let marks = (highest > 0.0)
        .then(|| Mark {
            value: highest,
            class: "axis",
            label: format!("{highest:.1} ms"),
        })
        .into_iter()
        .collect();
    let bars = rows
        .iter()
        .enumerate()
        .map(|(i, row)| {
            let label = if row.step == 0 {
                "0 (prefill)".to_string()
            } else {
                row.step.to_string()
            };
            Bar::new(label, row.total_ms())
                .tick(row.step.to_string())
                .class(if i == 0 { "bar prefill" } else { "bar" })
                .cell(Cell::number(format!("{:.3}", row.model_ms), row.model_ms))
                .cell(Cell::number(format!("{:.3}", row.policy_ms), row.policy_ms))
                .cell(Cell::number(
                    format!("{:.3}", row.total_ms()),
                    row.total_ms(),
                ))
        })
        .collect();
    view! {
        <figure class="latency" data-testid="latency">
            <figcaption>{summary.clone()}</figcaption>
            <BarChart
                bars=bars
                layout=Layout::Columns { width: 480.0, height: 140.0, marks }
                summary=summary
                caption="How long each token took, in ms: the model, the policy step, and both".to_string()
                headers=&["Step", "Model (ms)", "Policy (ms)", "Total (ms)"]
            />
        </figure>
    }
}
