//! A run's latency per token drawn twice from the same rows: SVG bars (the first bar is the
//! prefill, i.e. the time to first token) and an HTML table that is always in the DOM.

use leptos::prelude::*;
use policy::generate::StepRecord;

const WIDTH: f64 = 480.0;
const HEIGHT: f64 = 140.0;
const AXIS: f64 = 16.0;
/// Room above the tallest bar for its label.
const TOP: f64 = 14.0;

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
    let scale = if highest > 0.0 {
        (HEIGHT - AXIS - TOP) / highest
    } else {
        0.0
    };
    let slot = WIDTH / rows.len().max(1) as f64;
    let bar = (slot * 0.8).max(1.0);
    let decode: Vec<f64> = rows.iter().skip(1).map(LatencyRow::total_ms).collect();
    let mean_decode =
        (!decode.is_empty()).then(|| decode.iter().sum::<f64>() / decode.len() as f64);
    let summary = match (rows.first(), mean_decode) {
        (Some(first), Some(mean)) => format!(
            "Latency per token: the first token (prefill) took {:.1} ms, later tokens {:.2} ms on average.",
            first.total_ms(),
            mean
        ),
        (Some(first), None) => format!("The only token took {:.1} ms.", first.total_ms()),
        _ => "No tokens yet.".to_string(),
    };
    let bars = rows
        .iter()
        .enumerate()
        .map(|(i, row)| {
            let h = row.total_ms() * scale;
            let x = i as f64 * slot + (slot - bar) / 2.0;
            view! {
                <rect
                    x=x
                    y=HEIGHT - AXIS - h
                    width=bar
                    height=h.max(1.0)
                    class=if i == 0 { "bar prefill" } else { "bar" }
                ></rect>
            }
        })
        .collect_view();
    let table_rows = rows
        .iter()
        .map(|row| {
            view! {
                <tr>
                    <th scope="row">{if row.step == 0 { "0 (prefill)".to_string() } else { row.step.to_string() }}</th>
                    <td data-value=row.model_ms.to_string()>{format!("{:.3}", row.model_ms)}</td>
                    <td data-value=row.policy_ms.to_string()>{format!("{:.3}", row.policy_ms)}</td>
                    <td data-value=row.total_ms().to_string()>{format!("{:.3}", row.total_ms())}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <figure class="latency" data-testid="latency">
            <figcaption>{summary.clone()}</figcaption>
            <svg class="chart" viewBox=format!("0 0 {WIDTH} {HEIGHT}") role="img" aria-label=summary>
                <line x1="0" y1=HEIGHT - AXIS x2=WIDTH y2=HEIGHT - AXIS class="axis"></line>
                <text x="2" y=HEIGHT - 3.0 class="axis-label">"step 0 (prefill)"</text>
                <text x=WIDTH - 2.0 y=HEIGHT - 3.0 text-anchor="end" class="axis-label">
                    {format!("step {}", rows.len().saturating_sub(1))}
                </text>
                <text x=WIDTH - 2.0 y="10" text-anchor="end" class="axis-label">
                    {format!("tallest bar: {highest:.1} ms")}
                </text>
                {bars}
            </svg>
            <table class="mirror">
                <caption>"Latency of each token, in milliseconds: the model's forward pass, the policy step, and both"</caption>
                <thead>
                    <tr>
                        <th scope="col">"Step"</th>
                        <th scope="col">"Model (ms)"</th>
                        <th scope="col">"Policy (ms)"</th>
                        <th scope="col">"Total (ms)"</th>
                    </tr>
                </thead>
                <tbody>{table_rows}</tbody>
            </table>
        </figure>
    }
}
