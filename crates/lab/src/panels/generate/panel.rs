//! The Generate panel: a prompt and a policy in, tokens streamed out of the tiny model on
//! WebGPU (or the CPU reference), with the backend named, every step listed and the run
//! record shown. It only draws and sends: [`crate::panels::generate::view_model`] checks the
//! form, and [`RunState`] holds the run and follows the worker's events.
//!
//! It shows the backend status line (`data-backend`, and the fallback's reason in words), a
//! progress bar while a model file downloads, the streamed tokens shaded and underlined by
//! probability band (solid from 0.5, dashed from 0.2, dotted below), each focusable with its
//! top five on hover or focus, a polite announcement at most every `ANNOUNCE_EVERY_MS`, the
//! latency chart and the steps table, and the record's Replay, JSON and JSONL export and
//! import.

use leptos::prelude::*;
use policy::generate::Alternative;
use policy::{BackendChoice, Precision, RunRecord};

use crate::importer::protocol::ImportedPolicy;
use crate::js::now_ms;
use crate::panels::generate::import_box::ImportBox;
use crate::panels::generate::latency_chart::{LatencyChart, LatencyRow};
use crate::panels::generate::run_state::{Download, Figures, Phase, RunState, Shown};
use crate::panels::generate::view_model::{
    backend_status, defaults, ids, visible, GenerateForm, SHOWN,
};
use crate::panels::panel_head;
use crate::shell::url;
use crate::shell::web::{download, read_chosen_file};
use crate::widgets::chart::mirror_table;
use crate::widgets::field::{chosen, options, Choice, Field, TextArea};
use crate::widgets::form::{problem_at, problems_of, Form};
use crate::widgets::knobs::{knob_fields, knob_labels, more_controls};
use crate::worker::protocol::PanelWorker;
use crate::worker::protocol::{download_words, Event, Job};

/// The most bytes of a run record (or a JSONL of runs) the import reads: a long run's
/// record, with every step's alternatives, is a few MB.
const RECORD_MAX_BYTES: usize = 64 << 20;

