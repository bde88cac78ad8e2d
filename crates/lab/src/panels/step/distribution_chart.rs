//! One stage's distribution drawn twice from the same rows by the shared
//! [`BarChart`](crate::widgets::chart::BarChart): bars for the eye and a table (always in the
//! DOM) for screen readers and for checking the numbers. A stage that cut by likelihood
//! draws its cut-off line, and the tokens it removed as grey bars at the probability they
//! would have had: all at or below the line.

use leptos::prelude::*;

use crate::panels::step::view_model::StageView;
use crate::widgets::chart::{Bar, BarChart, Cell, Layout, Mark};

/// Probabilities are shown to this many decimals; the table cells carry full precision in
/// `data-value` so tests can compare exactly.
fn show(p: f64) -> String {
    format!("{p:.4}")
}

#[component]
pub fn Distribution(stage: StageView, index: usize) -> impl IntoView {
    let title = format!("After {}", stage.label);
    let explanation = stage.explanation;
    let mut summary = stage.takeaway();
    if let Some(cut) = stage.cut_off {
        summary += &format!(
            " Its cut-off is {}: what it removed, drawn in grey at the probability it would have had, is at or below it.",
            show(cut)
        );
    }
    let marks = stage
        .cut_off
        .map(|cut| Mark {
            value: cut,
            class: "cut-off",
            label: format!("cut {cut:.3}"),
        })
        .into_iter()
        .collect();
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
            let (height, unkept, status) = match row.unkept {
                Some(p) => (p, Cell::number(show(p), p), "removed here"),
                None => (row.prob, Cell::text("—"), status),
            };
            Bar::new(row.id.to_string(), height)
                .sound(row.prob)
                .class(class)
                .row_class(if row.logit.is_some() {
                    "kept"
                } else {
                    "removed"
                })
                .group(if row.logit.is_some() {
                    "kept tokens"
                } else {
                    "removed tokens"
                })
                .cell(logit)
                .cell(Cell::number(show(row.prob), row.prob))
                .cell(Cell::text(status))
                .cell(unkept)
        })
        .collect();
    view! {
        <figure class="stage" data-stage=stage.label data-index=index>
            <figcaption>{title}</figcaption>
            <p class="explanation">{explanation}</p>
            // Probabilities: the scale ends at 1 whatever the tallest bar.
            <BarChart
                bars=bars
                layout=Layout::Columns { width: 320.0, height: 160.0, marks }
                top=1.0
                summary=summary
                caption=caption
                headers=&["Token", "Logit", "Probability", "Status", "Had it been kept"]
            />
        </figure>
    }
}
