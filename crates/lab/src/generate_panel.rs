//! The Generate panel: a prompt and a policy in, tokens streamed out of the tiny model on
//! WebGPU (or the CPU reference), with the backend named, every step listed and the run
//! record shown. It only draws; [`crate::generation`] does the work.

use gpu::{BackendChoice, Runtime};
use leptos::prelude::*;
use leptos::task::spawn_local;
use model::Precision;
use policy::generate::StepRecord;
use policy::Backend;
use tokenizer::StreamDecoder;

use crate::generation::{
    backend_status, generate, load_model, precision_name, speed, visible, with_eos, GenerateForm,
    ModelFiles, Request,
};
use crate::step_panel::Field;
use crate::url;
use crate::web::{adapter_info, fetch_model_file, now_ms, Pacer, PageClock};

/// What the panel is doing.
#[derive(Clone, Debug, PartialEq)]
enum Phase {
    Idle,
    /// Loading files or starting the backend; the words say which.
    Working(String),
    Generating,
    Done(String),
    Failed(String),
}

impl Phase {
    fn key(&self) -> &'static str {
        match self {
            Phase::Idle => "idle",
            Phase::Working(_) => "working",
            Phase::Generating => "generating",
            Phase::Done(_) => "done",
            Phase::Failed(_) => "failed",
        }
    }
}

/// Page-level figures of the last run, for the timings line and the benchmarks.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Figures {
    /// `performance.now()` when the first token was shown: from navigation start.
    first_token_ms: Option<f64>,
    /// Fetching and checking the model files in this run (0 when already loaded).
    load_ms: f64,
    /// Starting the backend: device, weight upload and canary on WebGPU.
    start_ms: f64,
    /// The record's time to first token (prefill plus the first policy step).
    ttft_ms: f64,
    decode_tok_s: Option<f64>,
    /// Mean GPU timings of the decode steps that ran on WebGPU, in milliseconds.
    gpu: Option<gpu::StepTimings>,
    /// GPU-to-CPU read-backs of the run (one per model call on WebGPU).
    readbacks: u64,
}

/// The runtime a request can reuse: same backend, weights and faults, and not degraded.
struct Started {
    backend: BackendChoice,
    precision: Precision,
    faults: gpu::Faults,
    runtime: Runtime,
}

/// What survives between runs: the checked files and the started runtime.
#[derive(Default)]
struct Engine {
    files: Option<ModelFiles>,
    started: Option<Started>,
}

fn round(x: f64) -> String {
    format!("{x:.1}")
}