#[component]
pub fn GeneratePanel() -> impl IntoView {
    let pairs = url::pairs();
    let pairs_ref = || pairs.iter().map(|(k, v)| (k.as_str(), v.as_str()));
    let (initial, url_problems) = GenerateForm::from_pairs(pairs_ref());
    // The URL's problems with a select stay until the learner picks in it.
    let url_problems = RwSignal::new(url_problems);
    let autorun = pairs.iter().any(|(k, v)| k == "run" && v == "1");

    let (prompt, set_prompt) = signal(initial.prompt);
    let (max_tokens, set_max_tokens) = signal(initial.max_tokens);
    let knob_defaults = defaults();
    let knobs = initial.policy.map(RwSignal::new);
    let (stop, set_stop) = signal(initial.stop);
    let (stop_tokens, set_stop_tokens) = signal(initial.stop_tokens);
    let (seed, set_seed) = signal(initial.seed);
    let (precision, set_precision) = signal(initial.precision);
    let (backend_choice, set_backend_choice) = signal(initial.backend);
    let (fault, set_fault) = signal(initial.fault);

    let run = RwSignal::new(RunState::default());
    // A memo per part the view draws, so that each part redraws only when it changes.
    let phase = Memo::new(move |_| run.with(|r| r.phase.clone()));
    let shown = Memo::new(move |_| run.with(|r| r.shown.clone()));
    let record = Memo::new(move |_| run.with(|r| r.record.clone()));
    let record_json = Memo::new(move |_| {
        record.with(|r| {
            r.as_ref()
                .and_then(|r| serde_json::to_string_pretty(r).ok())
        })
    });
    let announcement = Memo::new(move |_| run.with(|r| r.announcement.clone()));
    let shown_prompt = Memo::new(move |_| run.with(|r| r.shown_prompt.clone()));
    // The model worker, started with the first run; a panic in it drops it for a new one.
    let worker = PanelWorker::new();

    let form = Memo::new(move |_| GenerateForm {
        prompt: prompt.get(),
        max_tokens: max_tokens.get(),
        policy: knobs.map(|k| k.get()),
        stop: stop.get(),
        stop_tokens: stop_tokens.get(),
        seed: seed.get(),
        precision: precision.get(),
        backend: backend_choice.get(),
        fault: fault.get(),
    });
    let checked = Memo::new(move |_| form.get().check());
    let problems = problems_of(Some(url_problems), checked);
    let problem = problem_at(problems);

    // The form's state in the URL as it changes (without `run=1`: a reload does not rerun).
    Effect::new(move |_| url::write(&form.get().to_pairs()));

    let on_event = move |event: Event| {
        if matches!(event, Event::Panicked(_)) {
            // The worker is gone; the next run starts a new one.
            worker.discard();
        }
        run.update(|r| r.apply(event, now_ms()));
    };
    // Sends the job a start returned; none when a run was already in progress.
    let send = move |job: Option<Job>| {
        if let Some(job) = job {
            if let Err(message) = worker.send(&job, on_event) {
                run.update(|r| r.could_not_start(message.to_string()));
            }
        }
    };
    // A record to replay goes to the worker as its JSON text: the worker reads and checks it.
    let replay = move |recorded: String| {
        let backend = backend_choice.get_untracked();
        send(
            run.try_update(|r| r.start_replay(recorded, backend, now_ms()))
                .flatten(),
        );
    };

    // An imported policy replaces the form's knobs and the run settings it gives.
    let take = move |imported: ImportedPolicy| {
        let mut taken = form.get_untracked();
        taken.take_import(&imported);
        set_max_tokens.set(taken.max_tokens);
        set_seed.set(taken.seed);
        set_stop.set(taken.stop);
        set_stop_tokens.set(taken.stop_tokens);
        for (knob, text) in knobs.iter().zip(taken.policy) {
            knob.set(text);
        }
    };

    // The form is checked as it is typed; the worker gets the checked request.
    let start_run = move || match checked.get_untracked() {
        Ok(request) => {
            url::write(&form.get_untracked().to_pairs());
            send(run.try_update(|r| r.start_run(request, now_ms())).flatten());
        }
        Err(_) => run.update(|r| {
            r.could_not_start(
                "Generate waits until every field reads; the fields to change are listed above."
                    .to_string(),
            )
        }),
    };

    if autorun {
        // At once, before the panel is drawn: the job reaches the worker (started early by
        // `index.html`, its files already fetched) without waiting for the page's render.
        start_run();
    }

    view! {
        <section class="panel" id="generate" aria-labelledby="generate-title" data-state=move || phase.get().key()>
            {panel_head("generate", "Generate", "Run the tiny model on a prompt with the same policy, one token at a time. The model runs on WebGPU when the browser has it, and otherwise on the CPU reference; the line below names which.", None, Some(problems))}
            <form class="controls" on:submit=move |ev| {
                ev.prevent_default();
                start_run();
            }>
                <TextArea id="gen-prompt" problem=problem("gen-prompt") label="Prompt" hint="The text the model continues." value=prompt.into() set=set_prompt wide=true/>
                <Field id="gen-max" problem=problem("gen-max") label="Max new tokens" hint="Stop after this many tokens (or at the end-of-text token)." value=max_tokens.into() set=set_max_tokens inputmode="numeric"/>
                {knob_fields(&SHOWN, (ids(), knob_labels("")), knobs, problem)}
                <Field id="gen-seed" problem=problem("gen-seed") label="Seed" hint="The same seed gives the same tokens." value=seed.into() set=set_seed inputmode="numeric"/>
                <TextArea id="gen-stop" problem=problem("gen-stop") label="Stop strings" hint="One per line; write \\n for a line break. The run stops when the text contains one." value=stop.into() set=set_stop/>
                <Field id="gen-stop-tokens" problem=problem("gen-stop-tokens") label="Stop tokens" hint="Token ids that end the run, e.g. 10, 13." value=stop_tokens.into() set=set_stop_tokens inputmode="text"/>
                <Choice id="gen-precision" problem=problem("gen-precision") label="Precision" options=precision_options() value=Signal::derive(move || precision.get().to_string()) set=chosen("gen-precision", url_problems, set_precision)/>
                <Choice id="gen-backend" problem=problem("gen-backend") label="Backend" options=backend_options() value=Signal::derive(move || backend_choice.get().to_string()) set=chosen("gen-backend", url_problems, set_backend_choice)/>
                <Field id="gen-fault" label="Injected faults" hint="For testing the fallback: no-webgpu, no-adapter, device-request, canary, device-lost@N." value=fault.into() set=set_fault inputmode="text"/>
                {more_controls(&SHOWN, (ids(), knob_labels("")), knobs, &knob_defaults, problem)}
                <div class="field buttons">
                    <button type="submit" disabled=move || phase.with(Phase::busy)>"Generate"</button>
                    <button
                        type="button"
                        class="secondary"
                        disabled=move || !phase.with(Phase::cancellable)
                        on:click=move |_| worker.cancel()
                    >
                        "Cancel"
                    </button>
                </div>
            </form>
            <ImportBox take=Callback::new(take)/>
            <div class="run" aria-live="polite">
                <BackendLine run=run choice=backend_choice/>
                <PhaseLine run=run phase=phase/>
                <p class="sr-only" data-testid="announcement">{move || announcement.get()}</p>
            </div>
            <p class="output" data-testid="output">
                <span class="prompt-echo">{move || shown_prompt.get()}</span>
                <span class="generated">
                    <For each=move || shown.get() key=|t| t.step.step let:token>
                        <Token token=token/>
                    </For>
                </span>
            </p>
            <p class="legend">
                "Each token is shaded and underlined by its probability: solid underline at 0.5 or more, dashed from 0.2, dotted below 0.2, darker for less probable. Hover or focus a token for its five most probable alternatives."
            </p>
            <Timings run=run phase=phase/>
            {move || {
                let rows = shown.with(|s| {
                    LatencyRow::of(&s.iter().map(|t| t.step.clone()).collect::<Vec<_>>())
                });
                (!rows.is_empty()).then(|| view! { <LatencyChart rows=rows/> })
            }}
            <StepsTable shown=shown/>
            <RecordTools run=run phase=phase record=record replay=Callback::new(replay)/>
            <details class="record">
                <summary>"Run record (JSON)"</summary>
                <pre data-testid="run-record">{move || record_json.get().unwrap_or_default()}</pre>
            </details>
        </section>
    }
}

