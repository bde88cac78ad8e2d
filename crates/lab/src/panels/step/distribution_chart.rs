//! One stage's distribution drawn twice from the same rows by the shared
//! [`BarChart`](crate::widgets::chart::BarChart): bars for the eye and a table (always in the
//! DOM) for screen readers and for checking the numbers.

use leptos::prelude::*;

use crate::panels::step::view_model::StageView;
use crate::widgets::chart::{Bar, BarChart, Cell, Layout};

/// Probabilities are shown to this many decimals; the table cells carry full precision in
/// `data-value` so tests can compare exactly.
fn show(p: f64) -> String {
    format!("{p:.4}")
}

#[component]
pub fn Distribution(stage: StageView, index: usize) -> impl IntoView {
    let title = format!("After {}", stage.label);
    let explanation = stage.explanation;
    let summary = format!(
        "{} of {} tokens survive after {}.",
        stage.survivors,
        stage.rows.len(),
        stage.label
    );
    let caption = format!(
        "Distribution after {}: probability of each token ({} survive)",
        stage.label, stage.survivors
    );
    let bars = stage
        .rows
        .into_iter()
        .map(|row| {
            let (logit, class, status) = match row.logit {
                Some(l) => (Cell::number(format!("{l:.4}"), l), "bar", "kept"),
                None => (Cell::text("—"), "bar removed", "removed"),
            };
            Bar::new(row.id.to_string(), row.prob)
                .class(class)
                .row_class(status)
                .cell(logit)
                .cell(Cell::number(show(row.prob), row.prob))
                .cell(Cell::text(status))
        })
        .collect();
    view! {
        <figure class="stage" data-stage=stage.label data-index=index>
            <figcaption>{title}</figcaption>
            <p class="explanation">{explanation}</p>
            // Probabilities: the scale ends at 1 whatever the tallest bar.
            <BarChart
                bars=bars
                layout=Layout::Columns { width: 320.0, height: 160.0, marks: Vec::new() }
                top=1.0
                summary=summary
                caption=caption
                headers=&["Token", "Logit", "Probability", "Status"]
            />
        </figure>
    }
}
