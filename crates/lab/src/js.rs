//! What every one of the lab's binaries reads of the JavaScript world it runs in, the page
//! or a worker alike: a thrown value's text and the clock.

use wasm_bindgen::{JsCast, JsValue};

/// A thrown or rejected value in words: its text, an `Error`'s message, or its debug form.
pub fn js_text(value: JsValue) -> String {
    value
        .as_string()
        .or_else(|| {
            value
                .dyn_ref::<js_sys::Error>()
                .map(|e| String::from(e.message()))
        })
        .unwrap_or_else(|| format!("{value:?}"))
}

/// Milliseconds since the page's navigation (or the worker's start): `performance.now()`.
pub fn now_ms() -> f64 {
    js_sys::Reflect::get(&js_sys::global(), &"performance".into())
        .ok()
        .and_then(|p| p.dyn_into::<web_sys::Performance>().ok())
        .map_or(0.0, |p| p.now())
}
