//! The model's side of the lab, as it runs in the Web Worker: a [`Job`] in, a stream of
//! [`Event`]s out. Every panel that runs the model (Generate, the decoding step's model
//! logits, Your turn, Compare) sends its work here, so the page's own wasm carries no model, no
//! tokenizer and no WebGPU runtime. It keeps what survives between jobs (the checked
//! model files and the started runtime) and knows nothing of the DOM or of Leptos: the
//! page draws the events, the worker posts them (see [`crate::worker::host`]).
//!
//! The job and the events are the typed values of [`crate::worker::protocol`].

use gpu::{Faults, Promotion, Runtime};
use policy::generate::StepRecord;
use policy::{BackendChoice, BackendKind, Precision};
use tokenizer::StreamDecoder;

use crate::js::now_ms;
use crate::worker::browser::{
    adapter_info, fetch_model_file_with_progress, yield_to_events, WorkerClock,
};
use crate::worker::comparison::run_compare;
use crate::worker::error::WorkerError;
use crate::worker::exercise::run_exercise;
use crate::worker::generation::{
    generate, load_model, parse_record, prompt_logits, replay_request, replay_verdict, speed,
    with_breakers, with_eos, ModelFiles, Start,
};
use crate::worker::protocol::{Event, GpuTimings, Job, RunFigures};

/// The runtime a job can reuse: the same [`Start`], and not degraded.
struct Started {
    start: Start,
    runtime: Runtime,
}

/// What survives between runs: the checked files and the started runtime.
#[derive(Default)]
pub struct Engine {
    files: Option<ModelFiles>,
    started: Option<Started>,
}

impl Engine {
    /// Fetches and checks what almost every job needs (the config, the tokenizer and the f32
    /// weights, which the CPU reference and the GPU's fallback run on), posting the download's
    /// progress with `emit`. A failure is left to the job that needs the files, which fetches
    /// them again and says why.
    pub async fn warm(&mut self, emit: &dyn Fn(Event)) {
        let fetch = async |path: &str| fetch_shown(path, emit).await;
        if self.files.is_none() {
            self.files = load_model(&fetch, &mut |_| {}).await.ok();
        }
        if let Some(files) = self.files.as_mut() {
            let _ = files
                .ensure_weights(Precision::F32, BackendChoice::Cpu, &fetch, &mut |_| {})
                .await;
        }
    }
}

/// One model file, fetched from the page's origin with its progress posted as
/// [`Event::Download`]s.
async fn fetch_shown(path: &str, emit: &dyn Fn(Event)) -> Result<Vec<u8>, WorkerError> {
    let shown = |got, total| {
        emit(Event::Download {
            file: path.to_string(),
            got,
            total,
        })
    };
    fetch_model_file_with_progress(path, &shown)
        .await
        .map_err(WorkerError::Fetch)
}

/// The runtime `start` asks for: the one already started when it matches and is not
/// degraded, or a new one (after [`ModelFiles::ensure_weights`]).
async fn runtime_for<'a>(
    files: &ModelFiles,
    started: &'a mut Option<Started>,
    start: Start,
    progress: &mut impl FnMut(String),
) -> Result<&'a mut Runtime, WorkerError> {
    let reusable = started
        .as_ref()
        .is_some_and(|s| s.start == start && s.runtime.backend().degraded_reason.is_none());
    if !reusable {
        *started = None;
        progress(
            if start.backend.tries_gpu() {
                "Starting on the CPU reference while WebGPU starts and checks its canary beside it…"
            } else {
                "Preparing the CPU reference…"
            }
            .to_string(),
        );
        let runtime = files.start(start)?;
        *started = Some(Started { start, runtime });
    }
    started
        .as_mut()
        .map(|s| &mut s.runtime)
        .ok_or(WorkerError::NotStarted)
}

/// The f32 CPU reference, with its weights loaded: what the jobs that run many seeds
/// (Your turn, Compare) run on, whatever the Generate panel chose.
async fn reference_runtime<'a>(
    files: &mut ModelFiles,
    started: &'a mut Option<Started>,
    fetch: &impl AsyncFn(&str) -> Result<Vec<u8>, WorkerError>,
    progress: &mut impl FnMut(String),
) -> Result<&'a mut Runtime, WorkerError> {
    let start = Start {
        backend: BackendChoice::Cpu,
        precision: Precision::F32,
        faults: Faults::default(),
    };
    files
        .ensure_weights(start.precision, start.backend, fetch, progress)
        .await?;
    runtime_for(files, started, start, progress).await
}