/// The precision drop-down's options.
fn precision_options() -> Vec<(String, String)> {
    options(&[
        (Precision::F32, "f32"),
        (Precision::Int8, "int8 (quantised)"),
    ])
}

/// The backend drop-down's options.
fn backend_options() -> Vec<(String, String)> {
    options(&[
        (BackendChoice::Auto, "Auto (the faster, measured)"),
        (BackendChoice::Gpu, "WebGPU"),
        (BackendChoice::Cpu, "CPU reference"),
    ])
}

/// The backend line: what runs the model, or what a run will ask for before the first.
#[component]
fn BackendLine(run: RwSignal<RunState>, choice: ReadSignal<BackendChoice>) -> impl IntoView {
    let backend = Memo::new(move |_| run.with(|r| r.backend.clone()));
    let browser_adapter = Memo::new(move |_| run.with(|r| r.browser_adapter.clone()));
    move || {
        match backend.get() {
        Some(b) => {
            let degraded = b.degraded_reason.is_some();
            let (name, adapter) = (b.name.name(), b.adapter.clone().unwrap_or_default());
            view! {
                <p
                    class=if degraded { "backend degraded" } else { "backend" }
                    data-testid="backend-status"
                    data-backend=name
                    data-degraded=degraded.to_string()
                    data-adapter=adapter
                    data-browser-adapter=move || browser_adapter.get().unwrap_or_default()
                >
                    {move || backend_status(&b, browser_adapter.get().as_deref())}
                </p>
            }
            .into_any()
        }
        None => view! {
            <p class="backend" data-testid="backend-status" data-backend="">
                {move || match choice.get() {
                    BackendChoice::Auto => "Not started: Generate will start on the CPU reference, time WebGPU against it once its canary passes, and run the faster.",
                    BackendChoice::Gpu => "Not started: Generate will ask for WebGPU and fall back to cpu-reference if it cannot run.",
                    BackendChoice::Cpu => "Not started: Generate will run the CPU reference (cpu-reference).",
                }}
            </p>
        }
        .into_any(),
    }
    }
}

/// The phase in words, with a progress bar while a model file downloads.
#[component]
fn PhaseLine(run: RwSignal<RunState>, phase: Memo<Phase>) -> impl IntoView {
    let downloading = Memo::new(move |_| run.with(|r| r.downloading.clone()));
    let entered = Memo::new(move |_| run.with(|r| r.phase_entered));
    move || {
        // Drawn anew each time a phase is entered, even with the same words.
        entered.track();
        match phase.get() {
            Phase::Idle => None,
            Phase::Working(what) => Some(
                view! {
                    <p class="progress">{what}</p>
                    {move || downloading.get().map(|Download { file, got, total }| {
                        let label = download_words(&file, got, total);
                        view! {
                            <div class="download">
                                <label for="gen-download">{label}</label>
                                <progress id="gen-download" max=total.unwrap_or(0.0).max(got).to_string() value=got.to_string()></progress>
                            </div>
                        }
                    })}
                }
                .into_any(),
            ),
            Phase::Generating => Some(view! { <p class="progress">"Generating…"</p> }.into_any()),
            Phase::Done(what) => Some(view! { <p class="done">{what}</p> }.into_any()),
            Phase::Panicked(message) => Some(
                view! { <p class="error" role="alert" data-testid="worker-panic">{message}</p> }
                    .into_any(),
            ),
            Phase::Failed(message) => {
                Some(view! { <p class="error" role="alert">{message}</p> }.into_any())
            }
        }
    }
}

