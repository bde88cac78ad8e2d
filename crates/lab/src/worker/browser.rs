//! The model worker's side of the browser: fetching the model's files from the page's own
//! origin with progress, the run clock, the adapter's description and yielding to the event
//! loop so a Cancel is seen between two tokens.

use policy::Clock;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;

use crate::shell::web::{js_text, now_ms};

/// Where the page finds the model, relative to itself (Trunk copies the directory there).
pub const MODEL_DIR: &str = "models/decode-lab-tiny-v1";

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

/// The run clock: `performance.now()` in microseconds.
pub struct WorkerClock;

impl Clock for WorkerClock {
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