#[component]
pub fn GeneratePanel() -> impl IntoView {
    let pairs = url::pairs();
    let pairs_ref = || pairs.iter().map(|(k, v)| (k.as_str(), v.as_str()));
    let initial = GenerateForm::from_query(pairs_ref());
    let url_problems = GenerateForm::url_problems(pairs_ref());
    let autorun = pairs.iter().any(|(k, v)| k == "run" && v == "1");

    let (prompt, set_prompt) = signal(initial.prompt);
    let (max_tokens, set_max_tokens) = signal(initial.max_tokens);
    let (temperature, set_temperature) = signal(initial.temperature);
    let (top_k, set_top_k) = signal(initial.top_k);
    let (top_p, set_top_p) = signal(initial.top_p);
    let (seed, set_seed) = signal(initial.seed);
    let (precision, set_precision) = signal(initial.precision);
    let (backend_choice, set_backend_choice) = signal(initial.backend);
    let (fault, set_fault) = signal(initial.fault);

    let phase = RwSignal::new(Phase::Idle);
    let backend = RwSignal::new(None::<Backend>);
    let browser_adapter = RwSignal::new(None::<String>);
    let steps = RwSignal::new(Vec::<StepRecord>::new());
    let output = RwSignal::new(String::new());
    let shown_prompt = RwSignal::new(String::new());
    let record_json = RwSignal::new(None::<String>);
    let figures = RwSignal::new(Figures::default());
    let stop_requested = RwSignal::new(false);
    let engine = StoredValue::new_local(Some(Engine::default()));

    let form = move || GenerateForm {
        prompt: prompt.get_untracked(),
        max_tokens: max_tokens.get_untracked(),
        temperature: temperature.get_untracked(),
        top_k: top_k.get_untracked(),
        top_p: top_p.get_untracked(),
        seed: seed.get_untracked(),
        precision: precision.get_untracked(),
        backend: backend_choice.get_untracked(),
        fault: fault.get_untracked(),
    };

    let busy = move || matches!(phase.get(), Phase::Working(_) | Phase::Generating);

    let start_run = move || {
        let form = form();
        let request = match form.parse() {
            Ok(request) => request,
            Err(message) => {
                phase.set(Phase::Failed(message));
                return;
            }
        };
        // The engine is taken for the run and put back after; a second press while it is
        // out is ignored (the button is disabled then too).
        let Some(mut state) = engine.try_update_value(Option::take).flatten() else {
            return;
        };
        url::write(&form.to_query());
        backend.set(None);
        steps.set(Vec::new());
        output.set(String::new());
        shown_prompt.set(request.config.prompt.clone());
        record_json.set(None);
        figures.set(Figures::default());
        stop_requested.set(false);
        phase.set(Phase::Working("Preparing…".to_string()));
        spawn_local(async move {
            let signals = RunSignals {
                phase,
                backend,
                browser_adapter,
                steps,
                output,
                figures,
                stop_requested,
            };
            let result = run(&mut state, request, signals).await;
            match result {
                Ok(record) => {
                    let reason = record.stop_reason.describe();
                    let n = record.steps.len();
                    let tokens = if n == 1 { "token" } else { "tokens" };
                    record_json.set(serde_json::to_string_pretty(&record).ok());
                    phase.set(Phase::Done(format!(
                        "Generated {n} {tokens}; stopped because {reason}."
                    )));
                }
                Err(message) => phase.set(Phase::Failed(message)),
            }
            engine.set_value(Some(state));
        });
    };

    if autorun {
        // After the first render, so the page shows the panel before the work starts.
        spawn_local(async move { start_run() });
    }

    let status = move || {
        match backend.get() {
        Some(b) => {
            let degraded = b.degraded_reason.is_some();
            let (name, adapter) = (b.name.clone(), b.adapter.clone().unwrap_or_default());
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
                {move || match backend_choice.get() {
                    BackendChoice::Gpu => "Not started: Generate will ask for WebGPU and fall back to cpu-reference if it cannot run.",
                    BackendChoice::Cpu => "Not started: Generate will run the CPU reference (cpu-reference).",
                }}
            </p>
        }
        .into_any(),
    }
    };

    let phase_line = move || match phase.get() {
        Phase::Idle => None,
        Phase::Working(what) => Some(view! { <p class="progress">{what}</p> }.into_any()),
        Phase::Generating => Some(view! { <p class="progress">"Generating…"</p> }.into_any()),
        Phase::Done(what) => Some(view! { <p class="done">{what}</p> }.into_any()),
        Phase::Failed(message) => {
            Some(view! { <p class="error" role="alert">{message}</p> }.into_any())
        }
    };

    let timings = move || {
        let f = figures.get();
        f.first_token_ms.map(|first| {
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
    };

    let rows = move || {
        steps
            .get()
            .into_iter()
            .map(|s| {
                view! {
                    <tr data-token=s.token>
                        <th scope="row">{s.step.to_string()}</th>
                        <td>{s.token.to_string()}</td>
                        <td class="token-text" data-text=s.text.clone()><code>{visible(&s.text)}</code></td>
                        <td data-value=s.prob.to_string()>{format!("{:.4}", s.prob)}</td>
                    </tr>
                }
            })
            .collect_view()
    };

    let problems = url_problems
        .into_iter()
        .map(|p| view! { <p class="error">{p}</p> })
        .collect_view();

    view! {
        <section
            class="panel"
            id="generate"
            aria-labelledby="generate-title"
            data-state=move || phase.get().key()
        >
            <h2 id="generate-title">"Generate"</h2>
            <p>
                "Run the tiny model on a prompt with the same policy, one token at a time. The model runs on WebGPU when the browser has it, and otherwise on the CPU reference; the line below names which."
            </p>
            {problems}
            <form class="controls" on:submit=move |ev| {
                ev.prevent_default();
                start_run();
            }>
                <div class="field wide">
                    <label for="gen-prompt">"Prompt"</label>
                    <textarea
                        id="gen-prompt"
                        name="prompt"
                        rows="2"
                        aria-describedby="gen-prompt-hint"
                        prop:value=move || prompt.get()
                        on:input=move |ev| set_prompt.set(event_target_value(&ev))
                    ></textarea>
                    <small id="gen-prompt-hint">"The text the model continues."</small>
                </div>
                <Field id="gen-max" label="Max new tokens" hint="Stop after this many tokens (or at the end-of-text token)." value=max_tokens.into() set=set_max_tokens inputmode="numeric"/>
                <Field id="gen-temperature" label="Temperature" hint="0 is greedy; higher flattens." value=temperature.into() set=set_temperature/>
                <Field id="gen-top-k" label="Top-k" hint="Keep the k highest; 0 is off." value=top_k.into() set=set_top_k inputmode="numeric"/>
                <Field id="gen-top-p" label="Top-p" hint="Keep the smallest set with this much probability; 1 is off." value=top_p.into() set=set_top_p/>
                <Field id="gen-seed" label="Seed" hint="The same seed gives the same tokens." value=seed.into() set=set_seed inputmode="numeric"/>
                <div class="field">
                    <label for="gen-precision">"Precision"</label>
                    <select
                        id="gen-precision"
                        on:change=move |ev| {
                            set_precision.set(if event_target_value(&ev) == "int8" { Precision::Int8 } else { Precision::F32 })
                        }
                    >
                        <option value="f32" selected=move || precision.get() == Precision::F32>"f32"</option>
                        <option value="int8" selected=move || precision.get() == Precision::Int8>"int8 (quantised)"</option>
                    </select>
                </div>
                <div class="field">
                    <label for="gen-backend">"Backend"</label>
                    <select
                        id="gen-backend"
                        on:change=move |ev| {
                            set_backend_choice.set(if event_target_value(&ev) == "cpu" { BackendChoice::Cpu } else { BackendChoice::Gpu })
                        }
                    >
                        <option value="gpu" selected=move || backend_choice.get() == BackendChoice::Gpu>"WebGPU"</option>
                        <option value="cpu" selected=move || backend_choice.get() == BackendChoice::Cpu>"CPU reference"</option>
                    </select>
                </div>
                <Field id="gen-fault" label="Injected faults" hint="For testing the fallback: no-webgpu, no-adapter, device-request, canary, device-lost@N." value=fault.into() set=set_fault inputmode="text"/>
                <div class="field buttons">
                    <button type="submit" disabled=busy>"Generate"</button>
                    <button
                        type="button"
                        class="secondary"
                        disabled=move || phase.get() != Phase::Generating
                        on:click=move |_| stop_requested.set(true)
                    >
                        "Stop"
                    </button>
                </div>
            </form>
            <div class="run" aria-live="polite">
                {status}
                {phase_line}
            </div>
            <p class="output" data-testid="output">
                <span class="prompt-echo">{move || shown_prompt.get()}</span>
                <span class="generated">{move || output.get()}</span>
            </p>
            {timings}
            <table class="mirror steps" data-testid="steps">
                <caption>"Generated tokens: each step's token, its text and its probability under the policy"</caption>
                <thead>
                    <tr>
                        <th scope="col">"Step"</th>
                        <th scope="col">"Token id"</th>
                        <th scope="col">"Text"</th>
                        <th scope="col">"Probability"</th>
                    </tr>
                </thead>
                <tbody>{rows}</tbody>
            </table>
            <details class="record">
                <summary>"Run record (JSON)"</summary>
                <pre data-testid="run-record">{move || record_json.get().unwrap_or_default()}</pre>
            </details>
        </section>
    }
}

/// The signals a run streams into.
struct RunSignals {
    phase: RwSignal<Phase>,
    backend: RwSignal<Option<Backend>>,
    browser_adapter: RwSignal<Option<String>>,
    steps: RwSignal<Vec<StepRecord>>,
    output: RwSignal<String>,
    figures: RwSignal<Figures>,
    stop_requested: RwSignal<bool>,
}

/// One run: load what is missing, start (or reuse) the runtime, generate, streaming each
/// step into the signals.
async fn run(
    state: &mut Engine,
    request: Request,
    signals: RunSignals,
) -> Result<policy::RunRecord, String> {
    let RunSignals {
        phase,
        backend,
        browser_adapter,
        steps,
        output,
        figures,
        stop_requested,
    } = signals;
    let fetch = async |path: &str| fetch_model_file(path).await;
    let mut progress = |what: String| phase.set(Phase::Working(what));

    let began = now_ms();
    if state.files.is_none() {
        state.files = Some(load_model(&fetch, &mut progress).await?);
    }
    let Some(files) = state.files.as_mut() else {
        return Err("The model files are not loaded.".to_string());
    };
    files
        .ensure_weights(request.precision, request.backend, &fetch, &mut progress)
        .await?;
    let loaded = now_ms();

    let reusable = state.started.as_ref().is_some_and(|s| {
        s.backend == request.backend
            && s.precision == request.precision
            && s.faults == request.faults
            && s.runtime.backend().degraded_reason.is_none()
    });
    if !reusable {
        state.started = None;
        progress(match request.backend {
            BackendChoice::Gpu => format!(
                "Starting WebGPU: requesting a device, uploading the {} weights and checking them against the CPU reference…",
                precision_name(request.precision)
            ),
            BackendChoice::Cpu => "Preparing the CPU reference…".to_string(),
        });
        let runtime = files.start(&request).await?;
        state.started = Some(Started {
            backend: request.backend,
            precision: request.precision,
            faults: request.faults,
            runtime,
        });
    }
    let Some(started) = state.started.as_mut() else {
        return Err("The backend did not start.".to_string());
    };
    let ready = now_ms();
    let on_gpu = started.runtime.backend().name == Backend::WEBGPU;
    if on_gpu && browser_adapter.get_untracked().is_none() {
        browser_adapter.set(adapter_info().await);
    }
    backend.set(Some(started.runtime.backend().clone()));
    phase.set(Phase::Generating);

    let config = with_eos(request.config, &files.tokenizer);
    let eos = config.policy.eos_token;
    let tokenizer = &files.tokenizer;
    let mut decoder = StreamDecoder::new();
    let mut first_token_ms = None;
    let readbacks_before = started.runtime.readbacks();
    let mut gpu_sum = gpu::StepTimings::default();
    let mut gpu_steps = 0usize;
    let pacer = Pacer::new();
    let record = generate(
        &mut started.runtime,
        tokenizer,
        &config,
        &mut PageClock,
        &|| stop_requested.get_untracked(),
        &mut |step, runtime| {
            first_token_ms.get_or_insert_with(now_ms);
            if Some(step.token) != eos {
                if let Ok(text) = decoder.push(tokenizer, step.token) {
                    output.update(|o| o.push_str(&text));
                }
            }
            steps.update(|s| s.push(step.clone()));
            // Decode steps only: the prefill runs the whole prompt.
            if let (Some(gpu), true) = (runtime.gpu(), step.step > 0) {
                let t = gpu.timings();
                gpu_sum.dispatch_ms += t.dispatch_ms;
                gpu_sum.gpu_ms += t.gpu_ms;
                gpu_sum.readback_ms += t.readback_ms;
                gpu_steps += 1;
            }
            let now_on = runtime.backend();
            if backend.with_untracked(|b| b.as_ref() != Some(now_on)) {
                backend.set(Some(now_on.clone()));
            }
        },
        &async || pacer.pause().await,
    )
    .await?;
    let tail = decoder.finish();
    if !tail.is_empty() {
        output.update(|o| o.push_str(&tail));
    }
    backend.set(Some(record.backend.clone()));
    let speed = speed(&record);
    let n = gpu_steps as f64;
    figures.set(Figures {
        first_token_ms,
        load_ms: loaded - began,
        start_ms: ready - loaded,
        ttft_ms: speed.ttft_ms,
        decode_tok_s: speed.decode_tok_s,
        gpu: (gpu_steps > 0).then(|| gpu::StepTimings {
            dispatch_ms: gpu_sum.dispatch_ms / n,
            gpu_ms: gpu_sum.gpu_ms / n,
            readback_ms: gpu_sum.readback_ms / n,
        }),
        readbacks: started.runtime.readbacks().saturating_sub(readbacks_before),
    });
    Ok(record)
}
