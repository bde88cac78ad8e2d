//! The page's handle on the model worker ([`crate::worker`]): starts it, sends it [`Job`]s
//! and hands its [`Event`]s to the panel, both as typed values through `serde-wasm-bindgen`.
//! Dropping the handle ends the worker.

use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

use crate::runner::{Event, Job};
use crate::worker::to_js;

/// Trunk's loader for the worker build (`data-loader-shim`), beside the page.
const WORKER_SCRIPT: &str = "worker_loader.js";

pub struct ModelWorker {
    worker: web_sys::Worker,
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
        let on_message = Closure::<dyn FnMut(web_sys::MessageEvent)>::new(
            move |message: web_sys::MessageEvent| {
                deliver(
                    serde_wasm_bindgen::from_value(message.data()).unwrap_or_else(|e| {
                        Event::Failed(format!(
                            "The model worker sent a message the page cannot read: {e}."
                        ))
                    }),
                )
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
            _on_message: on_message,
            _on_error: on_error,
        })
    }

    pub fn send(&self, job: &Job) -> Result<(), String> {
        let value =
            to_js(job).map_err(|e| format!("A job could not be sent to the model worker: {e}."))?;
        self.worker
            .post_message(&value)
            .map_err(|e| format!("The model worker did not take the job: {e:?}."))
    }
}

impl Drop for ModelWorker {
    fn drop(&mut self) {
        self.worker.terminate();
    }
}
