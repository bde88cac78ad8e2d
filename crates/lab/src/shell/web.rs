//! The browser's side of the lab, for the page and the model worker: fetching the model's
//! files from the page's own origin, the clock, yielding to the event loop, the adapter's
//! description, downloads, reading a chosen file and the page's panic report.
//!
//! These call into the browser and only work in it; everything they feed is plain data in
//! [`crate::panels::generate::view_model`].

use policy::Clock;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;

use crate::panels::generate::view_model::MODEL_DIR;

fn js_text(value: JsValue) -> String {
    value
        .as_string()
        .or_else(|| {
            value
                .dyn_ref::<js_sys::Error>()
                .map(|e| String::from(e.message()))
        })
        .unwrap_or_else(|| format!("{value:?}"))
}

fn window() -> Result<web_sys::Window, String> {
    web_sys::window().ok_or_else(|| "This page has no window to fetch from.".to_string())
}

/// `fetch(url)` in the page or in a worker, whichever this code runs in.
fn fetch(url: &str) -> Result<js_sys::Promise, String> {
    let global = js_sys::global();
    if let Some(w) = global.dyn_ref::<web_sys::Window>() {
        Ok(w.fetch_with_str(url))
    } else if let Some(w) = global.dyn_ref::<web_sys::WorkerGlobalScope>() {
        Ok(w.fetch_with_str(url))
    } else {
        Err("this scope cannot fetch".to_string())
    }
}

/// The bytes of one model file, fetched from [`MODEL_DIR`] beside the page, telling
/// `progress` the bytes received so far and the total the server announced (if it did) as
/// they arrive.
pub async fn fetch_model_file_with_progress(
    path: &str,
    progress: &dyn Fn(f64, Option<f64>),
) -> Result<Vec<u8>, String> {
    use js_sys::Reflect;
    let url = format!("{MODEL_DIR}/{path}");
    let failed = |why: String| format!("Fetching {url} failed: {why}.");
    let response = JsFuture::from(fetch(&url).map_err(failed)?)
        .await
        .map_err(|e| failed(js_text(e)))?;
    let response: web_sys::Response = response
        .dyn_into()
        .map_err(|_| failed("the answer is not a response".to_string()))?;
    if !response.ok() {
        return Err(failed(format!(
            "HTTP {} {}",
            response.status(),
            response.status_text()
        )));
    }
    let total = response
        .headers()
        .get("content-length")
        .ok()
        .flatten()
        .and_then(|v| v.parse::<f64>().ok());
    let Some(body) = response.body() else {
        let buffer = JsFuture::from(response.array_buffer().map_err(|e| failed(js_text(e)))?)
            .await
            .map_err(|e| failed(js_text(e)))?;
        return Ok(js_sys::Uint8Array::new(&buffer).to_vec());
    };
    let reader = body.get_reader();
    let read: js_sys::Function = Reflect::get(&reader, &"read".into())
        .and_then(|f| f.dyn_into())
        .map_err(|e| failed(js_text(e)))?;
    let mut bytes = Vec::with_capacity(total.unwrap_or(0.0) as usize);
    progress(0.0, total);
    loop {
        let promise: js_sys::Promise = read
            .call0(&reader)
            .and_then(|p| p.dyn_into())
            .map_err(|e| failed(js_text(e)))?;
        let chunk = JsFuture::from(promise)
            .await
            .map_err(|e| failed(js_text(e)))?;
        let done = Reflect::get(&chunk, &"done".into())
            .ok()
            .and_then(|d| d.as_bool())
            .unwrap_or(true);
        if done {
            break;
        }
        if let Ok(value) = Reflect::get(&chunk, &"value".into()) {
            bytes.extend(js_sys::Uint8Array::new(&value).to_vec());
        }
        progress(bytes.len() as f64, total);
    }
    Ok(bytes)
}

/// Milliseconds since the page's navigation started (`performance.now()`).
pub fn now_ms() -> f64 {
    js_sys::Reflect::get(&js_sys::global(), &"performance".into())
        .ok()
        .and_then(|p| p.dyn_into::<web_sys::Performance>().ok())
        .map_or(0.0, |p| p.now())
}

/// The run clock: the page's `performance.now()` in microseconds.
pub struct PageClock;

impl Clock for PageClock {
    fn now_us(&mut self) -> f64 {
        now_ms() * 1e3
    }
}

