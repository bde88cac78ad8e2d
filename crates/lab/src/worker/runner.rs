//! The model's side of the lab, as it runs in the Web Worker: a [`Job`] in, a stream of
//! [`Event`]s out. Every panel that runs the model (Generate, the decoding step's model
//! logits, Your turn) sends its work here, so the page's own wasm carries no model, no
//! tokenizer and no WebGPU runtime. It keeps what survives between jobs (the checked
//! model files and the started runtime) and knows nothing of the DOM or of Leptos: the
//! page draws the events, the worker posts them (see [`crate::worker::host`]).
//!
//! The job and the events are the typed values that cross between page and worker through
//! `serde-wasm-bindgen`; a form travels as its URL query, so the worker parses exactly
//! what a permalink would.

use gpu::{BackendChoice, Runtime};
use model::Precision;
use policy::generate::StepRecord;
use policy::BackendKind;
use tokenizer::StreamDecoder;

use crate::panels::generate::view_model::GenerateForm;
use crate::panels::your_turn::view_model::ExerciseForm;
use crate::shell::web::now_ms;
use crate::widgets::form::Form;
use crate::worker::browser::{
    adapter_info, fetch_model_file_with_progress, yield_to_events, WorkerClock,
};
use crate::worker::exercise::run_exercise;
use crate::worker::generation::{
    generate, load_model, prompt_logits, replay_request, speed, with_eos, ModelFiles,
};
use crate::worker::protocol::{borrowed, Event, GenerateRequest, GpuTimings, Job, RunFigures};

/// The runtime a request can reuse: same backend, weights and faults, and not degraded.
struct Started {
    backend: BackendChoice,
    precision: Precision,
    faults: gpu::Faults,
    runtime: Runtime,
}

/// What survives between runs: the checked files and the started runtime.
#[derive(Default)]
pub struct Engine {
    files: Option<ModelFiles>,
    started: Option<Started>,
}

/// The runtime `request` asks for: the one already started when it matches (same backend,
/// weights and faults, and not degraded), or a new one (after
/// [`ModelFiles::ensure_weights`]).
async fn runtime_for<'a>(
    files: &ModelFiles,
    started: &'a mut Option<Started>,
    request: &GenerateRequest,
    progress: &mut impl FnMut(String),
) -> Result<&'a mut Runtime, String> {
    let reusable = started.as_ref().is_some_and(|s| {
        s.backend == request.backend
            && s.precision == request.precision
            && s.faults == request.faults
            && s.runtime.backend().degraded_reason.is_none()
    });
    if !reusable {
        *started = None;
        progress(match request.backend {
            BackendChoice::Gpu => format!(
                "Starting WebGPU: requesting a device, uploading the {} weights and checking them against the CPU reference…",
                request.precision
            ),
            BackendChoice::Cpu => "Preparing the CPU reference…".to_string(),
        });
        let runtime = files.start(request).await?;
        *started = Some(Started {
            backend: request.backend,
            precision: request.precision,
            faults: request.faults,
            runtime,
        });
    }
    started
        .as_mut()
        .map(|s| &mut s.runtime)
        .ok_or_else(|| "The backend did not start.".to_string())
}

