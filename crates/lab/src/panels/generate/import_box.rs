//! Generate's "Import a policy" box: a Hugging Face `generation_config.json`, an OpenAI or
//! vLLM request body or a llama.cpp command line, pasted or read from a file, goes to the
//! model worker ([`Job::Import`](crate::worker::protocol::Job::Import)), which reads it as
//! `decode-lab generate --policy-from` does; the form takes what it read
//! ([`GenerateForm::take_import`](crate::panels::generate::view_model::GenerateForm::take_import))
//! and the box lists every field with what it became. A refusal is shown at the text, in
//! the reader's words, which name the field.

use leptos::prelude::*;
use leptos::task::spawn_local;
use wasm_bindgen::JsCast;

use crate::panels::generate::run_state::{Phase, RunState};
use crate::shell::web::chosen_file_text;
use crate::widgets::chart::mirror_table;
use crate::widgets::field::TextArea;

/// The box; `import` sends a text (and whether to read it leniently) to the worker.
#[component]
pub fn ImportBox(
    run: RwSignal<RunState>,
    phase: Memo<Phase>,
    import: Callback<(String, bool)>,
) -> impl IntoView {
    let (text, set_text) = signal(String::new());
    let lenient = RwSignal::new(false);
    let file_problem = RwSignal::new(None::<String>);
    let imported = Memo::new(move |_| run.with(|r| r.imported.clone()));
    let refusal = Signal::derive(move || {
        file_problem
            .get()
            .or_else(|| imported.with(|i| i.as_ref().and_then(|r| r.as_ref().err().cloned())))
    });
    let busy = move || phase.with(Phase::busy);
    let read = move || {
        file_problem.set(None);
        let text = text.get_untracked();
        if text.trim().is_empty() {
            file_problem.set(Some(
                "Paste a policy, or choose a file, before importing it.".to_string(),
            ));
            return;
        }
        import.run((text, lenient.get_untracked()));
    };
    let choose = move |ev: leptos::ev::Event| {
        let Some(input) = ev
            .target()
            .and_then(|t| t.dyn_into::<web_sys::HtmlInputElement>().ok())
        else {
            return;
        };
        spawn_local(async move {
            let chosen = chosen_file_text(&input, policy::formats::MAX_BYTES).await;
            input.set_value("");
            match chosen {
                Ok(chosen) => {
                    set_text.set(chosen);
                    read();
                }
                Err(e) => file_problem.set(Some(e.to_string())),
            }
        });
    };
    let result = move || {
        imported.with(|i| match i {
            Some(Ok(p)) => {
                let rows = p
                    .readings
                    .iter()
                    .map(|[field, value, became]| {
                        view! {
                            <tr>
                                <th scope="row"><code>{field.clone()}</code></th>
                                <td>{value.clone()}</td>
                                <td>{became.clone()}</td>
                            </tr>
                        }
                    })
                    .collect_view();
                let caption = format!(
                    "What the lab read from {}, under the {} engine's rules: each field, its value, and what it became",
                    p.form, p.engine
                );
                Some(view! {
                    <p data-testid="import-summary">
                        {format!(
                            "Read {} under the {} engine's rules: {} fields, listed below. The form above now holds its policy.",
                            p.form,
                            p.engine,
                            p.readings.len()
                        )}
                    </p>
                    {mirror_table("mirror import-readings", None, Some("import-readings"), caption, &["Field", "Value", "What it became"], rows)}
                })
            }
            _ => None,
        })
    };
    view! {
        <details class="import-policy">
            <summary>"Import a policy"</summary>
            <p>
                "A policy written for another engine: a Hugging Face generation_config.json, an OpenAI or vLLM request body, or a llama.cpp command line. Its knobs replace the form's (each one it does not set at its engine's default); the seed, length and stops it gives replace the form's too. Token ids are the model's it was written for: ids beyond this model's vocabulary are refused when the run starts."
            </p>
            <div class="controls">
                <TextArea id="gen-policy-text" problem=refusal label="Policy to import" hint="Paste it here, or choose a file below." value=text.into() set=set_text wide=true/>
                <div class="field">
                    <label for="gen-policy-file">"Or read a file"</label>
                    <input id="gen-policy-file" type="file" accept=".json,.txt,.sh,application/json,text/plain" aria-describedby="gen-policy-file-hint" on:change=choose disabled=busy/>
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
                    <button type="button" id="gen-policy-import" on:click=move |_| read() disabled=busy>"Import"</button>
                </div>
            </div>
            <div aria-live="polite">{result}</div>
        </details>
    }
}
