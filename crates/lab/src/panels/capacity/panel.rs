//! The capacity planner's panel: presets, trace, serving policies, SLOs and quality floors
//! in, with the fleets (replicas, routers, prefix cache, P:D, speculation) and a canary;
//! on "Plan", the sweep as a throughput-against-p99-TTFT chart with its table mirror, the
//! release decision in words, the report's parts (the canary's timeline a chart with its
//! table) and its downloads. The planner worker ([`crate::planner`]), started as the panel
//! opens and kept while it is open, checks the fields as they change; each problem it finds
//! is marked at its field and listed above the results. The logic and the URL keys are in
//! [`crate::panels::capacity::view_model`]. The plan runs in the same worker, after any
//! check sent before it; the status line shows its progress, then the page's own time for
//! the plan, the worker's round trip included. What the worker sends back is already formatted
//! ([`PlanDisplay`]): this file only draws it.

use std::sync::Arc;

use capacity::{Knob, KnobKind};
use leptos::prelude::*;

use crate::js::now_ms;
use crate::link::PanelLink;
use crate::panels::capacity::view_model::{shown_problems, News, Outcome, PlanRun};
use crate::panels::panel_head;
use crate::planner::form::{
    attention_options, decoding_options, field, hardware_options, length_options, model_options,
    rollout_trace_options, trace_options, weight_options, CapacityForm, BATCHINGS, MORE_KNOBS,
    PLAN_ID,
};
use crate::planner::protocol::{PlanDisplay, Planner, PlannerEvent, PlannerJob};
use crate::shell::url;
use crate::shell::web::download;
use crate::widgets::controls::hidden;
use crate::widgets::field::{chosen, Choice, Field};
use crate::widgets::form::{problem_at, problem_id, Form, Problems};

