//! The page's handle on a Web Worker of the lab: the model worker ([`crate::worker::host`]) or
//! the capacity planner ([`crate::planner::host`]). [`WorkerLink`] starts one, sends it jobs
//! and hands its events to the panel, both as the typed values of that worker's
//! [`Protocol`]; dropping the handle ends the worker. [`PanelLink`] is the handle a panel
//! keeps, and [`PanelWorker`] is the model worker's.

use std::cell::RefCell;
use std::marker::PhantomData;
use std::rc::Rc;

use leptos::prelude::*;
use leptos::task::spawn_local;
use serde::de::DeserializeOwned;
use serde::Serialize;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

use crate::worker::protocol::{from_js, to_js, Job, Model};

/// One worker's typed seam, as the page sees it.
pub trait Protocol: 'static {
    /// What the page sends.
    type Job: Serialize;
    /// What the worker posts back.
    type Event: DeserializeOwned + 'static;
    /// Trunk's loader for the worker's build (`data-loader-shim`), beside the page.
    const SCRIPT: &'static str;
    /// The worker in the page's sentences: "The {NAME} failed".
    const NAME: &'static str;
    /// Whether `event` is the worker's first word: its wasm runs and listens.
    fn is_ready(event: &Self::Event) -> bool;
    /// A failure the page found (the worker could not start, or sent what cannot be read).
    fn failed(message: String) -> Self::Event;
}

pub struct WorkerLink<P: Protocol> {
    worker: web_sys::Worker,
    /// Jobs sent before the worker said it is ready (a message that arrives while its wasm
    /// still compiles has no listener and would be lost); `None` once it is ready.
    waiting: Rc<RefCell<Option<Vec<JsValue>>>>,
    _on_message: Closure<dyn FnMut(web_sys::MessageEvent)>,
    _on_error: Closure<dyn FnMut(web_sys::ErrorEvent)>,
    _protocol: PhantomData<P>,
}

impl<P: Protocol> WorkerLink<P> {
    /// Starts the worker; `on_event` receives each event it posts, and a failure to load it
    /// as [`Protocol::failed`].
    pub fn start(on_event: impl Fn(P::Event) + Clone + 'static) -> Result<WorkerLink<P>, String> {
        let worker = web_sys::Worker::new(P::SCRIPT)
            .map_err(|e| format!("The {} could not start: {e:?}.", P::NAME))?;
        let deliver = on_event.clone();
        let waiting = Rc::new(RefCell::new(Some(Vec::new())));
        let (held, target) = (waiting.clone(), worker.clone());
        let on_message = Closure::<dyn FnMut(web_sys::MessageEvent)>::new(
            move |message: web_sys::MessageEvent| {
                let event = from_js(&message.data()).unwrap_or_else(|e| {
                    P::failed(format!(
                        "The {} sent a message the page cannot read: {e}.",
                        P::NAME
                    ))
                });
                if P::is_ready(&event) {
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
                on_event(P::failed(format!(
                    "The {} failed: {}.",
                    P::NAME,
                    error.message().trim_end_matches('.')
                )))
            });
        worker.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
        worker.set_onerror(Some(on_error.as_ref().unchecked_ref()));
        Ok(WorkerLink {
            worker,
            waiting,
            _on_message: on_message,
            _on_error: on_error,
            _protocol: PhantomData,
        })
    }

    pub fn send(&self, job: &P::Job) -> Result<(), String> {
        let value =
            to_js(job).map_err(|e| format!("A job could not be sent to the {}: {e}.", P::NAME))?;
        if let Some(held) = self.waiting.borrow_mut().as_mut() {
            held.push(value);
            return Ok(());
        }
        self.worker
            .post_message(&value)
            .map_err(|e| format!("The {} did not take the job: {e:?}.", P::NAME))
    }
}

impl<P: Protocol> Drop for WorkerLink<P> {
    fn drop(&mut self) {
        // Unhook first: an event already queued (a dying worker's error) must not call the
        // closures this drop frees.
        self.worker.set_onmessage(None);
        self.worker.set_onerror(None);
        self.worker.terminate();
    }
}

/// A panel's worker: started with the panel's first job, ended with the panel, and dropped
/// after a panic so that the next job starts a new one.
pub struct PanelLink<P: Protocol>(StoredValue<Option<WorkerLink<P>>, LocalStorage>);

/// The model worker, as a panel keeps it.
pub type PanelWorker = PanelLink<Model>;

// By hand: a derive would ask the protocol marker to be `Copy` too.
impl<P: Protocol> Clone for PanelLink<P> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<P: Protocol> Copy for PanelLink<P> {}

impl<P: Protocol> PanelLink<P> {
    pub fn new() -> PanelLink<P> {
        PanelLink(StoredValue::new_local(None))
    }

    /// Sends `job`, first starting the worker (its events go to `on_event`) when there is
    /// none.
    pub fn send(
        self,
        job: &P::Job,
        on_event: impl Fn(P::Event) + Clone + 'static,
    ) -> Result<(), String> {
        if self.0.with_value(Option::is_none) {
            let started = WorkerLink::start(on_event)?;
            self.0.set_value(Some(started));
        }
        self.0
            .try_with_value(|w| w.as_ref().map(|w| w.send(job)))
            .flatten()
            .unwrap_or_else(|| Err(format!("The {} is not running.", P::NAME)))
    }

    /// Ends the worker after it panicked. That news arrives in one of the worker's own
    /// callbacks, which must not be freed while it runs: the drop waits for a later task.
    pub fn discard(self) {
        spawn_local(async move {
            let _ = self.0.try_update_value(|w| *w = None);
        });
    }
}

impl PanelWorker {
    /// Asks the run in progress, if any, to stop before its next model call.
    pub fn cancel(self) {
        let _ = self
            .0
            .try_with_value(|w| w.as_ref().map(|w| w.send(&Job::Cancel)));
    }
}
