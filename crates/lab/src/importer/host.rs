//! The importer's global scope: it takes an [`ImportJob`], reads the policy
//! ([`crate::importer::reading`]), fetches and reads the model's `tokenizer.json` the first
//! time a policy needs the vocabulary, and posts the form's texts or why the text was
//! refused. A panic is posted as [`ImporterEvent::Panicked`] before the worker dies.

use std::cell::RefCell;
use std::rc::Rc;

use tokenizer::Tokenizer;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

use crate::importer::protocol::{ImportJob, ImportedPolicy, ImporterEvent};
use crate::importer::reading::{form_texts, needs_tokenizer};
use crate::link::fetch::{fetch_chunks, MODEL_DIR};
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
                    Err(why) => ImporterEvent::Refused { id: job.id, why },
                });
            });
        });
    scope.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
    on_message.forget();
    post(&ImporterEvent::Ready);
}

/// The job's policy as the form's texts, or why not, in words.
async fn import(
    job: &ImportJob,
    tokenizer: &RefCell<Option<Rc<Tokenizer>>>,
) -> Result<ImportedPolicy, String> {
    let imported = policy::formats::import(&job.text, job.lenient).map_err(|e| e.to_string())?;
    let tokenizer = match needs_tokenizer(&imported) {
        true => Some(model_tokenizer(tokenizer).await?),
        false => None,
    };
    form_texts(&imported, tokenizer.as_deref()).map_err(|e| e.to_string())
}

/// The model's tokenizer, fetched and read once.
async fn model_tokenizer(kept: &RefCell<Option<Rc<Tokenizer>>>) -> Result<Rc<Tokenizer>, String> {
    if let Some(tokenizer) = kept.borrow().clone() {
        return Ok(tokenizer);
    }
    let mut bytes = Vec::new();
    let name = "tokenizer.json";
    fetch_chunks(
        &format!("{MODEL_DIR}/{name}"),
        name,
        false,
        &mut |chunk, _| bytes.extend_from_slice(chunk),
    )
    .await
    .map_err(|e| e.to_string())?;
    let json = String::from_utf8(bytes).map_err(|_| format!("{name} is not UTF-8 text."))?;
    let tokenizer = Rc::new(Tokenizer::from_json(&json).map_err(|e| format!("{name}: {e}"))?);
    *kept.borrow_mut() = Some(tokenizer.clone());
    Ok(tokenizer)
}
