//! The decoding-step panel: logits and policy controls in, every stage's distribution
//! and the chosen token out.

use leptos::prelude::*;
use policy::StageOrder;

use crate::distribution::Distribution;
use crate::engine::{fresh_seed, run_step, StepForm};

/// A labelled text field bound to one field of the form.
#[component]
pub(crate) fn Field(
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

#[component]
pub fn StepPanel() -> impl IntoView {
    let defaults = StepForm::default();
    let (logits, set_logits) = signal(defaults.logits);
    let (temperature, set_temperature) = signal(defaults.temperature);
    let (top_k, set_top_k) = signal(defaults.top_k);
    let (top_p, set_top_p) = signal(defaults.top_p);
    let (min_p, set_min_p) = signal(defaults.min_p);
    let (seed, set_seed) = signal(defaults.seed);
    let (order, set_order) = signal(defaults.order);
    let (seed_error, set_seed_error) = signal(None::<String>);

    let result = Memo::new(move |_| {
        run_step(&StepForm {
            logits: logits.get(),
            temperature: temperature.get(),
            top_k: top_k.get(),
            top_p: top_p.get(),
            min_p: min_p.get(),
            seed: seed.get(),
            order: order.get(),
        })
    });

    let new_seed = move |_| match fresh_seed() {
        Ok(s) => {
            set_seed_error.set(None);
            set_seed.set(s.to_string());
        }
        Err(e) => set_seed_error.set(Some(e)),
    };

    let outcome = move || match result.get() {
        Ok(view) => {
            let draw = view
                .draw
                .map(|u| format!("the uniform draw {u:.6} (seed {})", view.seed))
                .unwrap_or_else(|| "greedy: temperature 0 takes the argmax".to_string());
            let chapter = view.chapter_line.clone().map(|line| {
                view! {
                    <p class="chapter-line">
                        "The chapter's decode.py prints for these logits, temperature, top-k and seed: "
                        <code>{line}</code>
                    </p>
                }
            });
            let stages = view
                .stages
                .into_iter()
                .enumerate()
                .map(|(i, stage)| view! { <Distribution stage=stage index=i/> })
                .collect_view();
            view! {
                <p class="chosen" id="chosen">
                    "Chosen token: "
                    <strong data-token=view.token>{view.token.to_string()}</strong>
                    {format!(" with probability {:.4}, picked by {draw}.", view.prob)}
                </p>
                {chapter}
                <div class="stages">{stages}</div>
            }
            .into_any()
        }
        Err(message) => view! {
            <p class="error" role="alert">{message}</p>
        }
        .into_any(),
    };

    view! {
        <section class="panel" aria-labelledby="step-title">
            <h2 id="step-title">"Decoding step"</h2>
            <p>
                "Start from the logits at the newest position, shape the distribution with temperature, top-k, top-p and min-p, then sample with a seeded generator. Each stage below is drawn as bars and listed as a table."
            </p>
            <form class="controls" on:submit=|ev| ev.prevent_default()>
                <Field id="logits" label="Logits" hint="Comma-separated scores, one per token id." value=logits.into() set=set_logits inputmode="text"/>
                <Field id="temperature" label="Temperature" hint="0 is greedy; higher flattens." value=temperature.into() set=set_temperature/>
                <Field id="top-k" label="Top-k" hint="Keep the k highest; 0 is off." value=top_k.into() set=set_top_k inputmode="numeric"/>
                <Field id="top-p" label="Top-p" hint="Keep the smallest set with this much probability; 1 is off." value=top_p.into() set=set_top_p/>
                <Field id="min-p" label="Min-p" hint="Keep tokens at least this fraction of the top probability; 0 is off." value=min_p.into() set=set_min_p/>
                <Field id="seed" label="Seed" hint="The same seed gives the same draw." value=seed.into() set=set_seed inputmode="numeric"/>
                <div class="field">
                    <label for="order">"Order"</label>
                    <select
                        id="order"
                        on:change=move |ev| {
                            set_order.set(if event_target_value(&ev) == "temperature-last" {
                                StageOrder::TemperatureLast
                            } else {
                                StageOrder::TemperatureFirst
                            })
                        }
                    >
                        <option value="hf" selected=move || order.get() == StageOrder::TemperatureFirst>
                            "Temperature first (Hugging Face)"
                        </option>
                        <option value="temperature-last" selected=move || order.get() == StageOrder::TemperatureLast>
                            "Temperature last (llama.cpp)"
                        </option>
                    </select>
                </div>
                <div class="field">
                    <button type="button" on:click=new_seed>"New seed"</button>
                    {move || seed_error.get().map(|e| view! { <p class="error" role="alert">{e}</p> })}
                </div>
            </form>
            <div class="result" aria-live="polite">{outcome}</div>
        </section>
    }
}
