//! The seam between the page and the lab's Web Workers, whichever worker it is: the model
//! worker ([`crate::worker`]), the capacity planner ([`crate::planner`]), the observation
//! worker ([`crate::observer`]) and the importer ([`crate::importer`]). Each worker's own protocol module names what crosses (its
//! jobs and events) and implements [`Protocol`]; this module is how it crosses, and knows no
//! worker. On the page, [`WorkerLink`] starts a worker, sends it jobs and hands its events to
//! the panel as typed values; dropping the handle ends the worker. A worker `index.html`
//! started before the page's wasm had loaded (the model worker, when the URL runs Generate at
//! once) is adopted instead, with what it posted meanwhile. [`PanelLink`] is the
//! handle a panel keeps. [`message`] is the encoding both sides use (JSON text); [`scope`]
//! is a worker's own side of the link, [`fetch`] streams a file from the page's origin
//! into a worker, and [`error`] says why something did not cross.

pub(crate) mod error;
#[cfg(any(feature = "worker", feature = "observer", feature = "importer"))]
pub(crate) mod fetch;
pub(crate) mod message;
#[cfg(any(
    feature = "worker",
    feature = "planner",
    feature = "observer",
    feature = "importer"
))]
pub(crate) mod scope;

use std::cell::RefCell;
use std::marker::PhantomData;
use std::rc::Rc;

use leptos::prelude::*;
use leptos::task::spawn_local;
use serde::de::DeserializeOwned;
use serde::Serialize;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

use crate::link::error::LinkError;
use crate::link::message::{from_js, to_js};

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

/// Declares a worker's protocol: its marker type (for [`WorkerLink`]), what the page sends
/// and what the worker posts back, Trunk's loader script, the worker's name in the page's
/// sentences, the event that says it is ready, and how a failure the page found becomes an
/// event.
macro_rules! protocol {
    (
        $(#[$doc:meta])*
        $marker:ident: $job:ty => $event:ty, $script:literal, $name:literal,
        ready: $ready:pat, failed: $failed:expr
    ) => {
        $(#[$doc])*
        pub struct $marker;

        impl $crate::link::Protocol for $marker {
            type Job = $job;
            type Event = $event;
            const SCRIPT: &'static str = $script;
            const NAME: &'static str = $name;

            fn is_ready(event: &$event) -> bool {
                matches!(event, $ready)
            }

            fn failed(message: String) -> $event {
                ($failed)(message)
            }
        }
    };
}
pub(crate) use protocol;

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
    pub fn start(
        on_event: impl Fn(P::Event) + Clone + 'static,
    ) -> Result<WorkerLink<P>, LinkError> {
        let early = early::<P>();
        let worker = match &early {
            Some(early) => early.worker.clone(),
            None => web_sys::Worker::new(P::SCRIPT).map_err(|e| LinkError::Start {
                name: P::NAME,
                thrown: format!("{e:?}"),
            })?,
        };
        let deliver = on_event.clone();
        let waiting = Rc::new(RefCell::new(Some(Vec::new())));
        let (held, target) = (waiting.clone(), worker.clone());
        let receive = move |data: JsValue| {
            let event = from_js(&data).unwrap_or_else(|e| {
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
        };
        let failed = move |message: String| {
            on_event(P::failed(format!(
                "The {} failed: {}.",
                P::NAME,
                message.trim_end_matches('.')
            )))
        };
        let (received, fail) = (receive.clone(), failed.clone());
        let on_message = Closure::<dyn FnMut(web_sys::MessageEvent)>::new(
            move |message: web_sys::MessageEvent| received(message.data()),
        );
        let on_error =
            Closure::<dyn FnMut(web_sys::ErrorEvent)>::new(move |error: web_sys::ErrorEvent| {
                fail(error.message())
            });
        worker.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
        worker.set_onerror(Some(on_error.as_ref().unchecked_ref()));
        // What the early worker said before the page listened, in order, before anything
        // it says next (which cannot arrive before this task ends).
        if let Some(early) = early {
            early.messages.iter().for_each(receive);
            early
                .errors
                .iter()
                .for_each(|e| failed(e.as_string().unwrap_or_default()));
        }
        Ok(WorkerLink {
            worker,
            waiting,
            _on_message: on_message,
            _on_error: on_error,
            _protocol: PhantomData,
        })
    }

    pub fn send(&self, job: &P::Job) -> Result<(), LinkError> {
        let value = to_js(job).map_err(|e| LinkError::Send {
            name: P::NAME,
            source: Box::new(e),
        })?;
        if let Some(held) = self.waiting.borrow_mut().as_mut() {
            held.push(value);
            return Ok(());
        }
        self.worker
            .post_message(&value)
            .map_err(|e| LinkError::Refused {
                name: P::NAME,
                thrown: format!("{e:?}"),
            })
    }
}

/// A worker `index.html` started before the page's wasm loaded, and what it posted (and
/// the errors it raised) before the page listened.
struct Early {
    worker: web_sys::Worker,
    messages: js_sys::Array,
    errors: js_sys::Array,
}

/// The global `index.html`'s early start leaves: `{ script, worker, messages, errors }`.
const EARLY: &str = "decodeLabEarlyWorker";

/// The worker `index.html` started early for `P`'s script, taken (the first link to ask
/// adopts it; later ones start their own), or `None`.
fn early<P: Protocol>() -> Option<Early> {
    let global = js_sys::global();
    let key = JsValue::from_str(EARLY);
    let found = js_sys::Reflect::get(&global, &key)
        .ok()
        .filter(|found| found.is_object())?;
    let field = |name: &str| js_sys::Reflect::get(&found, &JsValue::from_str(name)).ok();
    if field("script")?.as_string()? != P::SCRIPT {
        return None;
    }
    let early = Early {
        worker: field("worker")?.dyn_into().ok()?,
        messages: field("messages")?.dyn_into().ok()?,
        errors: field("errors")?.dyn_into().ok()?,
    };
    js_sys::Reflect::delete_property(global.unchecked_ref::<js_sys::Object>(), &key).ok()?;
    Some(early)
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
    ) -> Result<(), LinkError> {
        if self.0.with_value(Option::is_none) {
            let started = WorkerLink::start(on_event)?;
            self.0.set_value(Some(started));
        }
        self.0
            .try_with_value(|w| w.as_ref().map(|w| w.send(job)))
            .flatten()
            .unwrap_or(Err(LinkError::NotRunning { name: P::NAME }))
    }

    /// Sends `job` to the worker if one is running, and starts none: a word about the job
    /// in progress (cancel it), which means nothing to a worker that has none.
    pub fn tell(self, job: &P::Job) {
        let _ = self.0.try_with_value(|w| w.as_ref().map(|w| w.send(job)));
    }

    /// Ends the worker after it panicked. That news arrives in one of the worker's own
    /// callbacks, which must not be freed while it runs: the drop waits for a later task.
    pub fn discard(self) {
        spawn_local(async move {
            let _ = self.0.try_update_value(|w| *w = None);
        });
    }

    /// [`PanelLink::discard`]s the worker after its panic (`message`) and says so, then
    /// `next`: what starts a new one.
    pub fn panicked(self, message: &str, next: &str) -> String {
        self.discard();
        format!(
            "The {} hit an internal error and stopped: {message}. {next}",
            P::NAME
        )
    }
}
