//! The GPU memory ledger panel: the chapter's training-memory budget, a row per transformer
//! block with its cumulative memory against the usable budget, drawn as bars and listed as a
//! table from the same rows. The arithmetic is [`crate::panels::memory::view_model`]; the URL keys are listed
//! there.

use leptos::prelude::*;

use crate::panels::memory::view_model::{compute, gb, BlockRow, LedgerForm, LedgerView};
use crate::shell::url;
use crate::widgets::field::Field;

const WIDTH: f64 = 480.0;
const HEIGHT: f64 = 220.0;
const LEFT: f64 = 56.0;
const AXIS: f64 = 20.0;
const TOP: f64 = 8.0;

#[component]
pub fn LedgerPanel() -> impl IntoView {
    let (initial, url_messages) = LedgerForm::from_pairs(&url::pairs());
    let (fixed, set_fixed) = signal(initial.fixed_gb);
    let (activations, set_activations) = signal(initial.activations_gb);
    let (device, set_device) = signal(initial.device_gb);
    let (reserve, set_reserve) = signal(initial.reserve_percent);
    let (microbatch, set_microbatch) = signal(initial.microbatch);
    let (blocks, set_blocks) = signal(initial.blocks);

    let form = Memo::new(move |_| LedgerForm {
        fixed_gb: fixed.get(),
        activations_gb: activations.get(),
        device_gb: device.get(),
        reserve_percent: reserve.get(),
        microbatch: microbatch.get(),
        blocks: blocks.get(),
    });
    Effect::new(move |_| url::write(&form.get().pairs()));
    let result = Memo::new(move |_| compute(&form.get()));

    let reset = move |_| {
        let d = LedgerForm::default();
        set_fixed.set(d.fixed_gb);
        set_activations.set(d.activations_gb);
        set_device.set(d.device_gb);
        set_reserve.set(d.reserve_percent);
        set_microbatch.set(d.microbatch);
        set_blocks.set(d.blocks);
    };

    let messages = url_messages
        .into_iter()
        .map(|m| view! { <p class="error" role="alert">{m}</p> })
        .collect_view();

    let summary = move || match result.get() {
        Ok(view) => {
            let lines = view
                .lines
                .iter()
                .map(|l| view! { <li>{l.clone()}</li> })
                .collect_view();
            let verdict = if view.fits { "fits" } else { "does-not-fit" };
            view! {
                <ul class="ledger-lines" data-fits=view.fits.to_string() data-verdict=verdict>
                    {lines}
                </ul>
            }
            .into_any()
        }
        Err(errors) => errors
            .into_iter()
            .map(|e| view! { <p class="error" role="alert">{e}</p> })
            .collect_view()
            .into_any(),
    };
    // The chart and table stay in the DOM; with bad input they show the chapter's defaults.
    let chart = move || {
        let (view, note) = match result.get() {
            Ok(v) => (v, None),
            Err(_) => (
                compute(&LedgerForm::default()).ok()?,
                Some("The fields above have a problem, so this shows the chapter's assumptions."),
            ),
        };
        Some(view! { <LedgerChart view=view note=note/> })
    };

    view! {
        <section class="panel" aria-labelledby="memory-title">
            <h2 id="memory-title">"GPU memory ledger"</h2>
            <p>
                "Change the microbatch size and watch a simplified training-memory budget: weights, gradients and optimizer state are fixed; activations grow with every sample and accumulate block by block. A block is resident while everything up to it fits under the device less its reserve."
            </p>
            {messages}
            <form class="controls" on:submit=|ev| ev.prevent_default()>
                <Field id="memory-mb" label="Microbatch (samples)" hint="Samples per step; activations scale with it." value=microbatch.into() set=set_microbatch inputmode="numeric"/>
                <Field id="memory-w" label="Weights, gradients and optimizer (GB)" hint="Fixed whatever the microbatch. The chapter: 3.2 GB." value=fixed.into() set=set_fixed/>
                <Field id="memory-a" label="Activations per sample (GB)" hint="Kept for the backward pass. The chapter: 0.34 GB." value=activations.into() set=set_activations/>
                <Field id="memory-dev" label="Device memory (GB)" hint="The chapter: a 24 GB device." value=device.into() set=set_device/>
                <Field id="memory-res" label="Reserve (% of the device)" hint="Held back for the allocator and workspace. The chapter: 10 %." value=reserve.into() set=set_reserve/>
                <Field id="memory-n" label="Transformer blocks (count)" hint="Activations are split evenly across them." value=blocks.into() set=set_blocks inputmode="numeric"/>
                <div class="field buttons">
                    <button type="button" class="secondary" on:click=reset>"Chapter's assumptions"</button>
                </div>
            </form>
            <div class="result" aria-live="polite">{summary}</div>
            {chart}
        </section>
    }
}

