//! The Web Worker that runs the model, so the page stays responsive while it generates.
//! It takes [`Job`]s from the page and posts [`Event`]s back, both as the typed values of
//! [`crate::worker::protocol`]; a Cancel that arrives during a run is seen before the next model
//! call. A panic is posted as [`Event::Panicked`] before the worker dies; the page then
//! starts a new one.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

use crate::link::message::from_js;
use crate::link::scope::{post, report_panics, scope};
use crate::worker::protocol::{Event, Job};
use crate::worker::runner::{run, Engine};
use crate::worker::stepping::step;

/// Installs the panic report and the message handler; the worker then waits for jobs.
pub fn start() {
    report_panics(Event::Panicked);
    let Some(scope) = scope() else {
        return;
    };
    let engine = Rc::new(RefCell::new(Some(Engine::default())));
    let cancel = Rc::new(Cell::new(false));
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
                cancel.set(true);
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
            // One run at a time: the page disables its buttons while one is out.
            let Some(mut state) = engine.borrow_mut().take() else {
                post(&Event::Failed("A run is already in progress.".to_string()));
                return;
            };
            cancel.set(false);
            let (engine, cancel) = (engine.clone(), cancel.clone());
            wasm_bindgen_futures::spawn_local(async move {
                let result = run(&mut state, job, &|e| post(&e), &|| cancel.get()).await;
                if let Err(e) = result {
                    post(&Event::Failed(e.to_string()));
                }
                *engine.borrow_mut() = Some(state);
            });
        });
    scope.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
    on_message.forget();
    post(&Event::Ready);
}