fn round(x: f64) -> String {
    format!("{x:.1}")
}

/// The finished run's timings, in words and as `data-*` figures for the benchmarks.
#[component]
fn Timings(run: RwSignal<RunState>, phase: Memo<Phase>) -> impl IntoView {
    let figures = Memo::new(move |_| run.with(|r| r.figures));
    move || {
        let Figures {
            first_token_ms,
            run: f,
        } = figures.get();
        // The worker's figures arrive with the record.
        if !matches!(phase.get(), Phase::Done(_)) {
            return None;
        }
        first_token_ms.map(|first| {
            let decode = f
                .decode_tok_s
                .map(|t| format!("{} tokens/s", round(t)))
                .unwrap_or_else(|| "not measured (one token)".to_string());
            let gpu_line = f.gpu.map(|g| {
                format!(
                    " On WebGPU a decode step took {} ms to encode and submit, {} ms on the GPU and {} ms to read the logits back ({} read-backs in all).",
                    round(g.dispatch_ms),
                    round(g.gpu_ms),
                    round(g.readback_ms),
                    f.readbacks
                )
            });
            view! {
                <p
                    class="timings"
                    data-testid="timings"
                    data-first-token-ms=first.to_string()
                    data-load-ms=f.load_ms.to_string()
                    data-start-ms=f.start_ms.to_string()
                    data-ttft-ms=f.ttft_ms.to_string()
                    data-decode-tok-s=f.decode_tok_s.map(|t| t.to_string()).unwrap_or_default()
                    data-gpu-ms=f.gpu.map(|g| g.gpu_ms.to_string()).unwrap_or_default()
                    data-readback-ms=f.gpu.map(|g| g.readback_ms.to_string()).unwrap_or_default()
                    data-dispatch-ms=f.gpu.map(|g| g.dispatch_ms.to_string()).unwrap_or_default()
                    data-readbacks=f.readbacks.to_string()
                    data-gpu-start-ms=f.gpu_start.map(|p| format!("{} {} {}", p[0], p[1], p[2])).unwrap_or_default()
                >
                    {format!(
                        "First token {} ms after the page started loading (model files {} ms, backend start {} ms, prefill and first step {} ms); decode {decode}.",
                        round(first),
                        round(f.load_ms),
                        round(f.start_ms),
                        round(f.ttft_ms),
                    )}
                    {gpu_line}
                </p>
            }
        })
    }
}

/// Every generated step as a table row: token, text, probability under the policy and
/// under the model alone, entropy and draw.
#[component]
fn StepsTable(shown: Memo<Vec<Shown>>) -> impl IntoView {
    let rows = move || {
        shown
            .get()
            .into_iter()
            .map(|Shown { step: s, .. }| {
                view! {
                    <tr data-token=s.token>
                        <th scope="row">{s.step.to_string()}</th>
                        <td>{s.token.to_string()}</td>
                        <td class="token-text" data-text=s.text.clone()><code>{visible(&s.text)}</code></td>
                        <td data-value=s.prob.to_string()>{format!("{:.4}", s.prob)}</td>
                        <td data-value=s.model_prob.map(|p| p.to_string()).unwrap_or_default()>{model_prob_words(s.model_prob)}</td>
                        <td data-value=s.entropy.to_string()>{format!("{:.3}", s.entropy)}</td>
                        <td>{s.draw.map(|d| format!("{d:.6}")).unwrap_or_else(|| "greedy".to_string())}</td>
                    </tr>
                }
            })
            .collect_view()
    };
    view! {
        {mirror_table("mirror steps", None, Some("steps"), "Generated tokens: each step's token, its text, its probability under the policy and under the model's own distribution (before the policy), the entropy of the distribution it was drawn from (nats) and the uniform draw", &["Step", "Token id", "Text", "Probability", "Model probability", "Entropy", "Draw"], rows)}
    }
}

