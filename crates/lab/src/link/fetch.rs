//! Fetching from the page's own origin, a chunk at a time, in a worker: the model worker's
//! files and the observation worker's logs (gunzipped by the browser's own
//! `DecompressionStream` when they are compressed, so no inflater is linked), and why a
//! fetch failed ([`FetchError`]: what the browser threw is kept as its text).

use std::error::Error;
use std::fmt;

use js_sys::Reflect;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;

use crate::js::js_text;

/// Where the page finds the model, relative to itself (Trunk copies the directory there).
pub const MODEL_DIR: &str = "models/decode-lab-tiny-v1";

/// A file (`name`) that could not be fetched, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct FetchError {
    pub name: String,
    pub why: FetchFailure,
}

/// Why a fetch failed.
#[derive(Clone, Debug, PartialEq)]
pub enum FetchFailure {
    /// Neither a page nor a worker: nothing to fetch with.
    NoFetch,
    /// What the browser threw, as its text.
    Thrown(String),
    /// The fetch's answer is not a `Response`.
    NotResponse,
    /// The server's answer, not a success.
    Http { status: u16, status_text: String },
    /// No `DecompressionStream` for a compressed file.
    NoGunzip,
    /// A body with no reader.
    Unreadable,
}

impl fmt::Display for FetchFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FetchFailure::NoFetch => f.write_str("this scope cannot fetch"),
            FetchFailure::Thrown(text) => f.write_str(text),
            FetchFailure::NotResponse => f.write_str("the answer is not a response"),
            FetchFailure::Http {
                status,
                status_text,
            } => write!(f, "HTTP {status} {status_text}"),
            FetchFailure::NoGunzip => f.write_str("this browser cannot gunzip a stream"),
            FetchFailure::Unreadable => f.write_str("its body cannot be read"),
        }
    }
}

impl fmt::Display for FetchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fetching {} failed: {}.", self.name, self.why)
    }
}

impl Error for FetchError {}

/// `fetch(url)` in the page or in a worker, whichever this code runs in.
fn fetch(url: &str) -> Result<js_sys::Promise, FetchFailure> {
    let global = js_sys::global();
    if let Some(w) = global.dyn_ref::<web_sys::Window>() {
        Ok(w.fetch_with_str(url))
    } else if let Some(w) = global.dyn_ref::<web_sys::WorkerGlobalScope>() {
        Ok(w.fetch_with_str(url))
    } else {
        Err(FetchFailure::NoFetch)
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
) -> Result<(), FetchError> {
    let failed = |why: FetchFailure| FetchError {
        name: name.to_string(),
        why,
    };
    let thrown = |e: JsValue| failed(FetchFailure::Thrown(js_text(e)));
    let response = JsFuture::from(fetch(url).map_err(failed)?)
        .await
        .map_err(thrown)?;
    let response: web_sys::Response = response
        .dyn_into()
        .map_err(|_| failed(FetchFailure::NotResponse))?;
    if !response.ok() {
        return Err(failed(FetchFailure::Http {
            status: response.status(),
            status_text: response.status_text(),
        }));
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
                .map_err(|_| failed(FetchFailure::NoGunzip))?;
        let inflate =
            Reflect::construct(&class, &js_sys::Array::of1(&"gzip".into())).map_err(thrown)?;
        let end = |side: &str| Reflect::get(&inflate, &side.into()).map_err(thrown);
        let pair = web_sys::ReadableWritablePair::new(
            &end("readable")?.unchecked_into(),
            &end("writable")?.unchecked_into(),
        );
        body = body.pipe_through(&pair);
    }
    let reader: web_sys::ReadableStreamDefaultReader = body
        .get_reader()
        .dyn_into()
        .map_err(|_| failed(FetchFailure::Unreadable))?;
    loop {
        let read = JsFuture::from(reader.read()).await.map_err(thrown)?;
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
