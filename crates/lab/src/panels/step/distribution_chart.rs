//! One stage's distribution drawn twice from the same rows by the shared
//! [`BarChart`](crate::widgets::chart::BarChart): bars for the eye and a table (always in the
//! DOM) for screen readers and for checking the numbers. A stage that cut by likelihood
//! draws its cut-off line, and the tokens it removed as hollow dashed bars at the probability they
//! would have had: all at or below the line. A vocabulary too large to draw one bar per
//! token ([`MOST_BARS`](crate::panels::step::view_model::MOST_BARS)) draws its tallest bars
//! and the rest as one bar, and lists every token in a table under a disclosure.

use leptos::prelude::*;
use policy::step_report::{self, STAGE_HEADERS as HEADERS};
use report::{Cell, Row};

use crate::panels::step::view_model::{Bars, Row as TokenRow, StageView};
use crate::widgets::chart::{body_rows, mirror_table, Bar, BarChart, Layout, Mark};

/// The bar's class of a token: hollow and dashed when removed.
fn bar_class(row: &TokenRow) -> &'static str {
    match row.logit {
        Some(_) => "bar",
        None => "bar removed",
    }
}

#[component]
pub fn Distribution(stage: StageView, index: usize) -> impl IntoView {
    let title = format!("After {}", stage.label);
    let explanation = stage.explanation.clone();
    let mut summary = stage.takeaway();
    if let Some(cut) = stage.cut_off {
        summary += &format!(
            " Its cut-off line is at {}. Removed tokens are hollow dashed bars, drawn at the share they would have had, at or below the line.",
            step_report::shown(cut)
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
        "Each token's share after {} ({} left)",
        stage.label, stage.survivors
    );
    let top = stage.top().map(|r| r.id);
    let (shown, rest) = stage.shown();
    let mut bars: Vec<Bar> = shown
        .iter()
        .map(|row| {
            let bar = Bar::new(row.id.to_string(), row.unkept.unwrap_or(row.prob))
                .sound(row.prob)
                .class(bar_class(row))
                .row_class(match (row.logit.is_some(), Some(row.id) == top) {
                    (true, true) => "kept top",
                    (true, false) => "kept",
                    (false, _) => "removed",
                })
                .group(if row.logit.is_some() {
                    "kept tokens"
                } else {
                    "removed tokens"
                });
            row.cells().into_iter().fold(bar, Bar::cell)
        })
        .collect();
    // The tokens past the tallest bars, as one bar and one row; every token keeps its own
    // row in the table of the whole vocabulary under the chart.
    let whole = rest.map(|rest| {
        bars.push(
            Bar::new(format!("The other {} tokens", rest.count), rest.prob)
                .tick("rest")
                .class("bar rest")
                .row_class("rest")
                .group("the rest")
                .cell(Cell::text("—"))
                .cell(Cell::number(step_report::shown(rest.prob), rest.prob))
                .cell(Cell::text(format!(
                    "{} kept, {} removed",
                    rest.kept,
                    rest.count - rest.kept
                )))
                .cell(rest.unkept.map_or(Cell::text("—"), |p| Cell::number(step_report::shown(p), p))),
        );
        let rows = stage
            .rows
            .iter()
            .map(|row| Row {
                class: Some(if row.logit.is_some() { "kept" } else { "removed" }.into()),
                header: row.id.to_string(),
                cells: row.cells(),
            })
            .collect::<Vec<_>>();
        let count = rows.len();
        view! {
            <details class="all-tokens">
                <summary>{format!("All {count} tokens, one row each")}</summary>
                {mirror_table("mirror", None, None, format!("Every token after {}", stage.label), HEADERS, body_rows(rows))}
            </details>
        }
    });
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
                headers=HEADERS
            />
            {whole}
        </figure>
    }
}
