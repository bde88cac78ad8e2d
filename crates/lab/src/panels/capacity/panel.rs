//! The capacity planner's panel: presets, trace, serving policies, SLOs and quality floors
//! in; on "Plan", the sweep as a throughput-against-p99-TTFT chart with its table mirror,
//! the release decision in words, the report's four parts and its downloads. The fields are
//! checked as they change, each problem marked at its field and listed above the results.
//! The logic and the URL keys are in [`crate::panels::capacity::view_model`]. The plan runs
//! on the page's thread, after a frame has painted "Planning…" (a requestAnimationFrame,
//! then a timeout), and the status line reports the browser's own time for it.

use std::sync::Arc;
use std::time::Duration;

use capacity::NamedPolicy;
use leptos::prelude::*;

use crate::panels::capacity::view_model::{
    bottleneck_rows, contract_rows, decision_words, figure, hardware_options, known_good,
    model_options, percent, plan, report_file, seconds, trace_options, weight_options,
    CapacityForm, PlanView, SweepPoint, BATCHINGS, PLAN_ID,
};
use crate::shell::url;
use crate::shell::web::{download, now_ms};
use crate::widgets::chart::mirror_table;
use crate::widgets::controls::hidden;
use crate::widgets::field::{chosen, Choice, Field};
use crate::widgets::form::{problem_at, problem_id, Form, ProblemSummary, Problems};

/// What the last press of Plan gave, with the form it planned: the plan's own problems
/// hold only while the form is that one.
type Outcome = (CapacityForm, Result<Arc<PlanView>, Problems>);

