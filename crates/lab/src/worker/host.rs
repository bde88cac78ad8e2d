//! The Web Worker that runs the model, so the page stays responsive while it generates.
//! It takes [`Job`]s from the page and posts [`Event`]s back, both as the typed values of
//! [`crate::worker::protocol`]; a Cancel that arrives during a run is seen before the next model
//! call. A panic is posted as [`Event::Panicked`] before the worker dies; the page then
//! starts a new one. The worker `index.html` starts early for a `run=1` page is named
//! [`WARM`]: it fetches and checks the model files before any job asks (so the run finds them
//! there). Other model workers fetch what their first job needs: the decoding step's worker
//! may never need the model at all.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

use crate::link::message::from_js;
use crate::link::scope::{post, report_panics, scope};
use crate::worker::protocol::{Event, Job};
use crate::worker::runner::{run, Engine};
use crate::worker::stepping::step;

/// What the worker keeps between messages: the engine (taken by the job that runs), whether
/// a Cancel arrived, and the jobs that arrived while the files were fetched before any job
/// (`None` once that is done, and in a worker that does not warm).
struct Host {
    engine: RefCell<Option<Engine>>,
    cancel: Cell<bool>,
    held: RefCell<Option<Vec<Job>>>,
}

/// The name `index.html` gives the model worker it starts early (`new Worker(…, { name })`).
const WARM: &str = "warm";

/// Installs the panic report and the message handler. A worker named [`WARM`] also fetches
/// and checks the files almost every job needs (the config, the tokenizer and the f32
/// weights: [`Engine::warm`]) before the first job arrives; jobs that arrive meanwhile wait
/// for it.
pub fn start() {
    report_panics(Event::Panicked);
    let Some(scope) = scope() else {
        return;
    };
    let warm = scope.name() == WARM;
    // While warming, the engine is out (as during a run) and the jobs wait in `held`.
    let host = Rc::new(Host {
        engine: RefCell::new((!warm).then(Engine::default)),
        cancel: Cell::new(false),
        held: RefCell::new(warm.then(Vec::new)),
    });
    if warm {
        let warming = host.clone();
        wasm_bindgen_futures::spawn_local(async move {
            let mut engine = Engine::default();
            engine.warm(&|e| post(&e)).await;
            *warming.engine.borrow_mut() = Some(engine);
            for job in warming.held.take().unwrap_or_default() {
                run_job(&warming, job);
            }
        });
    }
    let on_message =
        Closure::<dyn FnMut(web_sys::MessageEvent)>::new(move |message: web_sys::MessageEvent| {
            let job: Job = match from_js(&message.data()) {
                Ok(job) => job,
                Err(e) => {
                    post(&Event::Failed(format!(
                        "The model worker could not read a message: {e}."
                    )));
                    return;
                }
            };
            if job == Job::Cancel {
                host.cancel.set(true);
                return;
            }
            // A decoding step is quick and needs no model: answered at once, beside a run.
            if let Job::Step { id, input } = &job {
                post(&Event::Stepped {
                    id: *id,
                    result: Box::new(step(input)),
                });
                return;
            }
            if let Some(held) = host.held.borrow_mut().as_mut() {
                held.push(job);
                return;
            }
            run_job(&host, job);
        });
    scope.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
    on_message.forget();
    post(&Event::Ready);
}

/// Runs `job` with the engine, or says that a run is in progress (the page disables its
/// buttons while one is out).
fn run_job(host: &Rc<Host>, job: Job) {
    let Some(mut state) = host.engine.borrow_mut().take() else {
        post(&Event::Failed("A run is already in progress.".to_string()));
        return;
    };
    host.cancel.set(false);
    let host = host.clone();
    wasm_bindgen_futures::spawn_local(async move {
        let result = run(&mut state, job, &|e| post(&e), &|| host.cancel.get()).await;
        if let Err(e) = result {
            post(&Event::Failed(e.to_string()));
        }
        *host.engine.borrow_mut() = Some(state);
    });
}
