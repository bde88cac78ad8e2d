//! The GPU memory ledger panel: the chapter's training-memory budget, a row per transformer
//! block with its cumulative memory against the usable budget, drawn as bars and listed as a
//! table from the same rows. The arithmetic is [`crate::panels::memory::view_model`]; the URL keys are listed
//! there.

use leptos::prelude::*;
use report::Cell;

use crate::panels::memory::view_model::{compute, gb, LedgerForm, LedgerView, VERDICT};
use crate::panels::panel_head;
use crate::shell::url;
use crate::widgets::chart::{Bar, BarChart, Layout, Mark};
use crate::widgets::controls::hidden;
use crate::widgets::field::Field;
use crate::widgets::form::{problem_at, problems_of, Form};

#[component]
pub fn LedgerPanel() -> impl IntoView {
    let pairs = url::pairs();
    // Every field is a number, so the URL itself has no problems: a bad value stays in its
    // field and the check reports it there.
    let (initial, _) = LedgerForm::from_pairs(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())));
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
    Effect::new(move |_| url::write(&form.get().to_pairs()));
    let result = Memo::new(move |_| compute(&form.get()));
    let problems = problems_of(None, result);
    let problem = problem_at(problems);

    let reset = move |_| {
        let d = LedgerForm::default();
        set_fixed.set(d.fixed_gb);
        set_activations.set(d.activations_gb);
        set_device.set(d.device_gb);
        set_reserve.set(d.reserve_percent);
        set_microbatch.set(d.microbatch);
        set_blocks.set(d.blocks);
    };

    let summary = move || match result.get() {
        Ok(view) => {
            // The verdict is said in the live sentence above; the list works it out.
            let lines = view
                .lines
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != VERDICT)
                .map(|(_, l)| view! { <li>{l.clone()}</li> })
                .collect_view();
            let verdict = if view.fits { "fits" } else { "does-not-fit" };
            view! {
                <ul class="ledger-lines" data-fits=view.fits.to_string() data-verdict=verdict>
                    {lines}
                </ul>
            }
            .into_any()
        }
        Err(_) => view! { <p>"The budget is worked out once every field reads."</p> }.into_any(),
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
            {panel_head("memory", "GPU memory ledger", "Change the microbatch size and watch a simplified training-memory budget: weights, gradients and optimizer state are fixed; activations grow with every sample and accumulate block by block. A block is resident while everything up to it fits under the device less its reserve.", None, Some(problems))}
            <form class="controls" on:submit=|ev| ev.prevent_default()>
                <Field id="memory-mb" problem=problem("memory-mb") label="Microbatch (samples)" hint="Samples per step; activations scale with it." value=microbatch.into() set=set_microbatch inputmode="numeric"/>
                <Field id="memory-w" problem=problem("memory-w") label="Weights, gradients and optimizer (GB)" hint="Fixed whatever the microbatch. The chapter: 3.2 GB." value=fixed.into() set=set_fixed/>
                <Field id="memory-a" problem=problem("memory-a") label="Activations per sample (GB)" hint="Kept for the backward pass. The chapter: 0.34 GB." value=activations.into() set=set_activations/>
                <Field id="memory-dev" problem=problem("memory-dev") label="Device memory (GB)" hint="The chapter: a 24 GB device." value=device.into() set=set_device/>
                <Field id="memory-res" problem=problem("memory-res") label="Reserve (% of the device)" hint="Held back for the allocator and workspace. The chapter: 10 %." value=reserve.into() set=set_reserve/>
                <Field id="memory-n" problem=problem("memory-n") label="Transformer blocks (count)" hint="Activations are split evenly across them." value=blocks.into() set=set_blocks inputmode="numeric"/>
                <div class="field buttons" hidden=hidden("memory-reset", "Chapter's assumptions", None, None)>
                    <button type="button" class="secondary" on:click=reset>"Chapter's assumptions"</button>
                </div>
            </form>
            // The one sentence said when the result changes; the list below is not live.
            <p class="chosen ledger-verdict" aria-live="polite">
                {move || result.with(|r| r.as_ref().ok().and_then(|v| v.lines.get(VERDICT).cloned()))}
            </p>
            <div class="result">{summary}</div>
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
    // Some room above the taller of the last block and the device.
    let top = rows
        .last()
        .map_or(0.0, |r| r.cumulative_gb)
        .max(budget.device_gb)
        * 1.08;
    let summary = format!(
        "{} of {} blocks fit in the {} GB the device can use. With every block, the step needs {} GB.",
        rows.iter().filter(|r| r.resident).count(),
        rows.len(),
        gb(usable_gb),
        gb(rows.last().map_or(0.0, |r| r.cumulative_gb))
    );
    let bars = rows
        .into_iter()
        .map(|r| {
            let (class, row_class, status) = if r.resident {
                ("bar", "resident", "resident")
            } else {
                ("bar ledger-over", "over", "over budget")
            };
            Bar::new(format!("block {}", r.block), r.cumulative_gb)
                .tick(r.block.to_string())
                .on(budget.fixed_gb, "bar ledger-fixed")
                .class(class)
                .row_class(row_class)
                .cell(Cell::number(
                    format!("{} GB", gb(r.activations_gb)),
                    r.activations_gb,
                ))
                .cell(Cell::number(
                    format!("{} GB activations", gb(r.cumulative_activations_gb)),
                    r.cumulative_activations_gb,
                ))
                .cell(Cell::number(
                    format!("{} GB", gb(r.cumulative_gb)),
                    r.cumulative_gb,
                ))
                .cell(Cell::text(status))
        })
        .collect();
    let marks = vec![
        Mark {
            value: budget.device_gb,
            class: "ledger-device",
            label: format!("{} GB", gb(budget.device_gb)),
        },
        Mark {
            value: usable_gb,
            class: "ledger-budget",
            label: format!("{} GB", gb(usable_gb)),
        },
    ];
    let caption = format!(
        "The ledger, block by block. {} GB is fixed, and each block adds its activations. The device can use {} GB: {} GB less a {} % reserve. Microbatch {}.",
        gb(budget.fixed_gb),
        gb(usable_gb),
        gb(budget.device_gb),
        gb(budget.reserve_percent),
        budget.microbatch
    );
    view! {
        <figure class="stage ledger-chart">
            <figcaption>"Cumulative memory per block"</figcaption>
            {note.map(|n| view! { <p class="error">{n}</p> })}
            <BarChart
                bars=bars
                layout=Layout::Columns { width: 480.0, height: 220.0, marks }
                top=top
                summary=summary
                caption=caption
                headers=&["Item", "Activations in block", "Computed state", "Cumulative memory", "Interpretation"]
                table_id="memory-table"
            >
                <p class="ledger-legend chart-only">
                    <span class="swatch ledger-fixed"></span>" weights, gradients, optimizer "
                    <span class="swatch bar"></span>" activations so far "
                    <span class="swatch ledger-over"></span>" over budget; dashed: usable budget; solid: device"
                </p>
            </BarChart>
        </figure>
    }
}
