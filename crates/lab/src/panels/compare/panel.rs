//! The Compare panel: two policies on the same draws, a chart and table per measure, and
//! each policy's tree of paths over many seeds. It only draws: the form is
//! [`crate::panels::compare::view_model`], and the runs and their report are a
//! [`Job::Compare`] for the model worker.

use leptos::prelude::*;

use crate::panels::compare::view_model::{CompareForm, Side, FIELDS, SHOWN};
use crate::panels::panel_head;
use crate::shell::url;
use crate::widgets::field::{Field, TextArea};
use crate::widgets::form::{problem_at, problems_of, Form};
use crate::widgets::knobs::{knob_fields, more_controls};
use crate::worker::protocol::PanelWorker;
use crate::worker::protocol::{download_words, Event, Job};

/// What the panel is doing: idle, working (the words say on what), done, or failed.
#[derive(Clone, Debug, PartialEq)]
enum Phase {
    Idle,
    Working(String),
    Done(String),
    Failed(String),
}

impl Phase {
    fn key(&self) -> &'static str {
        match self {
            Phase::Idle => "idle",
            Phase::Working(_) => "running",
            Phase::Done(_) => "done",
            Phase::Failed(_) => "failed",
        }
    }
}

/// The terms the comparison's charts and tables use, defined where they are used
/// (Chartability: "Metrics and variables are undefined"). Static markup, so it costs the
/// page's wasm one string.
const TERMS: &str = "<dl><dt>KL(a‖b)</dt><dd>Kullback–Leibler divergence, in nats: how surprised policy b is, on average, by a's draws. It is 0 when the two agree, and infinite when a keeps a token that b removed.</dd>\
<dt>Total variation</dt><dd>The most probability that the two policies give differently to any set of tokens, from 0 to 1.</dd>\
<dt>distinct-n</dt><dd>The share of an output's n-token runs that are different from each other.</dd></dl>";

#[component]
pub fn ComparePanel() -> impl IntoView {
    let pairs = url::pairs();
    // Every field is text: a bad value stays in its field and the check names it there.
    let (initial, _) = CompareForm::from_pairs(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    let texts: [(ReadSignal<String>, WriteSignal<String>); 5] =
        std::array::from_fn(|i| signal(initial.run[i].clone()));
    let a = initial.a.map(RwSignal::new);
    let b = initial.b.map(RwSignal::new);

    let phase = RwSignal::new(Phase::Idle);
    let report = RwSignal::new(None::<String>);
    let worker = PanelWorker::new();

    let form = Memo::new(move |_| CompareForm {
        run: std::array::from_fn(|i| texts[i].0.get()),
        a: a.map(|k| k.get()),
        b: b.map(|k| k.get()),
    });
    url::follow(move || form.get().to_pairs());
    let checked = Memo::new(move |_| form.get().check());
    let problems = problems_of(None, checked);
    let problem = problem_at(problems);
    let busy = move || matches!(phase.get(), Phase::Working(_));

    let on_event = move |event: Event| match event {
        Event::Working(what) => phase.set(Phase::Working(what)),
        Event::Download { file, got, total } => {
            phase.set(Phase::Working(download_words(&file, got, total)))
        }
        Event::Compared(Some(done)) => {
            report.set(Some(done.html));
            phase.set(Phase::Done(done.summary));
        }
        Event::Compared(None) => phase.set(Phase::Done(
            "Cancelled before the comparison finished.".to_string(),
        )),
        Event::Failed(message) => phase.set(Phase::Failed(message)),
        Event::Panicked(message) => phase.set(Phase::Failed(
            worker.panicked(&message, "Run again to start a new one."),
        )),
        _ => {}
    };
    let start = move || {
        if phase.with_untracked(|p| matches!(p, Phase::Working(_))) {
            return;
        }
        let Ok(request) = checked.get_untracked() else {
            return;
        };
        report.set(None);
        phase.set(Phase::Working("Starting the model worker…".to_string()));
        if let Err(message) = worker.send(&Job::Compare(Box::new(request)), on_event) {
            phase.set(Phase::Failed(message.to_string()));
        }
    };

    let field = move |i: usize| {
        let (key, id, label, hint, _) = FIELDS[i];
        let (value, set) = texts[i];
        if key == "cmp_prompt" {
            view! { <TextArea id=id problem=problem(id) label=label hint=hint value=value.into() set=set wide=true/> }.into_any()
        } else {
            view! { <Field id=id problem=problem(id) label=label hint=hint value=value.into() set=set inputmode="numeric"/> }.into_any()
        }
    };
    let policy = move |side: Side| {
        let knobs = match side {
            Side::A => a,
            Side::B => b,
        };
        view! {
            <div class="controls">{knob_fields(&SHOWN, side.names(), knobs, problem)}</div>
            {more_controls(&SHOWN, side.names(), knobs, &side.defaults(), problem)}
        }
    };

    let status = move || match phase.get() {
        Phase::Idle | Phase::Failed(_) => None,
        Phase::Working(what) => Some(view! { <p class="progress">{what}</p> }),
        Phase::Done(what) => Some(view! { <p class="done">{what}</p> }),
    };
    let error = move || match phase.get() {
        Phase::Failed(message) => Some(view! { <p class="error" role="alert">{message}</p> }),
        _ => None,
    };

    view! {
        <section class="panel compare" id="compare" aria-labelledby="compare-title" data-state=move || phase.get().key()>
            {panel_head("compare", "Compare two policies", "Both policies run on the same model, prompt and seeded stream, so where they part is the policies' doing. Along a's path, each step's logits go through both policies: KL(a‖b) and total variation say how far apart their distributions are. Then each policy runs over many seeds, and the tree of its first tokens' paths shows how often each path came up beside how likely the policy made it.", Some(TERMS), Some(problems))}
            <form class="cmp-form" on:submit=move |ev| {
                ev.prevent_default();
                start();
            }>
                <fieldset>
                    <legend>"The run both policies share"</legend>
                    <div class="controls">{(0..3).map(field).collect_view()}</div>
                </fieldset>
                <fieldset>
                    <legend>"Policy a"</legend>
                    {policy(Side::A)}
                </fieldset>
                <fieldset>
                    <legend>"Policy b"</legend>
                    {policy(Side::B)}
                </fieldset>
                <fieldset>
                    <legend>"Many seeds"</legend>
                    <div class="controls">{(3..5).map(field).collect_view()}</div>
                </fieldset>
                <div class="field buttons">
                    <button type="submit" disabled=move || busy() || checked.with(Result::is_err)>"Compare"</button>
                    <button type="button" class="secondary" disabled=move || !busy() on:click=move |_| worker.cancel()>"Cancel"</button>
                </div>
            </form>
            <div class="run" aria-live="polite" data-testid="cmp-status">{status}</div>
            {error}
            <div class="cmp-parts" inner_html=move || report.get().unwrap_or_default()></div>
        </section>
    }
}
