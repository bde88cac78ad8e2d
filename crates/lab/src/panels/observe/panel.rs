//! The Observe panel: run logs (JSONL, or gzipped JSONL) and their mature outcomes in, or the
//! shipped demo; the observation worker ([`crate::observer`]) reads them with progress and
//! sends back the verdict and the report's parts, which this file only draws (with
//! [`report`], every chart with its table). The baseline version is a select
//! of the versions observed; it and the demo live in the URL.

use std::sync::Arc;

use leptos::prelude::*;
use wasm_bindgen::JsCast;

use crate::link::PanelLink;
use crate::observer::protocol::{Input, ObserveDisplay, Observer, ObserverEvent, Source};
use crate::panels::observe::view_model::{News, ObserveRun, BASELINE_KEY, DEMO_KEY};
use crate::panels::panel_head;
use crate::shell::url;
use crate::widgets::controls::hidden;

/// The files chosen in the file input `id`, each as a URL the worker can fetch.
fn chosen(id: &str) -> Vec<Source> {
    let Some(input) = web_sys::window()
        .and_then(|w| w.document())
        .and_then(|d| d.get_element_by_id(id))
        .and_then(|e| e.dyn_into::<web_sys::HtmlInputElement>().ok())
    else {
        return Vec::new();
    };
    let Some(files) = input.files() else {
        return Vec::new();
    };
    (0..files.length())
        .filter_map(|i| files.get(i))
        .filter_map(|file| {
            let url = web_sys::Url::create_object_url_with_blob(&file).ok()?;
            Some(Source {
                name: file.name(),
                url,
            })
        })
        .collect()
}

fn revoke(input: &Input) {
    if let Input::Files { runs, outcomes } = input {
        for source in runs.iter().chain(outcomes) {
            let _ = web_sys::Url::revoke_object_url(&source.url);
        }
    }
}

/// The terms the report's charts and tables use, defined where they are used (Chartability:
/// "Metrics and variables are undefined"). Static markup, so it costs the page's wasm one
/// string.
const TERMS: &str = concat!(
    "<dl>",
    crate::latency_terms!(),
    "<dt>PSI</dt><dd>Population stability index: how far a slice's inputs moved from the baseline's; the playbook flags a slice above 0.25 by default.</dd>\
<dt>95 % interval</dt><dd>The range that holds the true rate in 95 of 100 such samples (Wilson's interval).</dd></dl>"
);

