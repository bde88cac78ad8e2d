//! The labelled form controls every panel uses: a one-line field and a text area, each with
//! its hint.

use leptos::prelude::*;

/// A labelled text field bound to one field of the form.
#[component]
pub fn Field(
    id: &'static str,
    label: &'static str,
    hint: &'static str,
    value: Signal<String>,
    set: WriteSignal<String>,
    #[prop(default = "decimal")] inputmode: &'static str,
) -> impl IntoView {
    let hint_id = format!("{id}-hint");
    view! {
        <div class="field">
            <label for=id>{label}</label>
            <input
                id=id
                name=id
                type="text"
                inputmode=inputmode
                autocomplete="off"
                aria-describedby=hint_id.clone()
                prop:value=move || value.get()
                on:input=move |ev| set.set(event_target_value(&ev))
            />
            <small id=hint_id>{hint}</small>
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
) -> impl IntoView {
    let hint_id = format!("{id}-hint");
    view! {
        <div class=if wide { "field wide" } else { "field" }>
            <label for=id>{label}</label>
            <textarea
                id=id
                name=id
                rows="2"
                aria-describedby=hint_id.clone()
                prop:value=move || value.get()
                on:input=move |ev| set.set(event_target_value(&ev))
            ></textarea>
            <small id=hint_id>{hint}</small>
        </div>
    }
}