/// One job: load what is missing, start (or reuse) the runtime, then generate (emitting
/// each step), compute a prompt's logits or run the exercise. `cancelled` is asked before
/// every model call.
pub async fn run(
    state: &mut Engine,
    job: Job,
    emit: &dyn Fn(Event),
    cancelled: &dyn Fn() -> bool,
) -> Result<(), WorkerError> {
    let fetch = async |path: &str| fetch_shown(path, emit).await;
    let mut progress = |what: String| emit(Event::Working(what));
    // Awaited after every step of every job, so a Cancel that arrived during a step is seen
    // before the next; one closure, so the generation loop is compiled once for all jobs.
    let pause = async || yield_to_events().await;

    // A record to replay is read before anything loads: a file that is not one says so at once.
    let recorded = match &job {
        Job::Replay { record, .. } => {
            let recorded = parse_record(record)?;
            emit(Event::Replaying(Box::new(recorded.clone())));
            Some(recorded)
        }
        _ => None,
    };
    let began = now_ms();
    if state.files.is_none() {
        state.files = Some(load_model(&fetch, &mut progress).await?);
    }
    let Some(files) = state.files.as_mut() else {
        return Err(WorkerError::FilesNotLoaded);
    };
    let (config, start) = match job {
        Job::Generate(request) => {
            if request.inject_panic {
                panic!("the URL's fault=panic asked the model worker to panic");
            }
            let config = with_breakers(
                request.config.clone(),
                &request.dry_breakers,
                &files.tokenizer,
            );
            (config, Start::of(&request)?)
        }
        Job::Replay { backend, .. } => match &recorded {
            Some(recorded) => replay_request(recorded, &files.config, backend)?,
            None => return Err(WorkerError::RecordNotRead),
        },
        Job::PromptLogits { prompt } => {
            let logits = prompt_logits(files, &prompt, &fetch, &mut progress).await?;
            emit(Event::Logits(logits));
            return Ok(());
        }
        Job::Exercise(exercise) => {
            let runtime =
                reference_runtime(files, &mut state.started, &fetch, &mut progress).await?;
            emit(Event::Generating);
            let finished = run_exercise(
                runtime,
                &files.tokenizer,
                &exercise,
                &mut WorkerClock,
                cancelled,
                &mut |p| emit(Event::ExerciseRun(p)),
                &pause,
            )
            .await?;
            emit(Event::ExerciseDone(Box::new(finished)));
            return Ok(());
        }
        Job::Compare(request) => {
            let runtime =
                reference_runtime(files, &mut state.started, &fetch, &mut progress).await?;
            emit(Event::Generating);
            let report = run_compare(
                runtime,
                &files.tokenizer,
                &request,
                &mut WorkerClock,
                cancelled,
                &mut progress,
                &pause,
            )
            .await?;
            emit(Event::Compared(report.map(Box::new)));
            return Ok(());
        }
        Job::Cancel | Job::Step { .. } => return Err(WorkerError::NothingToRun),
    };
    files
        .ensure_weights(start.precision, start.backend, &fetch, &mut progress)
        .await?;
    let loaded = now_ms();
    let runtime = runtime_for(files, &mut state.started, start, &mut progress).await?;
    // A replay moves to the GPU where its record did; a new run as soon as it may.
    runtime.set_promotion(match &recorded {
        Some(recorded) => Promotion::replaying(&recorded.backend),
        None => Promotion::WhenPassed,
    });
    // A canary that passed since the last run: this run is on the GPU from its first step,
    // and the status can name the adapter.
    runtime.poll_start();
    let ready = now_ms();
    let on_gpu = runtime.backend().name == BackendKind::WebGpu;
    let adapter = if on_gpu { adapter_info().await } else { None };
    emit(Event::Backend {
        backend: runtime.backend().clone(),
        adapter: adapter.clone(),
    });
    emit(Event::Generating);

    let config = with_eos(config, &files.tokenizer);
    let policy = config.policy.clone();
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
            let text = if !policy.is_eos(step.token) {
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
            // A change of backend or of reason; not a segment's growing last step.
            let now = runtime.backend();
            if (now.name, &now.degraded_reason, now.segments.len())
                != (
                    shown_backend.name,
                    &shown_backend.degraded_reason,
                    shown_backend.segments.len(),
                )
            {
                shown_backend = runtime.backend().clone();
                emit(Event::Backend {
                    backend: shown_backend.clone(),
                    adapter: None,
                });
            }
        },
        &pause,
    )
    .await?
    .labelled(Some(start.precision), Default::default());
    let tail = decoder.finish();
    if !tail.is_empty() {
        emit(Event::Step {
            step: Box::new(StepRecord {
                text: String::new(),
                ..record
                    .steps
                    .last()
                    .cloned()
                    .ok_or(WorkerError::TailWithoutSteps)?
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
        gpu_start: runtime
            .start_phases()
            .map(|p| [p.device_ms, p.upload_ms, p.canary_ms]),
    };
    let verdict = recorded.map(|recorded| replay_verdict(&recorded, &record));
    emit(Event::Finished {
        record: Box::new(record),
        figures,
    });
    if let Some((identical, words)) = verdict {
        emit(Event::Verdict { identical, words });
    }
    Ok(())
}
