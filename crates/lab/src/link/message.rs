//! What crosses between the page and a worker: a job or an event as its JSON text, for every
//! worker's protocol alike.

use serde::de::DeserializeOwned;
use serde::Serialize;
use wasm_bindgen::JsValue;

use crate::link::error::LinkError;

/// A job or an event as the message that carries it: its JSON text (for the model worker's
/// protocol and the planner's alike). Every binary already links `serde_json` (run records
/// and reports are read and written as JSON), so a protocol adds no second encoder to any;
/// u64 seeds and f64 probabilities cross exactly.
pub(crate) fn to_js<T: Serialize>(value: &T) -> Result<JsValue, LinkError> {
    serde_json::to_string(value)
        .map(|text| JsValue::from_str(&text))
        .map_err(LinkError::Encode)
}

/// The job or event a message carries (the inverse of [`to_js`]).
pub(crate) fn from_js<T: DeserializeOwned>(message: &JsValue) -> Result<T, LinkError> {
    let text = message.as_string().ok_or(LinkError::NotText)?;
    serde_json::from_str(&text).map_err(LinkError::Decode)
}
