//! One stage's distribution drawn twice from the same rows: SVG bars for the eye and an
//! HTML table (always in the DOM) for screen readers and for checking the numbers.

use leptos::prelude::*;

use crate::panels::step::view_model::StageView;

const WIDTH: f64 = 320.0;
const HEIGHT: f64 = 160.0;
const AXIS: f64 = 18.0;

/// Probabilities are shown to this many decimals; the table cells carry full precision in
/// `data-value` so tests can compare exactly.
fn show(p: f64) -> String {
    format!("{p:.4}")
}

#[component]
pub fn Distribution(stage: StageView, index: usize) -> impl IntoView {
    let n = stage.rows.len().max(1) as f64;
    let slot = WIDTH / n;
    let bar = (slot * 0.7).max(1.0);
    let label_every = (stage.rows.len() / 16).max(1);
    let title = format!("After {}", stage.label);
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
        .iter()
        .enumerate()
        .map(|(i, row)| {
            let h = row.prob * (HEIGHT - AXIS);
            let x = i as f64 * slot + (slot - bar) / 2.0;
            let removed = row.logit.is_none();
            let label = (i % label_every == 0).then(|| {
                view! {
                    <text x=x + bar / 2.0 y=HEIGHT - 4.0 text-anchor="middle" class="axis-label">
                        {row.id.to_string()}
                    </text>
                }
            });
            view! {
                <rect
                    x=x
                    y=HEIGHT - AXIS - h
                    width=bar
                    height=h.max(if removed { 0.0 } else { 1.0 })
                    class=if removed { "bar removed" } else { "bar" }
                ></rect>
                {label}
            }
        })
        .collect_view();
    let rows = stage
        .rows
        .into_iter()
        .map(|row| {
            let (logit_text, status) = match row.logit {
                Some(l) => (format!("{l:.4}"), "kept"),
                None => ("—".to_string(), "removed"),
            };
            view! {
                <tr class=status>
                    <th scope="row">{row.id.to_string()}</th>
                    <td data-value=row.logit.map(|l| l.to_string()).unwrap_or_default()>{logit_text}</td>
                    <td data-value=row.prob.to_string()>{show(row.prob)}</td>
                    <td>{status}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <figure class="stage" data-stage=stage.label data-index=index>
            <figcaption>{title}</figcaption>
            <svg
                class="chart"
                viewBox=format!("0 0 {WIDTH} {HEIGHT}")
                role="img"
                aria-label=summary
            >
                <line x1="0" y1=HEIGHT - AXIS x2=WIDTH y2=HEIGHT - AXIS class="axis"></line>
                {bars}
            </svg>
            <table class="mirror">
                <caption>{caption}</caption>
                <thead>
                    <tr>
                        <th scope="col">"Token"</th>
                        <th scope="col">"Logit"</th>
                        <th scope="col">"Probability"</th>
                        <th scope="col">"Status"</th>
                    </tr>
                </thead>
                <tbody>{rows}</tbody>
            </table>
        </figure>
    }
}
