//! The KV-cache memory panel: six shapes in, the chapter's formula written out with every
//! substitution, its independent check, and the presets compared as bars and as a table.
//! The arithmetic is [`crate::panels::kv_cache::view_model`]; the URL keys are listed there.

use leptos::prelude::*;
use policy::figure_short;
use report::Cell;

use crate::panels::kv_cache::view_model::{
    allocation_note, chart_rows, compute, grouped, ChartRow, KvForm, KvView, Preset,
};
use crate::panels::panel_head;
use crate::shell::url;
use crate::widgets::chart::{Bar, BarChart, Layout};
use crate::widgets::controls::hidden;
use crate::widgets::field::Field;
use crate::widgets::form::{problem_at, problems_of, Form, ProblemSummary};

const GIB: f64 = (1u64 << 30) as f64;

#[component]
pub fn KvPanel() -> impl IntoView {
    let pairs = url::pairs();
    // Every field is a number, so the URL itself has no problems: a bad value stays in its
    // field and the check reports it there.
    let (initial, _) = KvForm::from_pairs(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    let (presets, preset_message) = crate::panels::kv_cache::view_model::presets();
    let presets = StoredValue::new(presets);

    let (layers, set_layers) = signal(initial.layers);
    let (batch, set_batch) = signal(initial.batch);
    let (seq_len, set_seq_len) = signal(initial.seq_len);
    let (kv_heads, set_kv_heads) = signal(initial.kv_heads);
    let (head_dim, set_head_dim) = signal(initial.head_dim);
    let (bytes_per_value, set_bytes_per_value) = signal(initial.bytes_per_value);

    let form = Memo::new(move |_| KvForm {
        layers: layers.get(),
        batch: batch.get(),
        seq_len: seq_len.get(),
        kv_heads: kv_heads.get(),
        head_dim: head_dim.get(),
        bytes_per_value: bytes_per_value.get(),
    });
    Effect::new(move |_| url::write(&form.get().to_pairs()));
    let result = Memo::new(move |_| compute(&form.get()));
    let problems = problems_of(None, result);
    let problem = problem_at(problems);

    // The preset last chosen, so that two presets with the same shapes (Llama-3-8B and
    // Mistral-7B) stay told apart.
    let chosen = RwSignal::new(None::<&'static str>);
    // The preset whose shapes the form holds, if any: the chosen one first.
    let matching = Memo::new(move |_| {
        let f = form.get();
        let last = chosen.get();
        presets.with_value(|all| {
            let holds = |p: &&Preset| KvForm::from_preset(p) == f;
            all.iter()
                .filter(holds)
                .find(|p| Some(p.slug) == last)
                .or_else(|| all.iter().find(holds))
                .map(|p| p.slug)
        })
    });
    let apply = move |slug: String| {
        let Some(p) = presets.with_value(|all| all.iter().find(|p| p.slug == slug).cloned()) else {
            return;
        };
        chosen.set(Some(p.slug));
        let f = KvForm::from_preset(&p);
        set_layers.set(f.layers);
        set_batch.set(f.batch);
        set_seq_len.set(f.seq_len);
        set_kv_heads.set(f.kv_heads);
        set_head_dim.set(f.head_dim);
        set_bytes_per_value.set(f.bytes_per_value);
    };
    let options = presets.with_value(|all| {
        all.iter()
            .map(|p| {
                let slug = p.slug;
                let text = format!(
                    "{} ({}, {} layers, {} of {} heads hold KV)",
                    p.name,
                    p.attention().label(),
                    p.layers,
                    p.kv_heads,
                    p.heads
                );
                view! {
                    <option value=slug prop:selected=move || matching.get() == Some(slug)>{text}</option>
                }
            })
            .collect_view()
    });

    let notes = presets.with_value(|all| {
        all.iter()
            .filter_map(allocation_note)
            .map(|n| view! { <p class="kv-allocated">{n}</p> })
            .collect_view()
    });
    let preset_message = preset_message.map(|m| view! { <p class="error" role="alert">{m}</p> });

    let outcome = move || match result.get() {
        Ok(view) => view! { <KvResult view=view/> }.into_any(),
        Err(_) => view! { <p>"The formula is worked once every field reads."</p> }.into_any(),
    };

    let chart = move || {
        let (rows, at) = presets.with_value(|all| chart_rows(&form.get(), all));
        view! { <KvChart rows=rows at=at/> }
    };

    view! {
        <section class="panel" aria-labelledby="kv-cache-title">
            {panel_head("kv-cache", "KV-cache memory", "Every decoder layer keeps a key and a value vector per KV head for every cached token of every active sequence. Name each symbol with its unit, substitute, and check the result a second way.", None, None)}
            {preset_message}
            {notes}
            <ProblemSummary problems=problems/>
            <form class="controls" on:submit=|ev| ev.prevent_default()>
                <div class="field wide" hidden=hidden("kv-cache-preset", "Preset (fills every field)", None, None)>
                    <label for="kv-cache-preset">"Preset (fills every field)"</label>
                    <select id="kv-cache-preset" on:change=move |ev| apply(event_target_value(&ev))>
                        <option value="" prop:selected=move || matching.get().is_none()>"Custom shapes"</option>
                        {options}
                    </select>
                </div>
                <Field id="kv-cache-l" problem=problem("kv-cache-l") label="L: decoder layers (count)" hint="Layers that each keep their own cache." value=layers.into() set=set_layers inputmode="numeric"/>
                <Field id="kv-cache-b" problem=problem("kv-cache-b") label="B: active sequences (count)" hint="The batch: sequences cached at once." value=batch.into() set=set_batch inputmode="numeric"/>
                <Field id="kv-cache-s" problem=problem("kv-cache-s") label="S: cached tokens per sequence (tokens)" hint="Prompt plus generated tokens so far." value=seq_len.into() set=set_seq_len inputmode="numeric"/>
                <Field id="kv-cache-hkv" problem=problem("kv-cache-hkv") label="H_kv: KV heads (count)" hint="Equal to the query heads for MHA, fewer for GQA, 1 for MQA." value=kv_heads.into() set=set_kv_heads inputmode="numeric"/>
                <Field id="kv-cache-dh" problem=problem("kv-cache-dh") label="d_head: head dimension (values per head)" hint="Values in one key (or value) vector." value=head_dim.into() set=set_head_dim inputmode="numeric"/>
                <Field id="kv-cache-q" problem=problem("kv-cache-q") label="q: bytes per value (bytes)" hint="2 for fp16 or bf16, 4 for f32, 1 for int8." value=bytes_per_value.into() set=set_bytes_per_value inputmode="numeric"/>
            </form>
            // The one sentence said when the result changes; the derivation below is not live.
            <p class="chosen" aria-live="polite" data-value=move || result.with(|r| r.as_ref().ok().map(|v| v.bytes.to_string()))>
                // Words only (no element inside): a view of its own would cost the page's wasm
                // a kilobyte.
                {move || {
                    result.with(|r| {
                        r.as_ref().ok().map(|view| {
                            format!(
                                "KV cache: {} bytes = {} GiB.",
                                grouped(u128::from(view.bytes)),
                                figure_short(view.bytes as f64 / GIB)
                            )
                        })
                    })
                }}
            </p>
            <div class="result kv-result">{outcome}</div>
            {chart}
        </section>
    }
}

/// The derivation and its independent check.
#[component]
fn KvResult(view: KvView) -> impl IntoView {
    let lines = view
        .derivation
        .iter()
        .map(|line| view! { <li><code>{line.clone()}</code></li> })
        .collect_view();
    let agreement = if view.agrees {
        format!(
            "The two computations agree within a relative {:e}.",
            crate::panels::kv_cache::view_model::TOLERANCE
        )
    } else {
        "The two computations disagree: report this as a bug.".to_string()
    };
    view! {
        <ol class="kv-derivation" aria-label="Derivation">{lines}</ol>
        <p class="kv-check">{view.check}</p>
        <p class="kv-agrees" data-agrees=view.agrees.to_string()>{agreement}</p>
    }
}

/// The presets side by side at one B, S and q: bars and their table, from the same rows.
#[component]
fn KvChart(rows: Vec<ChartRow>, at: (u64, u64, u64)) -> impl IntoView {
    let (b, s, q) = at;
    let gib = |bytes: u64| figure_short(bytes as f64 / GIB);
    // A short sentence per model, so that the takeaway reads at grade 9 or below.
    let summary = format!(
        "The KV cache of {} models at B = {b}, S = {s} and q = {q}. {}",
        rows.len(),
        rows.iter()
            .map(|r| match r.bytes {
                Some(bytes) => format!("{} needs {} GiB.", r.name, gib(bytes)),
                None => format!("{} needs more than 2^64 bytes.", r.name),
            })
            .collect::<Vec<_>>()
            .join(" ")
    );
    let bars = rows
        .into_iter()
        .map(|r| {
            // Past u64 the bar runs the whole scale; the table says so in words.
            let (length, end, bytes, in_gib) = match r.bytes {
                Some(v) => (
                    v as f64,
                    format!("{} GiB", gib(v)),
                    Cell::number(grouped(u128::from(v)), v),
                    Cell::number(gib(v), v),
                ),
                None => (
                    f64::INFINITY,
                    "past u64".to_string(),
                    Cell::text("more than a u64"),
                    Cell::text("—"),
                ),
            };
            let per_token = match r.bytes_per_token {
                Some(v) => Cell::number(grouped(v), v),
                None => Cell::text("—"),
            };
            Bar::new(r.name, length)
                .tick(format!("{} ({})", short_name(r.name), r.attention.label()))
                .end_text(end)
                .cell(Cell::text(r.attention.label()))
                .cell(Cell::number(r.layers.to_string(), r.layers))
                .cell(Cell::number(r.heads.to_string(), r.heads))
                .cell(Cell::number(r.kv_heads.to_string(), r.kv_heads))
                .cell(Cell::number(r.head_dim.to_string(), r.head_dim))
                .cell(per_token)
                .cell(bytes)
                .cell(in_gib)
        })
        .collect();
    view! {
        <figure class="stage kv-chart">
            <figcaption>{format!("The presets at B = {b}, S = {s} tokens, q = {q} bytes")}</figcaption>
            <BarChart
                bars=bars
                layout=Layout::Rows { width: 480.0, row: 26.0, names: 190.0 }
                summary=summary
                caption=format!("KV-cache bytes per model at B = {b}, S = {s}, q = {q} (the B, S and q above when they are valid, else 1, 4096 and 2)")
                headers=&["Model", "Attention", "L", "Heads", "H_kv", "d_head", "Bytes per token", "Bytes", "GiB"]
                table_id="kv-cache-table"
            />
        </figure>
    }
}

/// The name without its parenthesis, to fit the chart's margin.
fn short_name(name: &str) -> &str {
    name.split(" (").next().unwrap_or(name)
}
