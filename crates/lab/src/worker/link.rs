//! The page's handle on the model worker ([`crate::worker::host`]): starts it, sends it [`Job`]s
//! and hands its [`Event`]s to the panel, both as the typed values of [`crate::worker::protocol`].
//! Dropping the handle ends the worker. [`PanelWorker`] is the handle a panel keeps.

use std::cell::RefCell;
use std::rc::Rc;

use leptos::prelude::*;
use leptos::task::spawn_local;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

use crate::worker::protocol::{from_js, to_js};
use crate::worker::protocol::{Event, Job};

/// Trunk's loader for the worker build (`data-loader-shim`), beside the page.
const WORKER_SCRIPT: &str = "worker_loader.js";

pub struct ModelWorker {
    worker: web_sys::Worker,
    /// Jobs sent before the worker said [`Event::Ready`] (a message that arrives while its
    /// wasm still compiles has no listener and would be lost); `None` once it is ready.
    waiting: Rc<RefCell<Option<Vec<JsValue>>>>,
    _on_message: Closure<dyn FnMut(web_sys::MessageEvent)>,
    _on_error: Closure<dyn FnMut(web_sys::ErrorEvent)>,
}

impl ModelWorker {
    /// Starts the worker; `on_event` receives each event it posts, and a failure to load it
    /// as [`Event::Failed`].
    pub fn start(on_event: impl Fn(Event) + Clone + 'static) -> Result<ModelWorker, String> {
        let worker = web_sys::Worker::new(WORKER_SCRIPT)
            .map_err(|e| format!("The model worker could not start: {e:?}."))?;
        let deliver = on_event.clone();
        let waiting = Rc::new(RefCell::new(Some(Vec::new())));
        let (held, target) = (waiting.clone(), worker.clone());
        let on_message = Closure::<dyn FnMut(web_sys::MessageEvent)>::new(
            move |message: web_sys::MessageEvent| {
                let event = from_js(&message.data()).unwrap_or_else(|e| {
                    Event::Failed(format!(
                        "The model worker sent a message the page cannot read: {e}."
                    ))
                });
                if event == Event::Ready {
                    for job in held.borrow_mut().take().unwrap_or_default() {
                        let _ = target.post_message(&job);
                    }
                    return;
                }
                deliver(event)
            },
        );
        let on_error =
            Closure::<dyn FnMut(web_sys::ErrorEvent)>::new(move |error: web_sys::ErrorEvent| {
                on_event(Event::Failed(format!(
                    "The model worker failed: {}.",
                    error.message().trim_end_matches('.')
                )))
            });
        worker.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
        worker.set_onerror(Some(on_error.as_ref().unchecked_ref()));
        Ok(ModelWorker {
            worker,
            waiting,
            _on_message: on_message,
            _on_error: on_error,
        })
    }

    pub fn send(&self, job: &Job) -> Result<(), String> {
        let value =
            to_js(job).map_err(|e| format!("A job could not be sent to the model worker: {e}."))?;
        if let Some(held) = self.waiting.borrow_mut().as_mut() {
            held.push(value);
            return Ok(());
        }
        self.worker
            .post_message(&value)
            .map_err(|e| format!("The model worker did not take the job: {e:?}."))
    }
}

impl Drop for ModelWorker {
    fn drop(&mut self) {
        // Unhook first: an event already queued (a dying worker's error) must not call the
        // closures this drop frees.
        self.worker.set_onmessage(None);
        self.worker.set_onerror(None);
        self.worker.terminate();
    }
}

/// A panel's model worker: started with the panel's first job, ended with the panel, and
/// dropped after a panic so that the next job starts a new one.
#[derive(Clone, Copy)]
pub struct PanelWorker(StoredValue<Option<ModelWorker>, LocalStorage>);

impl PanelWorker {
    pub fn new() -> PanelWorker {
        PanelWorker(StoredValue::new_local(None))
    }

    /// Sends `job`, first starting the worker (its events go to `on_event`) when there is
    /// none.
    pub fn send(self, job: &Job, on_event: impl Fn(Event) + Clone + 'static) -> Result<(), String> {
        if self.0.with_value(Option::is_none) {
            let started = ModelWorker::start(on_event)?;
            self.0.set_value(Some(started));
        }
        self.0
            .try_with_value(|w| w.as_ref().map(|w| w.send(job)))
            .flatten()
            .unwrap_or_else(|| Err("The model worker is not running.".to_string()))
    }

    /// Asks the run in progress, if any, to stop before its next model call.
    pub fn cancel(self) {
        let _ = self
            .0
            .try_with_value(|w| w.as_ref().map(|w| w.send(&Job::Cancel)));
    }

    /// Ends the worker after [`Event::Panicked`]. That event arrives in one of the worker's
    /// own callbacks, which must not be freed while it runs: the drop waits for a later task.
    pub fn discard(self) {
        spawn_local(async move {
            let _ = self.0.try_update_value(|w| *w = None);
        });
    }
}
