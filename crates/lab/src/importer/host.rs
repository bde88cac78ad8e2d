//! The importer's global scope: it takes an [`ImportJob`], reads the policy
//! ([`crate::importer::reading`]), fetches and reads the model's `tokenizer.json` the first
//! time a policy needs the vocabulary, and posts the form's texts or why the text was
//! refused. A panic is posted as [`ImporterEvent::Panicked`] before the worker dies.

use std::cell::RefCell;
use std::fmt;
use std::rc::Rc;

use policy::formats::ImportError;
use tokenizer::{Tokenizer, TokenizerError};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

use crate::importer::protocol::{ImportJob, ImportedPolicy, ImporterEvent};
use crate::importer::reading::{form_texts, needs_tokenizer};
use crate::link::fetch::{fetch_chunks, FetchError, MODEL_DIR};
use crate::link::message::from_js;
use crate::link::scope::{post, report_panics, scope};

/// Installs the panic report and the message handler; the worker then waits for jobs.
pub fn start() {
    report_panics(ImporterEvent::Panicked);
    let Some(scope) = scope() else {
        return;
    };
    let tokenizer: Rc<RefCell<Option<Rc<Tokenizer>>>> = Rc::default();
    let on_message =
        Closure::<dyn FnMut(web_sys::MessageEvent)>::new(move |message: web_sys::MessageEvent| {
            let job: ImportJob = match from_js(&message.data()) {
                Ok(job) => job,
                Err(e) => {
                    post(&ImporterEvent::Failed(format!(
                        "The importer could not read a message: {e}."
                    )));
                    return;
                }
            };
            let tokenizer = tokenizer.clone();
            wasm_bindgen_futures::spawn_local(async move {
                post(&match import(&job, &tokenizer).await {
                    Ok(policy) => ImporterEvent::Imported {
                        id: job.id,
                        policy: Box::new(policy),
                    },
                    Err(why) => ImporterEvent::Refused {
                        id: job.id,
                        why: why.to_string(),
                    },
                });
            });
        });
    scope.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
    on_message.forget();
    post(&ImporterEvent::Ready);
}

/// Why a policy's text was not imported; its `Display` is the sentence the page shows at the
/// text area.
#[derive(Debug)]
enum RefusedImport {
    /// The text, refused by the reader (its words name the field).
    Import(ImportError),
    /// `tokenizer.json`, which the policy's words need, could not be fetched.
    Fetch(FetchError),
    /// `tokenizer.json` is not UTF-8 text.
    NotUtf8,
    /// `tokenizer.json`, refused by the tokenizer crate.
    Tokenizer(TokenizerError),
}

impl fmt::Display for RefusedImport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RefusedImport::Import(e) => e.fmt(f),
            RefusedImport::Fetch(e) => e.fmt(f),
            RefusedImport::NotUtf8 => write!(f, "{TOKENIZER} is not UTF-8 text."),
            RefusedImport::Tokenizer(e) => write!(f, "{TOKENIZER}: {e}"),
        }
    }
}

/// The model file the importer reads when a policy names words.
const TOKENIZER: &str = "tokenizer.json";

/// The job's policy as the form's texts, or why not.
async fn import(
    job: &ImportJob,
    tokenizer: &RefCell<Option<Rc<Tokenizer>>>,
) -> Result<ImportedPolicy, RefusedImport> {
    let imported =
        policy::formats::import(&job.text, job.lenient).map_err(RefusedImport::Import)?;
    let tokenizer = match needs_tokenizer(&imported) {
        true => Some(model_tokenizer(tokenizer).await?),
        false => None,
    };
    form_texts(&imported, tokenizer.as_deref()).map_err(RefusedImport::Import)
}

/// The model's tokenizer, fetched and read once.
async fn model_tokenizer(
    kept: &RefCell<Option<Rc<Tokenizer>>>,
) -> Result<Rc<Tokenizer>, RefusedImport> {
    if let Some(tokenizer) = kept.borrow().clone() {
        return Ok(tokenizer);
    }
    let mut bytes = Vec::new();
    fetch_chunks(
        &format!("{MODEL_DIR}/{TOKENIZER}"),
        TOKENIZER,
        false,
        &mut |chunk, _| bytes.extend_from_slice(chunk),
    )
    .await
    .map_err(RefusedImport::Fetch)?;
    let json = String::from_utf8(bytes).map_err(|_| RefusedImport::NotUtf8)?;
    let tokenizer = Rc::new(Tokenizer::from_json(&json).map_err(RefusedImport::Tokenizer)?);
    *kept.borrow_mut() = Some(tokenizer.clone());
    Ok(tokenizer)
}