#[component]
pub fn ObservePanel() -> impl IntoView {
    let pairs = url::pairs();
    let asked = |key: &str| pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
    let demo_on_open = asked(DEMO_KEY).is_some_and(|v| v == "1");
    let baseline = RwSignal::new(asked(BASELINE_KEY).filter(|b| !b.is_empty()));

    let status = RwSignal::new(String::new());
    let error = RwSignal::new(None::<String>);
    let runs_problem = RwSignal::new(None::<String>);
    let display = RwSignal::new(None::<Arc<ObserveDisplay>>);
    let busy = RwSignal::new(false);
    let run = StoredValue::new(ObserveRun::default());
    let link = PanelLink::<Observer>::new();

    let show = move |news: News| {
        busy.set(run.with_value(ObserveRun::busy));
        if news.discard_worker {
            link.discard();
        }
        status.set(news.status);
        error.set(news.error);
        if let Some(shown) = news.display {
            if shown.baseline.is_some() {
                baseline.set(shown.baseline.clone());
            }
            display.set(Some(shown));
        }
    };
    let on_event = move |event: ObserverEvent| {
        if let Some(news) = run.try_update_value(|r| r.apply(event)).flatten() {
            show(news);
        }
    };
    let send = move |input: Input| {
        let demo = input == Input::Demo;
        let Some(job) = run.try_update_value(|r| r.start(input, baseline.get_untracked())) else {
            return;
        };
        url::write(&[
            (DEMO_KEY, if demo { "1" } else { "" }.to_string()),
            (BASELINE_KEY, baseline.get_untracked().unwrap_or_default()),
        ]);
        busy.set(true);
        error.set(None);
        status.set("Observing…".into());
        if let Err(message) = link.send(&job, on_event) {
            if let Some(news) = run.try_update_value(|r| r.could_not_start(message.to_string())) {
                show(news);
            }
        }
    };
    let observe_files = move |_| {
        let runs = chosen("obs-runs");
        if runs.is_empty() {
            runs_problem.set(Some(
                "Choose one or more run logs first: JSONL run records, as the Generate panel exports them or decode-lab traffic writes them.".into(),
            ));
            return;
        }
        runs_problem.set(None);
        if let Some(Some(old)) = run.try_with_value(|r| r.last.clone()) {
            revoke(&old);
        }
        let outcomes = chosen("obs-outcomes");
        send(Input::Files { runs, outcomes });
    };
    let choose_baseline = move |ev: leptos::ev::Event| {
        let chosen = event_target_value(&ev);
        baseline.set((!chosen.is_empty()).then_some(chosen));
        if let Some(Some(last)) = run.try_with_value(|r| r.last.clone()) {
            send(last);
        }
    };
    if demo_on_open {
        send(Input::Demo);
    }

    let baseline_options = move || {
        let chosen = baseline.get().unwrap_or_default();
        let versions = display.with(|d| d.as_ref().map(|d| d.versions.clone()).unwrap_or_default());
        std::iter::once((String::new(), "No baseline".to_string()))
            .chain(versions)
            .map(|(id, label)| {
                let selected = id == chosen;
                view! { <option value=id selected=selected>{label}</option> }
            })
            .collect_view()
    };
    let result = move || {
        display.get().map(|d| {
            let verdicts = d
                .verdicts
                .iter()
                .map(|v| view! { <p class="chosen"><strong>{v.clone()}</strong></p> })
                .collect_view();
            let parts = d.parts_html.clone();
            view! {
                <div class="cap-decision obs-verdict" data-kind=d.decision.clone()>
                    <h3>"Verdict"</h3>
                    <p>{d.summary.clone()}</p>
                    {verdicts}
                </div>
                <div class="obs-parts" inner_html=parts></div>
            }
        })
    };

    view! {
        <section class="panel observe" aria-labelledby="observe-title">
            {panel_head("observe", "Observe", "Join run records and their mature outcomes by exact version, then by slice: service health, input quality, predictions and outcomes; compare each version with a baseline, slice by slice, and read the verdict the playbook gives, with its rollback target. The rare slice is judged on its own, so an aggregate that improves cannot hide it.", Some(TERMS), None)}
            <form class="controls" on:submit=|ev| ev.prevent_default()>
                <div class="field" hidden=hidden("obs-runs", "Run logs", None, Some(runs_problem.into()))>
                    <label for="obs-runs">"Run logs (JSONL run records, or .jsonl.gz)"</label>
                    <input
                        id="obs-runs"
                        type="file"
                        multiple
                        accept=".jsonl,.json,.gz"
                        aria-invalid=move || runs_problem.get().map(|_| "true")
                        aria-describedby=move || if runs_problem.get().is_some() { "obs-runs-hint obs-runs-problem" } else { "obs-runs-hint" }
                    />
                    <small id="obs-runs-hint">"Records exported by the Generate panel, decode-lab generate --json, or decode-lab traffic; read in the worker, never uploaded."</small>
                    {move || runs_problem.get().map(|m| view! { <small id="obs-runs-problem" class="field-problem error">{m}</small> })}
                </div>
                <div class="field" hidden=hidden("obs-outcomes", "Outcomes", None, None)>
                    <label for="obs-outcomes">"Outcomes (JSONL rows of run_id, outcome, at_s; optional)"</label>
                    <input id="obs-outcomes" type="file" multiple accept=".jsonl,.json,.gz"/>
                </div>
                <div class="field" hidden=hidden("obs-baseline", "Baseline version", Some(Signal::derive(move || baseline.get().unwrap_or_default())), None)>
                    <label for="obs-baseline">"Baseline version (the last known-good)"</label>
                    <select id="obs-baseline" on:change=choose_baseline prop:disabled=move || busy.get() || display.with(Option::is_none)>
                        {baseline_options}
                    </select>
                </div>
                <div class="field buttons">
                    <button type="button" id="obs-observe" on:click=observe_files prop:disabled=move || busy.get()>
                        "Observe the files"
                    </button>
                    <button type="button" class="secondary" id="obs-demo" on:click=move |_| send(Input::Demo) prop:disabled=move || busy.get()>
                        "Observe the demo"
                    </button>
                </div>
            </form>
            <p class="progress" role="status" aria-live="polite">{move || status.get()}</p>
            {move || error.get().map(|e| view! { <p class="error" role="alert">{e}</p> })}
            <div class="result obs-result">{result}</div>
        </section>
    }
}
