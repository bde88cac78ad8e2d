//! The labelled form controls every panel uses: a one-line field and a text area, each with
//! its hint and, when the form's check finds one, its problem: the input is marked
//! `aria-invalid` and names the message in `aria-describedby`.

use leptos::prelude::*;

use crate::widgets::form::problem_id;

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
) -> impl IntoView {
    let hint_id = format!("{id}-hint");
    let invalid = move || problem.and_then(|p| p.get()).map(|_| "true");
    view! {
        <div class="field">
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
            <small id=hint_id>{hint}</small>
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
) -> impl IntoView {
    let hint_id = format!("{id}-hint");
    let invalid = move || problem.and_then(|p| p.get()).map(|_| "true");
    view! {
        <div class=if wide { "field wide" } else { "field" }>
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
            <small id=hint_id>{hint}</small>
            {problem_view(id, problem)}
        </div>
    }
}
