//! Generate's "Import a policy" box: a Hugging Face `generation_config.json`, an OpenAI or
//! vLLM request body or a llama.cpp command line, pasted or read from a file, goes to the
//! importer's worker ([`crate::importer`]), which reads it as `decode-lab generate
//! --policy-from` does; the form takes what it read
//! ([`GenerateForm::take_import`](crate::panels::generate::view_model::GenerateForm::take_import))
//! and the box shows the importer's table of every field and what it became. A refusal is
//! shown at the text, in the reader's words, which name the field.

use leptos::prelude::*;

use crate::importer::protocol::{ImportJob, ImportedPolicy, Importer, ImporterEvent};
use crate::link::PanelLink;
use crate::shell::web::read_chosen_file;
use crate::widgets::field::TextArea;

/// The box; `take` puts an imported policy into the form.
#[component]
pub fn ImportBox(take: Callback<ImportedPolicy>) -> impl IntoView {
    let (text, set_text) = signal(String::new());
    let lenient = RwSignal::new(false);
    let problem = RwSignal::new(None::<String>);
    // The last import's sentence and its readings' markup.
    let shown = RwSignal::new(None::<(String, String)>);
    let reading = RwSignal::new(false);
    // Only the answer to the latest import counts.
    let latest = StoredValue::new(0u64);
    // The importer, started with the first import; a panic in it drops it for a new one.
    let importer = PanelLink::<Importer>::new();
    let on_event = move |event: ImporterEvent| match event {
        ImporterEvent::Imported { id, policy } if id == latest.get_value() => {
            reading.set(false);
            problem.set(None);
            shown.set(Some((policy.summary.clone(), policy.html.clone())));
            take.run(*policy);
        }
        ImporterEvent::Refused { id, why } if id == latest.get_value() => {
            reading.set(false);
            shown.set(None);
            problem.set(Some(why));
        }
        ImporterEvent::Ready | ImporterEvent::Imported { .. } | ImporterEvent::Refused { .. } => {}
        ImporterEvent::Failed(why) => {
            reading.set(false);
            problem.set(Some(why));
        }
        ImporterEvent::Panicked(why) => {
            reading.set(false);
            problem.set(Some(
                importer.panicked(&why, "The next import starts a new one."),
            ));
        }
    };
    let read_text = move || {
        problem.set(None);
        let text = text.get_untracked();
        if text.trim().is_empty() {
            problem.set(Some(
                "Paste a policy, or choose a file, before importing it.".to_string(),
            ));
            return;
        }
        latest.update_value(|id| *id += 1);
        let job = ImportJob {
            id: latest.get_value(),
            text,
            lenient: lenient.get_untracked(),
        };
        reading.set(true);
        if let Err(e) = importer.send(&job, on_event) {
            reading.set(false);
            problem.set(Some(e.to_string()));
        }
    };
    let choose = move |change: leptos::ev::Event| {
        read_chosen_file(change, policy::formats::MAX_BYTES, move |read| match read {
            Ok(chosen) => {
                set_text.set(chosen);
                read_text();
            }
            Err(e) => problem.set(Some(e.to_string())),
        })
    };
    let result = move || {
        if reading.get() {
            return Some(view! { <p class="progress">"Reading the policy…"</p> }.into_any());
        }
        shown.get().map(|(summary, html)| {
            view! {
                <p data-testid="import-summary">{summary}</p>
                <div class="import-readings" inner_html=html></div>
            }
            .into_any()
        })
    };
    view! {
        <details class="import-policy">
            <summary>"Import a policy"</summary>
            <p>
                "A policy written for another engine: a Hugging Face generation_config.json, an OpenAI or vLLM request body, or a llama.cpp command line. Its knobs replace the form's (each one it does not set at its engine's default); the seed, length and stops it gives replace the form's too. Token ids are the model's it was written for: ids beyond this model's vocabulary are refused when the run starts."
            </p>
            <div class="controls">
                <TextArea id="gen-policy-text" problem=problem label="Policy to import" hint="Paste it here, or choose a file below." value=text.into() set=set_text wide=true/>
                <div class="field">
                    <label for="gen-policy-file">"Or read a file"</label>
                    <input id="gen-policy-file" type="file" accept=".json,.txt,.sh,application/json,text/plain" aria-describedby="gen-policy-file-hint" on:change=choose/>
                    <small id="gen-policy-file-hint">"Its text goes in the box above and is read at once (at most 1 MiB)."</small>
                </div>
                <div class="field">
                    <div class="check">
                        <input type="checkbox" id="gen-policy-lenient" aria-describedby="gen-policy-lenient-hint" prop:checked=move || lenient.get() on:change=move |ev| lenient.set(event_target_checked(&ev))/>
                        <label for="gen-policy-lenient">"Lenient"</label>
                    </div>
                    <small id="gen-policy-lenient-hint">"Read the rest of a policy that has fields this lab does not understand, and list those fields."</small>
                </div>
                <div class="field buttons">
                    <button type="button" id="gen-policy-import" on:click=move |_| read_text()>"Import"</button>
                </div>
            </div>
            <div aria-live="polite">{result}</div>
        </details>
    }
}