/// One job: load what is missing, start (or reuse) the runtime, then generate (emitting
/// each step), compute a prompt's logits or run the exercise. `cancelled` is asked before
/// every model call.
pub async fn run(
    state: &mut Engine,
    job: Job,
    emit: &dyn Fn(Event),
    cancelled: &dyn Fn() -> bool,
) -> Result<(), String> {
    let fetch = async |path: &str| {
        let shown = |got, total| {
            emit(Event::Download {
                file: path.to_string(),
                got,
                total,
            })
        };
        fetch_model_file_with_progress(path, &shown).await
    };
    let mut progress = |what: String| emit(Event::Working(what));

    let began = now_ms();
    if state.files.is_none() {
        state.files = Some(load_model(&fetch, &mut progress).await?);
    }
    let Some(files) = state.files.as_mut() else {
        return Err("The model files are not loaded.".to_string());
    };
    let request: GenerateRequest = match job {
        Job::Fresh { form } => GenerateForm::from_query(borrowed(&form)).parse()?,
        Job::Replay { record, backend } => {
            let backend = backend.trim().parse().map_err(|_| {
                format!("The replay asks for backend \"{backend}\", which is not gpu or cpu.")
            })?;
            replay_request(&record, &files.config, backend)?
        }
        Job::PromptLogits { prompt } => {
            let logits = prompt_logits(files, &prompt, &fetch, &mut progress).await?;
            emit(Event::Logits(logits));
            return Ok(());
        }
        Job::Exercise { form } => {
            // Every field of the exercise is text, so its pairs alone hold no problem; the
            // page checked the same form before it sent it, so any problem here is the
            // job's own, said in the form's words.
            let (form, _) = ExerciseForm::from_pairs(borrowed(&form));
            let exercise = form.check().map_err(|problems| {
                problems
                    .iter()
                    .map(|p| p.message.as_str())
                    .collect::<Vec<_>>()
                    .join(" ")
            })?;
            // Only the backend, precision and faults of a request decide what starts.
            let request = GenerateForm {
                backend: BackendChoice::Cpu,
                precision: Precision::F32,
                ..GenerateForm::default()
            }
            .parse()?;
            files
                .ensure_weights(request.precision, request.backend, &fetch, &mut progress)
                .await?;
            let runtime = runtime_for(files, &mut state.started, &request, &mut progress).await?;
            emit(Event::Generating);
            let finished = run_exercise(
                runtime,
                &files.tokenizer,
                &exercise,
                &mut WorkerClock,
                cancelled,
                &mut |p| emit(Event::ExerciseRun(p)),
                // Every step: a Cancel that arrived during it is seen before the next.
                &async || yield_to_events().await,
            )
            .await?;
            emit(Event::ExerciseDone(Box::new(finished)));
            return Ok(());
        }
        Job::Cancel => return Err("Nothing to run.".to_string()),
    };
    if request.inject_panic {
        panic!("the URL's fault=panic asked the model worker to panic");
    }
    files
        .ensure_weights(request.precision, request.backend, &fetch, &mut progress)
        .await?;
    let loaded = now_ms();
    let runtime = runtime_for(files, &mut state.started, &request, &mut progress).await?;
    let ready = now_ms();
    let on_gpu = runtime.backend().name == BackendKind::WebGpu;
    let adapter = if on_gpu { adapter_info().await } else { None };
    emit(Event::Backend {
        backend: runtime.backend().clone(),
        adapter: adapter.clone(),
    });
    emit(Event::Generating);

    let config = with_eos(request.config, &files.tokenizer);
    let eos = config.policy.eos_token;
    let tokenizer = &files.tokenizer;
    let mut decoder = StreamDecoder::new();
    let readbacks_before = runtime.readbacks();
    let mut gpu_sum = GpuTimings::default();
    let mut gpu_steps = 0usize;
    let mut shown_backend = runtime.backend().clone();
    let record = generate(
        runtime,
        tokenizer,
        &config,
        &mut WorkerClock,
        cancelled,
        &mut |step, runtime| {
            let text = if Some(step.token) != eos {
                decoder.push(tokenizer, step.token).unwrap_or_default()
            } else {
                String::new()
            };
            emit(Event::Step {
                step: Box::new(step.clone()),
                text,
            });
            // Decode steps only: the prefill runs the whole prompt.
            if let (Some(gpu), true) = (runtime.gpu(), step.step > 0) {
                let t = gpu.timings();
                gpu_sum.dispatch_ms += t.dispatch_ms;
                gpu_sum.gpu_ms += t.gpu_ms;
                gpu_sum.readback_ms += t.readback_ms;
                gpu_steps += 1;
            }
            if runtime.backend() != &shown_backend {
                shown_backend = runtime.backend().clone();
                emit(Event::Backend {
                    backend: shown_backend.clone(),
                    adapter: None,
                });
            }
        },
        // Every step: the worker sees a Cancel that arrived during it before the next.
        &async || yield_to_events().await,
    )
    .await?;
    let tail = decoder.finish();
    if !tail.is_empty() {
        emit(Event::Step {
            step: Box::new(StepRecord {
                text: String::new(),
                ..record
                    .steps
                    .last()
                    .cloned()
                    .ok_or("A run with no steps left text over.")?
            }),
            text: tail,
        });
    }
    let speed = speed(&record);
    let n = gpu_steps as f64;
    let figures = RunFigures {
        load_ms: loaded - began,
        start_ms: ready - loaded,
        ttft_ms: speed.ttft_ms,
        decode_tok_s: speed.decode_tok_s,
        gpu: (gpu_steps > 0).then(|| GpuTimings {
            dispatch_ms: gpu_sum.dispatch_ms / n,
            gpu_ms: gpu_sum.gpu_ms / n,
            readback_ms: gpu_sum.readback_ms / n,
        }),
        readbacks: runtime.readbacks().saturating_sub(readbacks_before),
    };
    emit(Event::Finished {
        record: Box::new(record),
        figures,
    });
    Ok(())
}
