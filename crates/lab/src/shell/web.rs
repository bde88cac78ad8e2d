//! The page's side of the browser: focus, the theme, downloads, reading a chosen file and
//! the page's panic report, and why a download or a read failed ([`PageError`]: what the
//! browser threw is kept as its text). These only work in a browser; what they feed is
//! plain data in the panels' view models.

use std::error::Error;
use std::fmt;

use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;

use crate::js::js_text;

/// Why a download or the read of a chosen file failed.
#[derive(Clone, Debug, PartialEq)]
pub enum PageError {
    /// No window: not a page.
    NoWindow,
    /// The download of `filename` failed, and why.
    Save { filename: String, why: SaveFailure },
    /// No file chosen.
    NoFile,
    /// The chosen file `name` could not be read; `thrown` is what the browser threw.
    Read { name: String, thrown: String },
    /// The chosen file `name` is not text.
    NotText { name: String },
    /// The chosen file `name` holds `bytes`, more than the `max` its field reads.
    TooLarge {
        name: String,
        bytes: f64,
        max: usize,
    },
}

/// Why a download failed.
#[derive(Clone, Debug, PartialEq)]
pub enum SaveFailure {
    /// What the browser threw, as its text.
    Thrown(String),
    NoDocument,
    NoLink,
}

impl fmt::Display for PageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PageError::NoWindow => f.write_str("This page has no window to fetch from."),
            PageError::Save { filename, why } => write!(f, "Saving {filename} failed: {why}."),
            PageError::NoFile => f.write_str("Choose a file first."),
            PageError::Read { name, thrown } => write!(f, "Reading {name} failed: {thrown}."),
            PageError::NotText { name } => write!(f, "{name} is not a text file."),
            PageError::TooLarge { name, bytes, max } => write!(
                f,
                "{name} holds {bytes} bytes, more than the {max} this field reads; it was not read."
            ),
        }
    }
}

impl fmt::Display for SaveFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SaveFailure::Thrown(text) => f.write_str(text),
            SaveFailure::NoDocument => f.write_str("the page has no document"),
            SaveFailure::NoLink => f.write_str("no link could be made"),
        }
    }
}

impl Error for PageError {}

fn window() -> Result<web_sys::Window, PageError> {
    web_sys::window().ok_or(PageError::NoWindow)
}

/// Moves the keyboard focus to the first of `ids` that names an enabled element: after a
/// control re-renders the list it sits in, focus stays with the item the learner moved.
pub fn focus_first(ids: &[String]) {
    let Some(document) = web_sys::window().and_then(|w| w.document()) else {
        return;
    };
    for id in ids {
        let Some(element) = document.get_element_by_id(id) else {
            continue;
        };
        if element.has_attribute("disabled") {
            continue;
        }
        if let Ok(element) = element.dyn_into::<web_sys::HtmlElement>() {
            let _ = element.focus();
            return;
        }
    }
}

/// Sets the page's `data-theme` (`light`, `dark` or `auto`), which the style sheet reads.
pub fn set_theme(name: &str) {
    if let Some(root) = web_sys::window()
        .and_then(|w| w.document())
        .and_then(|d| d.document_element())
    {
        let _ = root.set_attribute("data-theme", name);
    }
}

/// Offers `text` to the learner as a file download named `filename`.
pub fn download(filename: &str, mime: &str, text: &str) -> Result<(), PageError> {
    let failed = |why: SaveFailure| PageError::Save {
        filename: filename.to_string(),
        why,
    };
    let thrown = |e: JsValue| failed(SaveFailure::Thrown(js_text(e)));
    let parts = js_sys::Array::of1(&JsValue::from_str(text));
    let options = web_sys::BlobPropertyBag::new();
    options.set_type(mime);
    let blob =
        web_sys::Blob::new_with_str_sequence_and_options(&parts, &options).map_err(thrown)?;
    let url = web_sys::Url::create_object_url_with_blob(&blob).map_err(thrown)?;
    let document = window()?
        .document()
        .ok_or_else(|| failed(SaveFailure::NoDocument))?;
    let anchor: web_sys::HtmlAnchorElement = document
        .create_element("a")
        .map_err(thrown)?
        .dyn_into()
        .map_err(|_| failed(SaveFailure::NoLink))?;
    anchor.set_href(&url);
    anchor.set_download(filename);
    anchor.click();
    let _ = web_sys::Url::revoke_object_url(&url);
    Ok(())
}

/// A file input's change: the chosen file's text, refused unread when it holds more than
/// `max` bytes, or why there is none, handed to `then`; the input is emptied, so that the
/// same file can be chosen again.
pub fn read_chosen_file(
    change: web_sys::Event,
    max: usize,
    then: impl FnOnce(Result<String, PageError>) + 'static,
) {
    let Some(input) = change
        .target()
        .and_then(|t| t.dyn_into::<web_sys::HtmlInputElement>().ok())
    else {
        return;
    };
    wasm_bindgen_futures::spawn_local(async move {
        let text = chosen_file_text(&input, max).await;
        input.set_value("");
        then(text);
    });
}

async fn chosen_file_text(
    input: &web_sys::HtmlInputElement,
    max: usize,
) -> Result<String, PageError> {
    let file = input
        .files()
        .and_then(|files| files.get(0))
        .ok_or(PageError::NoFile)?;
    let name = file.name();
    if file.size() > max as f64 {
        return Err(PageError::TooLarge {
            name,
            bytes: file.size(),
            max,
        });
    }
    let text = JsFuture::from(file.text())
        .await
        .map_err(|e| PageError::Read {
            name: name.clone(),
            thrown: js_text(e),
        })?;
    text.as_string().ok_or(PageError::NotText { name })
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