#[component]
pub fn CapacityPanel() -> impl IntoView {
    let pairs = url::pairs();
    let (initial, url_problems) =
        CapacityForm::from_pairs(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    // The URL's problems with a select or the batching boxes stay until the learner
    // changes that field.
    let url_problems = RwSignal::new(url_problems);

    let (hardware, set_hardware) = signal(initial.hardware);
    let (model, set_model) = signal(initial.model);
    let (weights, set_weights) = signal(initial.weights);
    let (trace, set_trace) = signal(initial.trace);
    let (requests, set_requests) = signal(initial.requests);
    let (rate, set_rate) = signal(initial.rate);
    let (batchings, set_batchings) = signal(initial.batchings);
    let (chunk_budget, set_chunk_budget) = signal(initial.chunk_budget);
    let (max_sequences, set_max_sequences) = signal(initial.max_sequences);
    let (loads, set_loads) = signal(initial.loads);
    let (ttft_ms, set_ttft_ms) = signal(initial.ttft_ms);
    let (tpot_ms, set_tpot_ms) = signal(initial.tpot_ms);
    let (floor_pct, set_floor_pct) = signal(initial.floor_pct);

    let form = Memo::new(move |_| CapacityForm {
        hardware: hardware.get(),
        model: model.get(),
        weights: weights.get(),
        trace: trace.get(),
        requests: requests.get(),
        rate: rate.get(),
        batchings: batchings.get(),
        chunk_budget: chunk_budget.get(),
        max_sequences: max_sequences.get(),
        loads: loads.get(),
        ttft_ms: ttft_ms.get(),
        tpot_ms: tpot_ms.get(),
        floor_pct: floor_pct.get(),
    });
    // The fields in the URL whenever they change (not on creation: opening the panel
    // should not add a history entry).
    Effect::new(move |written: Option<()>| {
        let query = form.get().to_pairs();
        if written.is_some() {
            url::write(&query);
        }
    });

    // The check is cheap, so the fields are checked as they change; the plan runs on Plan.
    let checked = Memo::new(move |_| form.get().check().err());
    let outcome = RwSignal::new(None::<Outcome>);
    let problems = Signal::derive(move || {
        let mut all = url_problems.get();
        if let Some(found) = checked.get() {
            all.extend(found);
        }
        outcome.with(|o| {
            if let Some((planned, Err(found))) = o {
                if form.with(|f| f == planned) {
                    all.extend(found.clone());
                }
            }
        });
        all
    });
    let problem = problem_at(problems);

    let planning = RwSignal::new(false);
    let status = RwSignal::new(String::new());
    let use_known_good = RwSignal::new(false);
    // The last configuration this session released: the "last known-good" when asked for.
    let last_released = StoredValue::new(None::<NamedPolicy>);

    let run = move || {
        planning.set(false);
        if checked.with_untracked(Option::is_some) {
            status.set("The plan did not run; the fields listed above need a change.".into());
            outcome.set(None);
            return;
        }
        let known = if use_known_good.get_untracked() {
            last_released.get_value()
        } else {
            None
        };
        let planned = form.get_untracked();
        let start = now_ms();
        let result = plan(&planned, known);
        let took = now_ms() - start;
        match &result {
            Ok(view) => {
                if let Some(released) = known_good(&view.report) {
                    last_released.set_value(Some(released));
                }
                status.set(format!(
                    "Planned {} configurations in {took:.0} ms. {}",
                    view.points.len(),
                    decision_words(&view.report).0
                ));
            }
            Err(_) => status.set("The plan did not run; the reason is listed above.".into()),
        }
        outcome.set(Some((planned, result.map(Arc::new))));
    };
    let start = move |_| {
        if planning.get_untracked() {
            return;
        }
        planning.set(true);
        status.set("Planning…".into());
        // A frame, then a task: the plan runs after the browser has painted "Planning…".
        request_animation_frame(move || set_timeout(run, Duration::ZERO));
    };

    // A select holds only the names it offers; a URL's other name is its problem.
    let select = move |id: &'static str,
                       label: &'static str,
                       value: ReadSignal<String>,
                       set: WriteSignal<String>,
                       options: Vec<(String, String)>| {
        view! { <Choice id=id label=label options=options value=value problem=problem(id) set=chosen(id, url_problems, set)/> }
    };
    let batchings_problem = problem("cap-batchings");
    let checkboxes = BATCHINGS
        .iter()
        .map(|&(name, label)| {
            let id = format!("cap-batching-{name}");
            view! {
                <div class="cap-choice">
                    <input
                        type="checkbox"
                        id=id.clone()
                        aria-invalid=move || batchings_problem.get().map(|_| "true")
                        aria-describedby=move || batchings_problem.get().map(|_| problem_id("cap-batchings"))
                        prop:checked=move || form.with(|f| f.has_batching(name))
                        on:change=move |ev| {
                            let on = event_target_checked(&ev);
                            url_problems.update(|p| *p = p.without("cap-batchings"));
                            set_batchings.set(form.with_untracked(|f| f.with_batching(name, on)));
                        }
                    />
                    <label for=id>{label}</label>
                </div>
            }
        })
        .collect_view();

    let result = move || {
        match outcome.get().map(|(_, result)| result) {
        None => view! {
            <p class="cap-idle">"Choose the settings and press Plan; the sweep and the decision appear here."</p>
        }
        .into_any(),
        Some(Ok(view)) => view! { <CapacityResult view=view/> }.into_any(),
        Some(Err(_)) => view! {
            <p>"The plan did not run; the reason is listed above, at the field it comes from."</p>
        }
        .into_any(),
    }
    };

    view! {
        <section class="panel capacity" aria-labelledby="capacity-title">
            <h2 id="capacity-title">"Capacity plan"</h2>
            <p>
                "Simulate serving a trace on an accelerator under each batching policy, batch limit and weight path, at several multiples of the trace's load; gate every point on the latency SLOs and the per-slice quality floors; release the configuration with the highest goodput that passes, or degrade to the named baseline and say which gate failed."
            </p>
            <ProblemSummary problems=problems/>
            <form class="controls" on:submit=|ev| ev.prevent_default()>
                {select("cap-hw", "Hardware", hardware, set_hardware, hardware_options())}
                {select("cap-model", "Model", model, set_model, model_options())}
                {select("cap-weights", "Weight paths to sweep", weights, set_weights, weight_options())}
                {select("cap-trace", "Trace (arrival process)", trace, set_trace, trace_options())}
                <Field id="cap-n" problem=problem("cap-n") label="Requests in the trace" hint="At most 20,000; the page simulates every configuration on them." value=requests.into() set=set_requests inputmode="numeric"/>
                <Field id="cap-rate" problem=problem("cap-rate") label="Arrival rate (requests/s)" hint="The trace's mean rate; the sweep multiplies it by each load scale." value=rate.into() set=set_rate/>
                <div class="field" hidden=hidden("cap-batchings", "Batching policies to sweep", Some(batchings.into()), Some(batchings_problem))>
                    <fieldset class="cap-batchings" id="cap-batchings">
                        <legend>"Batching policies to sweep"</legend>
                        {checkboxes}
                        {move || batchings_problem.get().map(|m| view! { <small id=problem_id("cap-batchings") class="field-problem error">{m}</small> })}
                    </fieldset>
                </div>
                <Field id="cap-chunk" problem=problem("cap-chunk") label="Chunked prefill: tokens per iteration" hint="Decodes first, then prompt chunks up to this budget." value=chunk_budget.into() set=set_chunk_budget inputmode="numeric"/>
                <Field id="cap-seqs" problem=problem("cap-seqs") label="Batch limits (sequences, comma-separated)" hint="Most sequences running at once, e.g. 1, 4, 16, 64." value=max_sequences.into() set=set_max_sequences/>
                <Field id="cap-loads" problem=problem("cap-loads") label="Load scales (comma-separated)" hint="Multiples of the arrival rate offered to one replica." value=loads.into() set=set_loads/>
                <Field id="cap-ttft" problem=problem("cap-ttft") label="SLO: p99 time to first token (ms)" hint="Held on all traffic and on every slice." value=ttft_ms.into() set=set_ttft_ms/>
                <Field id="cap-tpot" problem=problem("cap-tpot") label="SLO: p99 time per output token (ms)" hint="Held on all traffic and on every slice." value=tpot_ms.into() set=set_tpot_ms/>
                <Field id="cap-floor" problem=problem("cap-floor") label="Quality floor (% above full-precision bits per byte)" hint="Per slice, the rare Basque slice included; measured on the tiny model." value=floor_pct.into() set=set_floor_pct/>
                <div class="field cap-choice" hidden=hidden("cap-known-good", "Degrade to the last released configuration", None, None)>
                    <input
                        type="checkbox"
                        id="cap-known-good"
                        prop:checked=move || use_known_good.get()
                        on:change=move |ev| use_known_good.set(event_target_checked(&ev))
                    />
                    <label for="cap-known-good">"Degrade to this session's last released configuration before the baseline"</label>
                </div>
                <div class="field buttons">
                    <button type="button" id=PLAN_ID on:click=start prop:disabled=move || planning.get()>
                        "Plan"
                    </button>
                </div>
            </form>
            <p class="progress" role="status" aria-live="polite">{move || status.get()}</p>
            <div class="result cap-result">{result}</div>
        </section>
    }
}

/// A plan's decision, sweep and report.
#[component]
fn CapacityResult(view: Arc<PlanView>) -> impl IntoView {
    let report = &view.report;
    let (verdict, reason, failed) = decision_words(report);
    let kind = view.kind;
    let failed = (!failed.is_empty()).then(|| {
        let items = failed
            .into_iter()
            .map(|g| view! { <li>{g}</li> })
            .collect_view();
        view! {
            <p>"Failed gates of the best candidate, with how far each is over:"</p>
            <ul class="cap-failed">{items}</ul>
        }
    });

    let download_error = RwSignal::new(None::<String>);
    let save = {
        let view = view.clone();
        move |markdown: bool| {
            let (name, mime, text) = report_file(&view.report, markdown);
            download_error.set(download(&name, mime, &text).err());
        }
    };
    let save_json = save.clone();

    view! {
        <div class="cap-decision" data-kind=kind>
            <h3>"Release decision"</h3>
            <p class="chosen"><strong>{verdict}</strong></p>
            <p>{reason}</p>
            {failed}
            <p class="field buttons">
                <button type="button" class="secondary" id="cap-download-md" on:click=move |_| save(true)>
                    "Download report (Markdown)"
                </button>
                <button type="button" class="secondary" id="cap-download-json" on:click=move |_| save_json(false)>
                    "Download report (JSON)"
                </button>
            </p>
            {move || download_error.get().map(|e| view! { <p class="error" role="alert">{e}</p> })}
        </div>
        <SweepChart view=view.clone()/>
        <ReportParts view=view/>
    }
}

/// The sweep: tokens/s against p99 TTFT with the SLO line, and the table from the same rows.
#[component]
fn SweepChart(view: Arc<PlanView>) -> impl IntoView {
    let f = &view.frame;
    let slo = view.report.contract.slo;
    let (x0, x1) = (f.left, f.width - f.right);
    let (y0, y1) = (f.top, f.height - f.bottom);
    let passing = view.points.iter().filter(|p| p.row.passes_gates).count();
    let summary = format!(
        "Scatter of output tokens per second against p99 time to first token for {} configurations; {passing} pass every gate; the TTFT SLO is {}.",
        view.points.len(),
        seconds(slo.ttft_p99_s)
    );
    let x_ticks = f
        .x_ticks
        .iter()
        .map(|(x, label)| {
            view! {
                <line x1=*x y1=y1 x2=*x y2=y1 + 4.0 class="axis"></line>
                <text x=*x y=y1 + 15.0 text-anchor="middle" class="axis-label">{label.clone()}</text>
            }
        })
        .collect_view();
    let y_ticks = f
        .y_ticks
        .iter()
        .map(|(y, label)| {
            view! {
                <line x1=x0 - 4.0 y1=*y x2=x0 y2=*y class="axis"></line>
                <text x=x0 - 6.0 y=*y + 3.0 text-anchor="end" class="axis-label">{label.clone()}</text>
            }
        })
        .collect_view();
    let curve: String = view
        .curve
        .iter()
        .map(|(x, y)| format!("{x:.2},{y:.2}"))
        .collect::<Vec<_>>()
        .join(" ");
    let marks = view
        .points
        .iter()
        .filter_map(|p| {
            let (x, y) = p.at?;
            let title = format!(
                "{}: {} tokens/s, p99 TTFT {}; {}",
                p.row.label,
                figure(p.row.output_tokens_per_s),
                seconds(p.row.ttft_p99_s),
                p.gates
            );
            let mark = if p.row.passes_gates {
                view! { <circle cx=x cy=y r="3.5" class="cap-pass"><title>{title}</title></circle> }
                    .into_any()
            } else {
                let d = format!(
                    "M{} {} L{} {} M{} {} L{} {}",
                    x - 3.0,
                    y - 3.0,
                    x + 3.0,
                    y + 3.0,
                    x - 3.0,
                    y + 3.0,
                    x + 3.0,
                    y - 3.0
                );
                view! { <path d=d class="cap-fail"><title>{title}</title></path> }.into_any()
            };
            let ring = p
                .chosen
                .then(|| view! { <circle cx=x cy=y r="8" class="cap-chosen"></circle> });
            Some(view! { {mark}{ring} })
        })
        .collect_view();
    let rows = view.points.iter().map(table_row).collect_view();
    view! {
        <figure class="stage cap-sweep">
            <figcaption>"The sweep: output tokens/s against p99 time to first token (log scale)"</figcaption>
            <svg class="chart" viewBox=format!("0 0 {} {}", f.width, f.height) role="img" aria-label=summary>
                <line x1=x0 y1=y1 x2=x1 y2=y1 class="axis"></line>
                <line x1=x0 y1=y0 x2=x0 y2=y1 class="axis"></line>
                {x_ticks}
                {y_ticks}
                <text x=(x0 + x1) / 2.0 y=f.height - 6.0 text-anchor="middle" class="axis-label">"p99 time to first token"</text>
                <text x="10" y=(y0 + y1) / 2.0 text-anchor="middle" class="axis-label" transform=format!("rotate(-90 10 {})", (y0 + y1) / 2.0)>"output tokens/s"</text>
                <line x1=f.slo_x y1=y0 x2=f.slo_x y2=y1 class="cap-slo"></line>
                <text x=f.slo_x + 4.0 y=y0 + 10.0 class="axis-label">{format!("TTFT SLO {}", seconds(slo.ttft_p99_s))}</text>
                <polyline points=curve class="cap-curve"></polyline>
                {marks}
            </svg>
            <p class="cap-legend chart-only">
                "● passes every gate; × fails a gate; ring: the released configuration, its line: the same configuration at each load; dashed: the TTFT SLO."
            </p>
            {mirror_table("mirror", Some("cap-sweep-table"), None, format!("Every configuration of the sweep ({} rows; {passing} pass every gate): the chart's points", view.points.len()), &["Configuration", "Policy", "Batch limit", "Weights", "Load", "Offered (requests/s)", "Tokens/s", "p99 TTFT (ms)", "p99 time per token (ms)", "Goodput (requests/s)", "Cost per M tokens", "Gates"], rows)}
        </figure>
    }
}

fn table_row(p: &SweepPoint) -> impl IntoView {
    let r = &p.row;
    let number = |x: f64, scale: f64| {
        let shown = if r.error.is_some() {
            "—".to_string()
        } else {
            figure(x * scale)
        };
        view! { <td data-value=x.to_string()>{shown}</td> }
    };
    let class = match (p.chosen, r.passes_gates) {
        (true, _) => "cap-chosen-row",
        (false, true) => "cap-pass-row",
        (false, false) => "cap-fail-row",
    };
    let name = if p.chosen {
        format!("{} (released)", r.label)
    } else {
        r.label.clone()
    };
    view! {
        <tr class=class data-passes=r.passes_gates.to_string()>
            <th scope="row">{name}</th>
            <td>{r.batching.clone()}</td>
            <td data-value=r.max_sequences.to_string()>{r.max_sequences.to_string()}</td>
            <td>{r.weights.clone()}</td>
            <td data-value=r.load_scale.to_string()>{format!("{}x", r.load_scale)}</td>
            {number(r.offered_rate_per_s, 1.0)}
            {number(r.output_tokens_per_s, 1.0)}
            {number(r.ttft_p99_s, 1e3)}
            {number(r.tpot_p99_s, 1e3)}
            {number(r.goodput_per_s, 1.0)}
            {number(r.cost_per_million_output_tokens, 1.0)}
            <td class="cap-gates">{p.gates.clone()}</td>
        </tr>
    }
}

/// The chapter's four parts: contract, profiler and bottlenecks, quality gates, capacity
/// and cost.
#[component]
fn ReportParts(view: Arc<PlanView>) -> impl IntoView {
    let report = &view.report;
    let chosen = &report.chosen;
    let m = &chosen.metrics;
    let contract = contract_rows(report)
        .into_iter()
        .map(|(k, v)| view! { <tr><th scope="row">{k}</th><td>{v}</td></tr> })
        .collect_view();
    let ms_cell = |x: f64| view! { <td data-value=x.to_string()>{figure(x * 1e3)}</td> };
    let latency = std::iter::once(&m.all)
        .chain(&m.by_slice)
        .map(|s| {
            view! {
                <tr>
                    <th scope="row">{s.slice.clone()}</th>
                    <td data-value=s.requests.to_string()>{s.requests.to_string()}</td>
                    {ms_cell(s.ttft.p50)}
                    {ms_cell(s.ttft.p99)}
                    {ms_cell(s.tpot.p50)}
                    {ms_cell(s.tpot.p99)}
                    {ms_cell(s.e2e.p99)}
                    <td data-value=s.goodput_per_s.to_string()>{figure(s.goodput_per_s)}</td>
                    <td data-value=s.slo_attainment.to_string()>{percent(s.slo_attainment)}</td>
                </tr>
            }
        })
        .collect_view();
    let shares = bottleneck_rows(report)
        .into_iter()
        .map(|(what, share)| {
            view! { <tr><th scope="row">{what}</th><td data-value=share.to_string()>{percent(share)}</td></tr> }
        })
        .collect_view();
    let b = &m.bottleneck;
    let kv = &m.kv;
    let bottleneck = format!(
        "Bottleneck: {}. {} iterations of {} tokens on average, {} preemptions; KV cache of {} blocks of {} tokens, peak use {} blocks, minimum headroom {}.",
        b.dominant,
        b.iterations,
        figure(b.mean_tokens_per_iteration),
        b.preemptions,
        kv.blocks,
        kv.block_size,
        kv.peak_used_blocks,
        percent(kv.min_headroom)
    );
    let quality = report
        .quality
        .iter()
        .map(|q| {
            view! {
                <tr class=if q.passed { "" } else { "over" }>
                    <th scope="row">{format!("{} ({})", q.slice, q.name)}</th>
                    <td>{q.weights.clone()}</td>
                    <td data-value=q.bits_per_byte.to_string()>{format!("{:.5}", q.bits_per_byte)}</td>
                    <td data-value=q.max_bits_per_byte.to_string()>{format!("{:.5}", q.max_bits_per_byte)}</td>
                    <td>{if q.passed { "pass" } else { "fail" }}</td>
                </tr>
            }
        })
        .collect_view();
    let gates = chosen
        .gates
        .iter()
        .map(|g| {
            let verdict = if g.passed { "pass: " } else { "fail: " };
            view! { <li>{verdict}{g.to_string()}</li> }
        })
        .collect_view();
    let d = &report.decision;
    let cost_rows = [
        ("configuration", d.policy.label(), String::new()),
        (
            "sustained load per replica (requests/s)",
            figure(d.sustained_rate_per_s),
            d.sustained_rate_per_s.to_string(),
        ),
        (
            "load scale per replica",
            format!("{}x", d.load_scale),
            d.load_scale.to_string(),
        ),
        (
            "replicas for the trace",
            d.replicas.to_string(),
            d.replicas.to_string(),
        ),
        (
            "cost per hour",
            figure(d.cost_per_hour),
            d.cost_per_hour.to_string(),
        ),
        (
            "cost per million output tokens",
            figure(m.cost_per_million_output_tokens),
            m.cost_per_million_output_tokens.to_string(),
        ),
        (
            "output tokens/s",
            figure(m.output_tokens_per_s),
            m.output_tokens_per_s.to_string(),
        ),
    ]
    .into_iter()
    .map(|(k, text, value)| view! { <tr><th scope="row">{k}</th><td data-value=value>{text}</td></tr> })
    .collect_view();
    let max_throughput = d.max_throughput.as_ref().map(|t| {
        let verdict = if t.passes_gates {
            "it passes every gate.".to_string()
        } else {
            format!("it fails: {}.", t.failed_gates)
        };
        view! {
            <p>
                {format!(
                    "Maximising tokens/s alone would pick {} ({} tokens/s, p99 TTFT {}, goodput {} requests/s): {verdict}",
                    t.label,
                    figure(t.output_tokens_per_s),
                    seconds(t.ttft_p99_s),
                    figure(t.goodput_per_s)
                )}
            </p>
        }
    });
    view! {
        <section class="cap-part" aria-labelledby="cap-contract-title">
            <h3 id="cap-contract-title">"1. Benchmark contract"</h3>
            {mirror_table("mirror cap-keyed", Some("cap-contract-table"), None, "What was simulated, under which assumptions", &["Input", "Value"], contract)}
        </section>
        <section class="cap-part" aria-labelledby="cap-profile-title">
            <h3 id="cap-profile-title">{format!("2. Profiler and bottleneck report: {}", chosen.name)}</h3>
            {mirror_table("mirror", Some("cap-latency-table"), None, "Latency and goodput of the shipped configuration, on all traffic and per slice", &["Slice", "Requests", "TTFT p50 (ms)", "TTFT p99 (ms)", "Time per token p50 (ms)", "Time per token p99 (ms)", "End to end p99 (ms)", "Goodput (requests/s)", "SLO attainment"], latency)}
            {mirror_table("mirror cap-keyed", Some("cap-bottleneck-table"), None, "Where the time went (shares of the simulated wall time; queueing as a share of request latency)", &["Time spent in", "Share"], shares)}
            <p>{bottleneck}</p>
        </section>
        <section class="cap-part" aria-labelledby="cap-quality-title">
            <h3 id="cap-quality-title">"3. Quality gates"</h3>
            {mirror_table("mirror", Some("cap-quality-table"), None, "Held-out bits per byte of the tiny model per slice and weight path (lower is better), against each slice's floor; eu is the rare slice", &["Slice", "Weights", "Bits/byte", "Floor", "Verdict"], quality)}
            <p>{format!("Gates of {}:", chosen.name)}</p>
            <ul class="cap-gates-list">{gates}</ul>
        </section>
        <section class="cap-part" aria-labelledby="cap-cost-title">
            <h3 id="cap-cost-title">"4. Capacity and cost recommendation"</h3>
            {mirror_table("mirror cap-keyed", Some("cap-cost-table"), None, format!("What the decision ships: {}", d.name), &["Figure", "Value"], cost_rows)}
            {max_throughput}
        </section>
    }
}