/// The terms the plan's charts and tables use, defined where they are used (Chartability:
/// "Metrics and variables are undefined"). Static markup, so it costs the page's wasm one
/// string.
const TERMS: &str = concat!(
    "<dl>",
    crate::latency_terms!(),
    "<dt>SLO</dt><dd>Service-level objective: the limit the service promises, such as p99 TTFT under 1 s.</dd>\
<dt>Goodput</dt><dd>Output tokens per second from requests that met every limit.</dd></dl>"
);

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
    let (replicas, set_replicas) = signal(initial.replicas);
    let (routers, set_routers) = signal(initial.routers);
    let (prefix_cache, set_prefix_cache) = signal(initial.prefix_cache);
    let (attention, set_attention) = signal(initial.attention);
    let (disaggregate, set_disaggregate) = signal(initial.disaggregate);
    let (speculative_k, set_speculative_k) = signal(initial.speculative_k);
    let (decoding, set_decoding) = signal(initial.decoding);
    let (lengths, set_lengths) = signal(initial.lengths);
    let (canary, set_canary) = signal(initial.canary);
    let (rollout_trace, set_rollout_trace) = signal(initial.rollout_trace);
    let (detector_windows, set_detector_windows) = signal(initial.detector_windows);
    // The further knobs start open when the URL sets one.
    let more_open = initial.more.iter().any(|m| !m.trim().is_empty());
    let more = initial.more.map(RwSignal::new);

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
        replicas: replicas.get(),
        routers: routers.get(),
        prefix_cache: prefix_cache.get(),
        attention: attention.get(),
        disaggregate: disaggregate.get(),
        speculative_k: speculative_k.get(),
        decoding: decoding.get(),
        lengths: lengths.get(),
        canary: canary.get(),
        rollout_trace: rollout_trace.get(),
        detector_windows: detector_windows.get(),
        more: more.map(|m| m.get()),
    });
    url::follow(move || form.get().to_pairs());

    // The planner worker checks the fields as they change (its first check, as the panel
    // opens, starts it); the plan runs on Plan.
    let checked = RwSignal::new(Problems::default());
    let outcome = RwSignal::new(None::<Outcome>);
    let problems = Signal::derive(move || {
        checked.with(|found| {
            outcome
                .with(|o| form.with(|f| shown_problems(url_problems.get(), found, o.as_ref(), f)))
        })
    });
    let problem = problem_at(problems);

    let status = RwSignal::new(String::new());
    let use_known_good = RwSignal::new(false);
    let run = StoredValue::new(PlanRun::default());
    // `PlanRun::busy`, for the Plan button.
    let planning = RwSignal::new(false);
    let planner = PanelLink::<Planner>::new();

    let show = move |news: News| {
        planning.set(run.with_value(PlanRun::busy));
        if news.discard_worker {
            planner.discard();
        }
        if let Some(text) = news.status {
            status.set(text);
        }
        if let Some(result) = news.outcome {
            outcome.set(Some(result));
        }
        if let Some(found) = news.checked {
            checked.set(found);
        }
    };
    let on_event = move |event: PlannerEvent| {
        if let Some(news) = run.try_update_value(|r| r.apply(event, now_ms())).flatten() {
            show(news);
        }
    };
    let send = move |job: PlannerJob| {
        if let Err(message) = planner.send(&job, on_event) {
            if let Some(news) = run.try_update_value(|r| r.could_not_send(message.to_string())) {
                show(news);
            }
        }
    };
    Effect::new(move |_| {
        let current = form.get();
        if let Some(job) = run.try_update_value(|r| r.check(current)).flatten() {
            send(job);
        }
    });
    let start = move |_| {
        let planned = form.get_untracked();
        if run.with_value(|r| r.refuses(&planned)) {
            status.set("The plan did not run; the fields listed above need a change.".into());
            outcome.set(None);
            return;
        }
        let known = use_known_good.get_untracked();
        let Some(job) = run
            .try_update_value(|r| r.start(planned, known, now_ms()))
            .flatten()
        else {
            return;
        };
        planning.set(true);
        status.set("Planning…".into());
        send(job);
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
    let prefix_problem = problem("cap-prefix");
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
        Some(Ok(display)) => view! { <CapacityResult display=display/> }.into_any(),
        Some(Err(_)) => view! {
            <p>"The plan did not run; the reason is listed above, at the field it comes from."</p>
        }
        .into_any(),
    }
    };

    view! {
        <section class="panel capacity" aria-labelledby="capacity-title">
            {panel_head("capacity", "Capacity plan", "Simulate serving a trace on an accelerator under each batching policy, batch limit and weight path, at several multiples of the trace's load; gate every point on the latency SLOs and the per-slice quality floors; release the configuration with the highest goodput that passes, or degrade to the named baseline and say which gate failed.", Some(TERMS), Some(problems))}
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
                <Field id="cap-replicas" problem=problem("cap-replicas") label="Replica counts (comma-separated)" hint="The trace served on N identical replicas behind each router." value=replicas.into() set=set_replicas/>
                <Field id="cap-router" problem=problem("cap-router") label="Routers (comma-separated)" hint="round-robin, random, least-outstanding, least-kv, prefix-affinity, kv-aware." value=routers.into() set=set_routers/>
                <div class="field cap-choice" hidden=hidden("cap-prefix", "Prefix cache on each replica", Some(prefix_cache.into()), Some(prefix_problem))>
                    <input
                        type="checkbox"
                        id="cap-prefix"
                        aria-invalid=move || prefix_problem.get().map(|_| "true")
                        aria-describedby=move || prefix_problem.get().map(|_| problem_id("cap-prefix"))
                        prop:checked=move || prefix_cache.get() == "on"
                        on:change=move |ev| {
                            url_problems.update(|p| *p = p.without("cap-prefix"));
                            set_prefix_cache.set(if event_target_checked(&ev) { "on" } else { "off" }.into());
                        }
                    />
                    <label for="cap-prefix">"A prefix cache on each replica (shared prompts skip their prefill; try the chat-prefix trace)"</label>
                    {move || prefix_problem.get().map(|m| view! { <small id=problem_id("cap-prefix") class="field-problem error">{m}</small> })}
                </div>
                {select("cap-attention", "Attention", attention, set_attention, attention_options())}
                <Field id="cap-pd" problem=problem("cap-pd") label="Disaggregation P:D (empty: off)" hint="P prefill and D decode replicas, swept beside P + D colocated ones." value=disaggregate.into() set=set_disaggregate/>
                <Field id="cap-k" problem=problem("cap-k") label="Speculative tokens per step k (empty: off)" hint="Every configuration is also served drafting k tokens with the n-gram draft." value=speculative_k.into() set=set_speculative_k inputmode="numeric"/>
                {select("cap-decoding", "Decoding policy (its measured acceptance and lengths apply)", decoding, set_decoding, decoding_options())}
                {select("cap-lengths", "Output lengths", lengths, set_lengths, length_options())}
                <Field id="cap-canary" problem=problem("cap-canary") label="Canary fraction (empty: no rollout)" hint="The released configuration takes this share of the requests; a detector stops it at the first breached gate." value=canary.into() set=set_canary/>
                {select("cap-rollout-trace", "Traffic the canary meets", rollout_trace, set_rollout_trace, rollout_trace_options())}
                <Field id="cap-windows" problem=problem("cap-windows") label="Detector windows" hint="Tumbling windows over the canary trace; fewer, longer ones hold enough of a rare slice to judge it." value=detector_windows.into() set=set_detector_windows inputmode="numeric"/>
                <details class="cap-more" open=more_open>
                    <summary>"More plan inputs"</summary>
                    <div class="controls">{more_fields(more, problem, url_problems)}</div>
                </details>
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
fn CapacityResult(display: Arc<PlanDisplay>) -> impl IntoView {
    let failed = (!display.failed_gates.is_empty()).then(|| {
        let items = display
            .failed_gates
            .iter()
            .map(|g| view! { <li>{g.clone()}</li> })
            .collect_view();
        view! {
            <p>"Failed gates of the best candidate, with how far each is over:"</p>
            <ul class="cap-failed">{items}</ul>
        }
    });

    let download_error = RwSignal::new(None::<String>);
    let save = {
        let display = display.clone();
        move |markdown: bool| {
            let file = if markdown {
                &display.markdown
            } else {
                &display.json
            };
            download_error.set(
                download(&file.name, &file.mime, &file.text)
                    .err()
                    .map(|e| e.to_string()),
            );
        }
    };
    let save_json = save.clone();
    let parts = display.parts_html.clone();

    view! {
        <div class="cap-decision" data-kind=display.kind.clone()>
            <h3>"Release decision"</h3>
            <p class="chosen"><strong>{display.verdict.clone()}</strong></p>
            <p>{display.reason.clone()}</p>
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
        <div class="cap-sweep-chart" inner_html=display.sweep_html.clone()></div>
        <div class="cap-parts" inner_html=parts></div>
    }
}

/// The knobs of [`field::MORE`], each a field labelled and explained by the knob table: a switch a
/// box, the rest text as `decode-lab capacity` takes it.
fn more_fields(
    more: [RwSignal<String>; MORE_KNOBS],
    problem: impl Fn(&'static str) -> Signal<Option<String>> + Copy + 'static,
    url_problems: RwSignal<Problems>,
) -> impl IntoView {
    field::MORE
        .iter()
        .zip(more)
        .filter_map(|(spec, value)| {
            let knob = Knob::at_url(spec.key)?;
            let id = spec.id;
            Some(if knob.kind == KnobKind::Switch {
                let shown = problem(id);
                view! {
                    <div class="field cap-choice" hidden=hidden(id, knob.label, Some(value.into()), Some(shown))>
                        <input
                            type="checkbox"
                            id=id
                            aria-invalid=move || shown.get().map(|_| "true")
                            aria-describedby=move || shown.get().map(|_| problem_id(id))
                            prop:checked=move || value.get() == "on"
                            on:change=move |ev| {
                                url_problems.update(|p| *p = p.without(id));
                                value.set(if event_target_checked(&ev) { "on" } else { "" }.into());
                            }
                        />
                        <label for=id>{knob.label}": "{knob.hint}</label>
                        {move || shown.get().map(|m| view! { <small id=problem_id(id) class="field-problem error">{m}</small> })}
                    </div>
                }
                .into_any()
            } else {
                view! { <Field id=id problem=problem(id) label=knob.label hint=knob.hint value=value.into() set=value.write_only()/> }
                    .into_any()
            })
        })
        .collect_view()
}
