//! Fetching from the page's own origin, a chunk at a time, in a worker: the model worker's
//! files and the observation worker's logs (gunzipped by the browser's own
//! `DecompressionStream` when they are compressed, so no inflater is linked).

use js_sys::Reflect;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;

use crate::js::js_text;

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

/// Streams the body of `url` to `chunk` as it arrives, gunzipped first when `gzip`: first an
/// empty chunk with the length the server announced (if it did; the compressed length when
/// `gzip`), then each chunk with it. Errors name the file as `name`.
pub async fn fetch_chunks(
    url: &str,
    name: &str,
    gzip: bool,
    chunk: &mut dyn FnMut(&[u8], Option<f64>),
) -> Result<(), String> {
    let failed = |why: String| format!("Fetching {name} failed: {why}.");
    let response = JsFuture::from(fetch(url).map_err(failed)?)
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
    chunk(&[], total);
    let Some(mut body) = response.body() else {
        return Ok(());
    };
    if gzip {
        // `DecompressionStream` is in every browser the lab supports, but web-sys still
        // marks it unstable; its two ends are all this needs.
        let class: js_sys::Function =
            Reflect::get(&js_sys::global(), &"DecompressionStream".into())
                .and_then(|c| c.dyn_into())
                .map_err(|_| failed("this browser cannot gunzip a stream".to_string()))?;
        let inflate = Reflect::construct(&class, &js_sys::Array::of1(&"gzip".into()))
            .map_err(|e| failed(js_text(e)))?;
        let end = |side: &str| Reflect::get(&inflate, &side.into()).map_err(|e| failed(js_text(e)));
        let pair = web_sys::ReadableWritablePair::new(
            &end("readable")?.unchecked_into(),
            &end("writable")?.unchecked_into(),
        );
        body = body.pipe_through(&pair);
    }
    let reader: web_sys::ReadableStreamDefaultReader = body
        .get_reader()
        .dyn_into()
        .map_err(|_| failed("its body cannot be read".to_string()))?;
    loop {
        let read = JsFuture::from(reader.read())
            .await
            .map_err(|e| failed(js_text(e)))?;
        let done = Reflect::get(&read, &"done".into())
            .ok()
            .and_then(|d| d.as_bool())
            .unwrap_or(true);
        if done {
            return Ok(());
        }
        if let Ok(value) = Reflect::get(&read, &"value".into()) {
            chunk(&js_sys::Uint8Array::new(&value).to_vec(), total);
        }
    }
}