/// Cumulative memory per block against the usable budget and the device, as stacked bars
/// (fixed part, activations so far) and as a table, from the same rows.
#[component]
fn LedgerChart(view: LedgerView, note: Option<&'static str>) -> impl IntoView {
    let LedgerView {
        budget,
        usable_gb,
        rows,
        ..
    } = view;
    let top = rows
        .last()
        .map_or(0.0, |r| r.cumulative_gb)
        .max(budget.device_gb)
        * 1.08;
    let plot = HEIGHT - AXIS - TOP;
    let y = move |v: f64| HEIGHT - AXIS - v / top * plot;
    let n = rows.len().max(1) as f64;
    let slot = (WIDTH - LEFT) / n;
    let bar = (slot * 0.7).max(1.0);
    let label_every = (rows.len() / 20).max(1);
    let aria = format!(
        "Cumulative memory over {} blocks against a usable budget of {} GB: {} of them resident; the last needs {} GB.",
        rows.len(),
        gb(usable_gb),
        rows.iter().filter(|r| r.resident).count(),
        gb(rows.last().map_or(0.0, |r| r.cumulative_gb))
    );
    let bars = rows
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let x = LEFT + i as f64 * slot + (slot - bar) / 2.0;
            let fixed_top = y(budget.fixed_gb);
            let label = ((i % label_every) == 0).then(|| {
                view! {
                    <text x=x + bar / 2.0 y=HEIGHT - 5.0 text-anchor="middle" class="axis-label">
                        {r.block.to_string()}
                    </text>
                }
            });
            view! {
                <rect x=x y=fixed_top width=bar height=HEIGHT - AXIS - fixed_top class="bar ledger-fixed"></rect>
                <rect
                    x=x
                    y=y(r.cumulative_gb)
                    width=bar
                    height=(fixed_top - y(r.cumulative_gb)).max(0.0)
                    class=if r.resident { "bar" } else { "bar ledger-over" }
                ></rect>
                {label}
            }
        })
        .collect_view();
    let line = move |v: f64, class: &'static str, text: String| {
        view! {
            <line x1=LEFT y1=y(v) x2=WIDTH y2=y(v) class=class></line>
            <text x=LEFT - 4.0 y=y(v) + 3.0 text-anchor="end" class="axis-label">{text}</text>
        }
    };
    let table_rows = rows
        .into_iter()
        .map(|r: BlockRow| {
            let status = if r.resident { "resident" } else { "over budget" };
            view! {
                <tr class=if r.resident { "resident" } else { "over" }>
                    <th scope="row">{format!("block {}", r.block)}</th>
                    <td data-value=r.activations_gb.to_string()>{format!("{} GB", gb(r.activations_gb))}</td>
                    <td data-value=r.cumulative_activations_gb.to_string()>{format!("{} GB activations", gb(r.cumulative_activations_gb))}</td>
                    <td data-value=r.cumulative_gb.to_string()>{format!("{} GB", gb(r.cumulative_gb))}</td>
                    <td>{status}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <figure class="stage ledger-chart">
            <figcaption>"Cumulative memory per block"</figcaption>
            {note.map(|n| view! { <p class="error">{n}</p> })}
            <svg class="chart" viewBox=format!("0 0 {WIDTH} {HEIGHT}") role="img" aria-label=aria>
                <line x1=LEFT y1=HEIGHT - AXIS x2=WIDTH y2=HEIGHT - AXIS class="axis"></line>
                {bars}
                {line(budget.device_gb, "ledger-device", format!("{} GB", gb(budget.device_gb)))}
                {line(usable_gb, "ledger-budget", format!("{} GB", gb(usable_gb)))}
            </svg>
            <p class="ledger-legend chart-only">
                <span class="swatch ledger-fixed"></span>" weights, gradients, optimizer "
                <span class="swatch bar"></span>" activations so far "
                <span class="swatch ledger-over"></span>" over budget; dashed: usable budget; solid: device"
            </p>
            <table class="mirror" id="memory-table">
                <caption>
                    {format!(
                        "The ledger: {} GB fixed plus activations per block, against a usable budget of {} GB ({} GB device less {} % reserve), microbatch {}",
                        gb(budget.fixed_gb),
                        gb(usable_gb),
                        gb(budget.device_gb),
                        gb(budget.reserve_percent),
                        budget.microbatch
                    )}
                </caption>
                <thead>
                    <tr>
                        <th scope="col">"Item"</th>
                        <th scope="col">"Activations in block"</th>
                        <th scope="col">"Computed state"</th>
                        <th scope="col">"Cumulative memory"</th>
                        <th scope="col">"Interpretation"</th>
                    </tr>
                </thead>
                <tbody>{table_rows}</tbody>
            </table>
        </figure>
    }
}