/// What the browser says about its WebGPU adapter (`GPUAdapter.info`: vendor, architecture,
/// device, description, and whether it is a fallback adapter), e.g. "google swiftshader,
/// fallback adapter"; `None` without WebGPU or an adapter. wgpu's WebGPU backend passes on
/// only the description, which SwiftShader leaves empty, so the status line asks here.
pub async fn adapter_info() -> Option<String> {
    use js_sys::Reflect;
    let navigator = Reflect::get(&js_sys::global(), &"navigator".into()).ok()?;
    let gpu = Reflect::get(&navigator, &"gpu".into())
        .ok()
        .filter(|g| !g.is_undefined() && !g.is_null())?;
    let request: js_sys::Function = Reflect::get(&gpu, &"requestAdapter".into())
        .ok()?
        .dyn_into()
        .ok()?;
    let promise: js_sys::Promise = request.call0(&gpu).ok()?.dyn_into().ok()?;
    let adapter = JsFuture::from(promise)
        .await
        .ok()
        .filter(|a| !a.is_undefined() && !a.is_null())?;
    let info = Reflect::get(&adapter, &"info".into()).ok()?;
    let text = |key: &str| {
        Reflect::get(&info, &key.into())
            .ok()
            .and_then(|v| v.as_string())
            .filter(|s| !s.is_empty())
    };
    let mut words: Vec<String> = ["vendor", "architecture", "device", "description"]
        .into_iter()
        .filter_map(text)
        .collect();
    words.dedup();
    let fallback = Reflect::get(&info, &"isFallbackAdapter".into())
        .ok()
        .and_then(|v| v.as_bool())
        .unwrap_or(false);
    let mut described = words.join(" ");
    if fallback {
        described.push_str(if described.is_empty() {
            "fallback adapter"
        } else {
            ", fallback adapter"
        });
    }
    (!described.is_empty()).then_some(described)
}

/// Offers `text` to the learner as a file download named `filename`.
pub fn download(filename: &str, mime: &str, text: &str) -> Result<(), String> {
    let failed = |why: String| format!("Saving {filename} failed: {why}.");
    let parts = js_sys::Array::of1(&JsValue::from_str(text));
    let options = web_sys::BlobPropertyBag::new();
    options.set_type(mime);
    let blob = web_sys::Blob::new_with_str_sequence_and_options(&parts, &options)
        .map_err(|e| failed(js_text(e)))?;
    let url = web_sys::Url::create_object_url_with_blob(&blob).map_err(|e| failed(js_text(e)))?;
    let document = window()?
        .document()
        .ok_or_else(|| failed("the page has no document".into()))?;
    let anchor: web_sys::HtmlAnchorElement = document
        .create_element("a")
        .map_err(|e| failed(js_text(e)))?
        .dyn_into()
        .map_err(|_| failed("no link could be made".into()))?;
    anchor.set_href(&url);
    anchor.set_download(filename);
    anchor.click();
    let _ = web_sys::Url::revoke_object_url(&url);
    Ok(())
}

/// The text of the first file chosen in a file input.
pub async fn chosen_file_text(input: &web_sys::HtmlInputElement) -> Result<String, String> {
    let file = input
        .files()
        .and_then(|files| files.get(0))
        .ok_or_else(|| "Choose a file first.".to_string())?;
    let name = file.name();
    let text = JsFuture::from(file.text())
        .await
        .map_err(|e| format!("Reading {name} failed: {}.", js_text(e)))?;
    text.as_string()
        .ok_or_else(|| format!("{name} is not a text file."))
}

/// Shows a panic on the page, outside Leptos (whose state the panic may have left
/// half-changed): what happened, and a button that reloads the lab from its URL, without
/// the `fault` and `run` keys that may have caused it. The settings are in the URL, so the
/// reloaded lab is the same experiment.
pub fn report_panic(message: &str) {
    let Some(document) = web_sys::window().and_then(|w| w.document()) else {
        return;
    };
    let Some(body) = document.body() else {
        return;
    };
    let Ok(banner) = document.create_element("div") else {
        return;
    };
    banner.set_class_name("panic");
    let _ = banner.set_attribute("role", "alert");
    let _ = banner.set_attribute("data-testid", "panic");
    let text = document.create_element("p").ok();
    if let Some(text) = &text {
        text.set_text_content(Some(&format!(
            "The lab hit an internal error and stopped: {message}. Your settings are kept in the address; reloading starts the lab again from them."
        )));
        let _ = banner.append_child(text);
    }
    if let Ok(button) = document.create_element("button") {
        button.set_text_content(Some("Reload the lab"));
        let _ = button.set_attribute("type", "button");
        // Plain JavaScript: the wasm that panicked is not called again. (`window.URL`: in an
        // inline handler a bare `URL` is the document's address.)
        let _ = button.set_attribute(
            "onclick",
            "const u = new window.URL(location.href); u.searchParams.delete('fault'); u.searchParams.delete('run'); location.replace(u);",
        );
        let _ = banner.append_child(&button);
        let _ = body.insert_before(&banner, body.first_child().as_ref());
        if let Ok(button) = button.dyn_into::<web_sys::HtmlElement>() {
            let _ = button.focus();
        }
        return;
    }
    let _ = body.insert_before(&banner, body.first_child().as_ref());
}

/// Lets the event loop run once (a message through a fresh `MessageChannel`: a task
/// without the clamping of nested timers), so a worker sees Cancel between two tokens.
pub async fn yield_to_events() {
    let Ok(channel) = web_sys::MessageChannel::new() else {
        return;
    };
    let promise = js_sys::Promise::new(&mut |resolve, _| {
        channel.port1().set_onmessage(Some(&resolve));
        let _ = channel.port2().post_message(&JsValue::UNDEFINED);
    });
    let _ = JsFuture::from(promise).await;
    channel.port1().set_onmessage(None);
}
