//! The observation worker's global scope: it takes an [`ObserveJob`], fetches the language
//! identifier and the logs from the page's origin (the learner's files through the page's
//! object URLs), streams the run lines into an [`observe::Observation`] with a progress
//! report every [`PROGRESS_LINES`] lines, and posts the formatted display
//! ([`crate::observer::display`]) or the reason it could not. A panic is posted as
//! [`ObserverEvent::Panicked`] before the worker dies.

use langid::LangId;
use observe::{DriftRule, Observation, Outcomes, RunLineError};
use serde::Deserialize;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

use crate::link::fetch::{fetch_chunks, MODEL_DIR};
use crate::link::message::from_js;
use crate::link::scope::{post, report_panics, scope};
use crate::observer::display::{observe_display, AlternativesTable, LineSplitter};
use crate::observer::error::ObserverError;
use crate::observer::protocol::{Input, ObserveDisplay, ObserveJob, ObserverEvent, Source};

/// Run lines between two progress reports.
pub const PROGRESS_LINES: u64 = 2_000;

/// The shipped demo's manifest, beside the model: its files and the version it was measured
/// against (`decode-lab traffic`'s first version).
const DEMO: &str = "demo/traffic.json";
/// The alternatives' table, as `decode-lab eval --alternatives --lab-table` wrote it.
const ALTERNATIVES: &str = "alternatives.json";
/// The language identifier, as `decode-lab langid train` wrote it.
const LANGID: &str = "langid.bin";

#[derive(Deserialize)]
struct Demo {
    runs: String,
    outcomes: String,
    baseline: String,
}

/// Installs the panic report and the message handler; the worker then waits for jobs.
pub fn start() {
    report_panics(ObserverEvent::Panicked);
    let Some(scope) = scope() else {
        return;
    };
    let on_message =
        Closure::<dyn FnMut(web_sys::MessageEvent)>::new(move |message: web_sys::MessageEvent| {
            let job: ObserveJob = match from_js(&message.data()) {
                Ok(job) => job,
                Err(e) => {
                    post(&ObserverEvent::Failed {
                        id: None,
                        message: format!("The observation worker could not read a message: {e}."),
                    });
                    return;
                }
            };
            wasm_bindgen_futures::spawn_local(async move {
                let id = job.id;
                post(&match observe(job).await {
                    Ok(display) => ObserverEvent::Observed {
                        id,
                        display: Box::new(display),
                    },
                    Err(e) => ObserverEvent::Failed {
                        id: Some(id),
                        message: e.to_string(),
                    },
                });
            });
        });
    scope.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
    on_message.forget();
    post(&ObserverEvent::Ready);
}

/// A file of the model's folder, whole.
async fn model_file(name: &str) -> Result<Vec<u8>, ObserverError> {
    let mut bytes = Vec::new();
    fetch_chunks(
        &format!("{MODEL_DIR}/{name}"),
        name,
        false,
        &mut |chunk, _| bytes.extend_from_slice(chunk),
    )
    .await?;
    Ok(bytes)
}

/// A source's text, whole (outcome rows are small beside the runs).
async fn text(source: &Source) -> Result<String, ObserverError> {
    let mut bytes = Vec::new();
    fetch_chunks(
        &source.url,
        &source.name,
        gzipped(source),
        &mut |chunk, _| bytes.extend_from_slice(chunk),
    )
    .await?;
    String::from_utf8(bytes).map_err(|e| ObserverError::NotUtf8 {
        name: source.name.clone(),
        source: e,
    })
}

fn gzipped(source: &Source) -> bool {
    source.name.ends_with(".gz")
}

/// The observation `job` asks for, formatted.
async fn observe(job: ObserveJob) -> Result<ObserveDisplay, ObserverError> {
    let id = job.id;
    let (runs, outcomes, baseline) = match job.input {
        Input::Files { runs, outcomes } => (runs, outcomes, job.baseline),
        Input::Demo => {
            let manifest = model_file(DEMO).await?;
            let demo: Demo = serde_json::from_slice(&manifest)
                .map_err(|source| ObserverError::Json { file: DEMO, source })?;
            let beside = |name: &str| Source {
                name: name.to_string(),
                url: format!("{MODEL_DIR}/demo/{name}"),
            };
            (
                vec![beside(&demo.runs)],
                vec![beside(&demo.outcomes)],
                job.baseline.or(Some(demo.baseline)),
            )
        }
    };
    let identifier =
        LangId::from_bytes(&model_file(LANGID).await?).map_err(|source| ObserverError::LangId {
            file: LANGID,
            source,
        })?;
    let mut outcome_text = String::new();
    for source in &outcomes {
        outcome_text += &text(source).await?;
        outcome_text.push('\n');
    }
    let outcomes = Outcomes::parse(&outcome_text, f64::INFINITY).map_err(|source| {
        let names: Vec<&str> = outcomes.iter().map(|s| s.name.as_str()).collect();
        ObserverError::Outcomes {
            names: names.join(", "),
            source,
        }
    })?;
    let mut observation = Observation::new(&identifier, outcomes, None);
    for source in &runs {
        let mut lines = LineSplitter::default();
        let mut next_report = PROGRESS_LINES;
        let add = |observation: &mut Observation, number: u64, line: Result<&str, RunLineError>| {
            let read = line.and_then(observe::read_run);
            observation.add_read(&source.name, number as usize, read);
        };
        fetch_chunks(
            &source.url,
            &source.name,
            gzipped(source),
            &mut |chunk, _| {
                lines.feed(chunk, &mut |n, line| add(&mut observation, n, line));
                if lines.read() >= next_report {
                    next_report += PROGRESS_LINES;
                    post(&ObserverEvent::Progress {
                        id,
                        source: source.name.clone(),
                        lines: lines.read(),
                    });
                }
            },
        )
        .await?;
        lines.finish(&mut |n, line| add(&mut observation, n, line));
    }
    let report = observation
        .finish(baseline.as_deref(), &DriftRule::default())
        .map_err(ObserverError::Report)?;
    let alternatives = model_file(ALTERNATIVES).await.and_then(|bytes| {
        serde_json::from_slice::<AlternativesTable>(&bytes).map_err(|source| ObserverError::Json {
            file: ALTERNATIVES,
            source,
        })
    });
    Ok(observe_display(&report, alternatives))
}