/// Replay, export and import: the record's tools, and what came of them.
#[component]
fn RecordTools(
    run: RwSignal<RunState>,
    phase: Memo<Phase>,
    record: Memo<Option<RunRecord>>,
    replay: Callback<String>,
) -> impl IntoView {
    let run_count = Memo::new(move |_| run.with(|r| r.all_runs.len()));
    let verdict = Memo::new(move |_| run.with(|r| r.verdict.clone()));
    let file_message = RwSignal::new(None::<String>);

    let export_record = move |_| {
        let Some(r) = record.get_untracked() else {
            return;
        };
        let text = serde_json::to_string_pretty(&r).unwrap_or_default();
        let name = format!("decode-lab-run-seed{}.json", r.config.seed);
        file_message.set(
            download(&name, "application/json", &text)
                .err()
                .map(|e| e.to_string()),
        );
    };
    let export_all = move |_| {
        let mut text = run.with_untracked(|r| r.all_runs.join("\n"));
        text.push('\n');
        file_message.set(
            download("decode-lab-runs.jsonl", "application/x-ndjson", &text)
                .err()
                .map(|e| e.to_string()),
        );
    };
    let import = move |change: leptos::ev::Event| {
        read_chosen_file(change, RECORD_MAX_BYTES, move |read| match read {
            Ok(text) => {
                file_message.set(None);
                replay.run(text);
            }
            Err(e) => file_message.set(Some(e.to_string())),
        })
    };

    view! {
        <div class="record-tools">
            <h3>"Replay, export and import"</h3>
            <div class="field buttons">
                <button type="button" on:click=move |_| { if let Some(text) = record.with_untracked(|r| r.as_ref().and_then(|r| serde_json::to_string(r).ok())) { replay.run(text) } } disabled=move || phase.with(Phase::busy) || record.with(Option::is_none)>
                    "Replay"
                </button>
                <button type="button" class="secondary" on:click=export_record disabled=move || record.with(Option::is_none)>
                    "Export record (JSON)"
                </button>
                <button type="button" class="secondary" on:click=export_all disabled=move || run_count.get() == 0>
                    {move || format!("Export all runs (JSONL, {})", run_count.get())}
                </button>
            </div>
            <div class="field">
                <label for="gen-import">"Import a run record to replay"</label>
                <input id="gen-import" type="file" accept=".json,.jsonl,application/json" aria-describedby="gen-import-hint" on:change=import disabled=move || phase.with(Phase::busy)/>
                <small id="gen-import-hint">"A record exported here or by decode-lab generate --json; the lab replays it and says whether it is identical."</small>
            </div>
            <div aria-live="polite">
                {move || file_message.get().map(|m| view! { <p class="file-message" data-testid="file-message">{m}</p> })}
                {move || verdict.get().map(|(same, words)| view! {
                    <p class=if same { "verdict same" } else { "verdict differs" } data-testid="replay-verdict" data-identical=same.to_string()>
                        {words}
                    </p>
                })}
            </div>
        </div>
    }
}

/// One token of the output: shaded and underlined by its probability, focusable, with its
/// five most probable alternatives on hover or focus.
#[component]
fn Token(token: Shown) -> impl IntoView {
    let Shown { step, text } = token;
    let band = if step.prob >= 0.5 {
        "tok p-high"
    } else if step.prob >= 0.2 {
        "tok p-mid"
    } else {
        "tok p-low"
    };
    let tip_id = format!("gen-tok-{}", step.step);
    let described_by = tip_id.clone();
    let listed = |top: &[Alternative]| {
        top.iter()
            .map(|a| format!("\"{}\" {:.3}", visible(&a.text), a.prob))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut tip = format!(
        "step {}: policy p = {:.3}, model p = {}; policy's top 5: {}",
        step.step,
        step.prob,
        model_prob_words(step.model_prob),
        listed(&step.top)
    );
    if !step.model_top.is_empty() {
        tip.push_str(&format!("; model's top 5: {}", listed(&step.model_top)));
    }
    view! {
        <span class=band tabindex="0" data-prob=step.prob.to_string() aria-describedby=described_by>
            {text}
            <span class="alts" role="tooltip" id=tip_id>{tip}</span>
        </span>
    }
}

/// A step's probability under the model alone, or why there is none: records made before
/// it was recorded, and steps a device took without it.
fn model_prob_words(prob: Option<f64>) -> String {
    prob.map_or_else(|| "not recorded".to_string(), |p| format!("{p:.4}"))
}
