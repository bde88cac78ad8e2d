//! The model worker's side of the browser: fetching the model's files from the page's own
//! origin with progress, the run clock, the adapter's description and yielding to the event
//! loop so a Cancel is seen between two tokens.

use policy::Clock;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;

use crate::js::now_ms;
pub use crate::link::fetch::MODEL_DIR;
use crate::link::fetch::{fetch_chunks, FetchError};

/// The bytes of one model file, fetched from [`MODEL_DIR`] beside the page, telling
/// `progress` the bytes received so far and the total the server announced (if it did) as
/// they arrive.
pub async fn fetch_model_file_with_progress(
    path: &str,
    progress: &dyn Fn(f64, Option<f64>),
) -> Result<Vec<u8>, FetchError> {
    let url = format!("{MODEL_DIR}/{path}");
    let mut bytes = Vec::new();
    fetch_chunks(&url, &url, false, &mut |chunk, total| {
        if bytes.is_empty() && chunk.is_empty() {
            bytes.reserve(total.unwrap_or(0.0) as usize);
        }
        bytes.extend_from_slice(chunk);
        progress(bytes.len() as f64, total);
    })
    .await?;
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
