//! A worker's side of its link to the page, shared by the model worker
//! ([`crate::worker::host`]) and the planner ([`crate::planner::host`]): its global scope,
//! posting a typed message to the page, and the panic report the page turns into a sentence
//! before it starts another worker.

use serde::Serialize;
use wasm_bindgen::JsCast;

use crate::link::message::to_js;

/// The worker's global scope; `None` outside a dedicated worker.
pub(crate) fn scope() -> Option<web_sys::DedicatedWorkerGlobalScope> {
    js_sys::global().dyn_into().ok()
}

/// Posts `message` to the page as its JSON text (see [`to_js`]).
pub(crate) fn post<T: Serialize>(message: &T) {
    if let (Some(scope), Ok(value)) = (scope(), to_js(message)) {
        let _ = scope.post_message(&value);
    }
}

/// Reports each panic on the console and to the page, as the message `panicked` makes of it,
/// before the worker dies.
pub(crate) fn report_panics<T: Serialize + 'static>(panicked: fn(String) -> T) {
    std::panic::set_hook(Box::new(move |info| {
        console_error_panic_hook::hook(info);
        post(&panicked(info.to_string()));
    }));
}
