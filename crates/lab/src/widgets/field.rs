//! The labelled form controls every panel uses: a one-line field and a text area, each with
//! its hint and, when the form's check finds one, its problem: the input is marked
//! `aria-invalid` and names the message in `aria-describedby`.

use leptos::prelude::*;

use crate::widgets::controls::hidden;
use crate::widgets::form::{problem_id, Problems};

/// The hint's id, then the problem's while there is one.
fn described_by(id: &str, problem: Option<Signal<Option<String>>>) -> impl Fn() -> String {
    let hint_id = format!("{id}-hint");
    let problem_id = problem_id(id);
    move || match problem.and_then(|p| p.get()) {
        Some(_) => format!("{hint_id} {problem_id}"),
        None => hint_id.clone(),
    }
}

/// The message under a field while its form has a problem with it.
fn problem_view(id: &'static str, problem: Option<Signal<Option<String>>>) -> impl IntoView {
    move || {
        problem.and_then(|p| p.get()).map(|message| {
            view! { <small id=problem_id(id) class="field-problem error">{message}</small> }
        })
    }
}

/// A labelled text field bound to one field of the form.
#[component]
pub fn Field(
    id: &'static str,
    label: &'static str,
    hint: &'static str,
    value: Signal<String>,
    set: WriteSignal<String>,
    #[prop(default = "decimal")] inputmode: &'static str,
    /// The form's problem with this field, if it has one.
    #[prop(optional, into)]
    problem: Option<Signal<Option<String>>>,
    /// Words the hint goes on with as the form changes (what the chosen engine takes).
    #[prop(optional, into)]
    more: Option<Signal<String>>,
) -> impl IntoView {
    let hint_id = format!("{id}-hint");
    let invalid = move || problem.and_then(|p| p.get()).map(|_| "true");
    view! {
        <div class="field" hidden=hidden(id, label, Some(value), problem)>
            <label for=id>{label}</label>
            <input
                id=id
                name=id
                type="text"
                inputmode=inputmode
                autocomplete="off"
                aria-invalid=invalid
                aria-describedby=described_by(id, problem)
                prop:value=move || value.get()
                on:input=move |ev| set.set(event_target_value(&ev))
            />
            <small id=hint_id>{hint}{move || more.map(|m| m.get())}</small>
            {problem_view(id, problem)}
        </div>
    }
}

/// A labelled two-line text area bound to one field of the form; `wide` gives it the
/// whole row.
#[component]
pub fn TextArea(
    id: &'static str,
    label: &'static str,
    hint: &'static str,
    value: Signal<String>,
    set: WriteSignal<String>,
    #[prop(default = false)] wide: bool,
    /// The form's problem with this field, if it has one.
    #[prop(optional, into)]
    problem: Option<Signal<Option<String>>>,
    /// Words the hint goes on with as the form changes.
    #[prop(optional, into)]
    more: Option<Signal<String>>,
) -> impl IntoView {
    let hint_id = format!("{id}-hint");
    let invalid = move || problem.and_then(|p| p.get()).map(|_| "true");
    view! {
        <div class=if wide { "field wide" } else { "field" } hidden=hidden(id, label, Some(value), problem)>
            <label for=id>{label}</label>
            <textarea
                id=id
                name=id
                rows="2"
                aria-invalid=invalid
                aria-describedby=described_by(id, problem)
                prop:value=move || value.get()
                on:input=move |ev| set.set(event_target_value(&ev))
            ></textarea>
            <small id=hint_id>{hint}{move || more.map(|m| m.get())}</small>
            {problem_view(id, problem)}
        </div>
    }
}

/// A labelled drop-down bound to one field of the form. `options` are (value, words);
/// `set` gets the chosen value. The fixed-settings sentence states the chosen words.
#[component]
pub fn Choice(
    id: &'static str,
    label: &'static str,
    options: Vec<(String, String)>,
    /// The chosen option's value.
    #[prop(into)]
    value: Signal<String>,
    set: Callback<String>,
    /// The form's problem with this field, if it has one.
    #[prop(optional, into)]
    problem: Option<Signal<Option<String>>>,
) -> impl IntoView {
    let invalid = move || problem.and_then(|p| p.get()).map(|_| "true");
    let words = {
        let options = options.clone();
        Signal::derive(move || {
            let chosen = value.get();
            options
                .iter()
                .find(|(v, _)| *v == chosen)
                .map_or(chosen.clone(), |(_, words)| words.clone())
        })
    };
    let options = options
        .into_iter()
        .map(|(v, words)| {
            let chosen = v.clone();
            view! { <option value=v prop:selected=move || value.get() == chosen>{words}</option> }
        })
        .collect_view();
    view! {
        <div class="field" hidden=hidden(id, label, Some(words), problem)>
            <label for=id>{label}</label>
            <select
                id=id
                aria-invalid=invalid
                aria-describedby=move || problem.and_then(|p| p.get()).map(|_| problem_id(id))
                on:change=move |ev| set.run(event_target_value(&ev))
            >
                {options}
            </select>
            {problem_view(id, problem)}
        </div>
    }
}

/// A [`Choice`]'s `set` for a typed field: the URL's problem with `id` goes, since the
/// learner chose, and the chosen value (always one the options offer) is set.
pub fn chosen<T: std::str::FromStr + Send + Sync + 'static>(
    id: &'static str,
    url_problems: RwSignal<Problems>,
    set: WriteSignal<T>,
) -> Callback<String> {
    Callback::new(move |chosen: String| {
        url_problems.update(|p| *p = p.without(id));
        if let Ok(chosen) = chosen.parse() {
            set.set(chosen);
        }
    })
}

/// A [`Choice`]'s options from (value, words) pairs.
pub fn options<T: std::fmt::Display>(pairs: &[(T, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(value, words)| (value.to_string(), words.to_string()))
        .collect()
}
