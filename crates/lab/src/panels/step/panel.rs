//! The decoding-step panel: logits, the tokens before the step and every policy knob of the
//! table ([`policy::KNOBS`], drawn by [`crate::widgets::knobs`]) in, every stage's
//! distribution and the chosen token out (announced in a polite live region). The sampler
//! chain can be reordered with the keyboard, and the same settings run through every
//! engine preset beside it (the conformance view). The logits can also be the tiny model's for a
//! prompt: a [`Job::PromptLogits`] to the model worker, one prefill on the CPU reference.
//! The form is [`crate::panels::step::view_model`]; the step itself is a [`Job::Step`] to
//! the same worker, answered at once ([`crate::worker::stepping`]), so the page links no
//! policy step.

use leptos::prelude::*;

use crate::panels::panel_head;
use crate::panels::step::distribution_chart::Distribution;
use crate::panels::step::draw_strip::DrawStrip;
use crate::panels::step::view_model::{
    defaults, fresh_seed, ids, logits_text, step_field, StepForm, OWN, SHOWN,
};
use crate::shell::url;
use crate::widgets::chart::mirror_table;
use crate::widgets::controls::hidden;
use crate::widgets::field::Field;
use crate::widgets::form::{problem_at, problems_of, Form, Problems};
use crate::widgets::knobs::{knob_fields, knob_labels, more_controls};
use crate::worker::protocol::PanelWorker;
use crate::worker::protocol::{download_words, EngineColumn, Event, Job, Stepped};

const ORDER: usize = policy::knob_index("order");
const SAMPLERS: usize = policy::knob_index("samplers");

#[component]
pub fn StepPanel() -> impl IntoView {
    let pairs = url::pairs();
    let (initial, url_problems) =
        StepForm::from_pairs(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    // The URL's problems with the order stay until the learner picks an order.
    let url_problems = RwSignal::new(url_problems);
    let (logits, set_logits) = signal(initial.logits);
    let (seed, set_seed) = signal(initial.seed);
    let (prompt_ids, set_prompt_ids) = signal(initial.prompt);
    let (output_ids, set_output_ids) = signal(initial.output);
    let knobs = initial.policy.map(RwSignal::new);
    let (order, samplers) = (knobs[ORDER], knobs[SAMPLERS]);
    let (seed_error, set_seed_error) = signal(None::<String>);
    let (model_prompt, set_model_prompt) = signal("The model".to_string());
    let model_status = RwSignal::new(None::<(bool, String)>);

    let form = Memo::new(move |_| StepForm {
        logits: logits.get(),
        seed: seed.get(),
        prompt: prompt_ids.get(),
        output: output_ids.get(),
        policy: knobs.map(|k| k.get()),
    });
    Effect::new(move |_| url::write(&form.get().to_pairs()));
    let checked = Memo::new(move |_| form.get().check());
    // The worker's answer to the latest step asked (by its id): the step, or the field it
    // refused.
    let step_id = StoredValue::new(0u64);
    let stepped = RwSignal::new(None::<Result<Stepped, (&'static str, String)>>);
    let result = Memo::new(move |_| match checked.get() {
        Err(problems) => Err(problems),
        Ok(_) => match stepped.get() {
            Some(Err((field, message))) => Err(Problems::one(field, message)),
            Some(Ok(step)) => Ok(Some(step)),
            None => Ok(None),
        },
    });
    let problems = problems_of(Some(url_problems), result);
    let problem = problem_at(problems);
    // Moves a sampler one place, and keeps the focus on it once the list is redrawn.
    let move_sampler = move |at: usize, up: bool| {
        let now = form.get_untracked();
        let (Some(sampler), Some(moved)) = (now.chain().get(at).copied(), now.moved(at, up)) else {
            return;
        };
        order.set(moved.knob("order").to_string());
        samplers.set(moved.knob("samplers").to_string());
        let name = sampler.name();
        let (same, other) = if up {
            ("earlier", "later")
        } else {
            ("later", "earlier")
        };
        let ids = [
            format!("chain-{name}-{same}"),
            format!("chain-{name}-{other}"),
        ];
        request_animation_frame(move || crate::shell::web::focus_first(&ids));
    };

    // The tiny model's logits for a prompt replace the typed ones (and so go into the URL).
    // The model runs in the worker; this panel keeps its own, started with the first ask.
    let worker = PanelWorker::new();
    let asked = StoredValue::new(String::new());
    // Progress counts only while the panel waits for its logits: a worker's progress that no
    // ask of this panel started must not leave the button disabled.
    let waiting = move || model_status.with_untracked(|s| matches!(s, Some((true, _))));
    let on_event = move |event: Event| match event {
        Event::Working(what) if waiting() => model_status.set(Some((true, what))),
        Event::Download { file, got, total } if waiting() => {
            model_status.set(Some((true, download_words(&file, got, total))))
        }
        Event::Logits(logits) => {
            set_logits.set(logits_text(&logits));
            model_status.set(Some((
                false,
                format!(
                    "The logits are the tiny model's scores for the token after \"{}\" ({} tokens).",
                    asked.get_value(),
                    logits.len()
                ),
            )));
        }
        Event::Stepped { id, result } if id == step_id.get_value() => stepped.set(Some(
            (*result).map_err(|r| (step_field(&r.field), r.message)),
        )),
        Event::Failed(message) => model_status.set(Some((false, message))),
        Event::Panicked(message) => model_status.set(Some((
            false,
            worker.panicked(&message, "Ask again to start a new one."),
        ))),
        // Answers to jobs this panel never sends.
        _ => {}
    };
    let take_logits = move |_| {
        if waiting() {
            return;
        }
        let prompt = model_prompt.get_untracked();
        asked.set_value(prompt.clone());
        model_status.set(Some((true, "Starting the model worker…".to_string())));
        if let Err(message) = worker.send(&Job::PromptLogits { prompt }, on_event) {
            model_status.set(Some((false, message.to_string())));
        }
    };

    // Every checked form is a step for the worker; only the latest one's answer is shown.
    Effect::new(move |_| {
        if let Ok(input) = checked.get() {
            let id = step_id.get_value() + 1;
            step_id.set_value(id);
            let job = Job::Step {
                id,
                input: Box::new(input),
            };
            if let Err(message) = worker.send(&job, on_event) {
                model_status.set(Some((false, message.to_string())));
            }
        }
    });

    let new_seed = move |_| match fresh_seed() {
        Ok(s) => {
            set_seed_error.set(None);
            set_seed.set(s.to_string());
        }
        Err(e) => set_seed_error.set(Some(e.to_string())),
    };

    // The one sentence a screen reader hears when the result changes: the region stays in
    // the DOM and only its words change, so it is said once per change (the charts and
    // tables below are not live; each chart's walk says its own moves).
    let chosen_line = move || {
        result.with(|r| {
            let view = &r.as_ref().ok()?.as_ref()?.view;
            let draw = view
                .draw
                .map(|u| format!("the uniform draw {u:.6} (seed {})", view.seed))
                .unwrap_or_else(|| "greedy: temperature 0 takes the argmax".to_string());
            Some(view! {
                "Chosen token: "
                <strong data-token=view.token>{view.token.to_string()}</strong>
                {format!(" with probability {:.4}, picked by {draw}.", view.prob)}
            })
        })
    };
    let outcome = move || match result.get() {
        Ok(Some(Stepped {
            view,
            engines,
            summary,
        })) => {
            let strip_view = view.clone();
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
                {chapter}
                <div class="stages">{stages}</div>
                <DrawStrip view=strip_view/>
                <Conformance engines=engines summary=summary/>
            }
            .into_any()
        }
        Ok(None) => view! { <p>"Taking the step…"</p> }.into_any(),
        Err(_) => view! {
            <p>"The step runs once every field reads."</p>
        }
        .into_any(),
    };

    view! {
        <section class="panel" aria-labelledby="step-title">
            {panel_head("step", "Decoding step", "Start from the logits at the newest position (and, for the penalties, the tokens before it), shape the distribution with temperature, top-k, top-p, min-p and every other stage under More controls, then sample with a seeded generator. Each stage below is drawn as bars and listed as a table.", None, Some(problems))}
            <form class="controls" on:submit=|ev| ev.prevent_default()>
                <Field id="logits" problem=problem("logits") label="Logits" hint="Comma-separated scores, one per token id." value=logits.into() set=set_logits inputmode="text"/>
                <div class="field" hidden=hidden("logits", "Or a prompt, scored by the model", None, None)>
                    <label for="model-prompt">"Or a prompt, scored by the model"</label>
                    <input
                        id="model-prompt"
                        type="text"
                        autocomplete="off"
                        aria-describedby="model-prompt-hint"
                        prop:value=move || model_prompt.get()
                        on:input=move |ev| set_model_prompt.set(event_target_value(&ev))
                    />
                    <small id="model-prompt-hint">"The tiny model's next-token scores, one per token of its vocabulary, replace the logits above."</small>
                    <button type="button" on:click=take_logits disabled=move || model_status.with(|s| matches!(s, Some((true, _))))>
                        "Use the model's scores"
                    </button>
                    <p class="progress" aria-live="polite" data-testid="model-logits-status">
                        {move || model_status.get().map(|(_, words)| words)}
                    </p>
                </div>
                {knob_fields(&SHOWN, (ids(), knob_labels("")), knobs, problem)}
                <div class="field" hidden=hidden("samplers", "Sampler chain", None, None)>
                    <span id="chain-label">"Sampler chain"</span>
                    <ol class="chain" aria-labelledby="chain-label" data-testid="sampler-chain">
                        {move || {
                            let chain = form.get().chain();
                            let last = chain.len().saturating_sub(1);
                            chain
                                .into_iter()
                                .enumerate()
                                .map(|(i, sampler)| {
                                    let name = sampler.name();
                                    view! {
                                        <li data-sampler=name>
                                            <code>{name}</code>
                                            <button type="button" id=format!("chain-{name}-earlier") aria-label=format!("Move {name} earlier") disabled=i == 0 on:click=move |_| move_sampler(i, true)>"↑"</button>
                                            <button type="button" id=format!("chain-{name}-later") aria-label=format!("Move {name} later") disabled=i == last on:click=move |_| move_sampler(i, false)>"↓"</button>
                                        </li>
                                    }
                                })
                                .collect_view()
                        }}
                    </ol>
                    <small>{move || if !samplers.with(|s| s.trim().is_empty()) { "Your order. " } else { "The engine's order. " }}"Each stage runs on what the one above it left."</small>
                    <button type="button" on:click=move |_| samplers.set(String::new()) disabled=move || samplers.with(|s| s.trim().is_empty())>"Use the engine's order"</button>
                </div>
                <Field id="seed" problem=problem("seed") label="Seed" hint="The same seed gives the same draw." value=seed.into() set=set_seed inputmode="numeric"/>
                <div class="field" hidden=hidden("seed", "New seed", None, None)>
                    <button type="button" on:click=new_seed>"New seed"</button>
                    {move || seed_error.get().map(|e| view! { <p class="error" role="alert">{e}</p> })}
                </div>
                <Field id="prompt-ids" problem=problem("prompt-ids") label="Prompt tokens" hint="The prompt's token ids before this step, e.g. 1, 3; the penalties, DRY, bad words and sequence bias read them." value=prompt_ids.into() set=set_prompt_ids inputmode="text"/>
                <Field id="output-ids" problem=problem("output-ids") label="Generated tokens" hint="The ids generated before this step, e.g. 2, 2; the output penalties and the minimum of new tokens count them." value=output_ids.into() set=set_output_ids inputmode="text"/>
                {more_controls(&[&SHOWN[..], &OWN[..]].concat(), (ids(), knob_labels("")), knobs, &defaults(), problem)}
            </form>
            <p class="chosen" id="chosen" aria-live="polite">{chosen_line}</p>
            <div class="result">{outcome}</div>
        </section>
    }
}

/// The same settings through every engine preset: each engine's final distribution side by
/// side, and in words which engines keep which tokens.
#[component]
fn Conformance(engines: Vec<EngineColumn>, summary: String) -> impl IntoView {
    let vocab = engines
        .iter()
        .filter_map(|e| e.kept.as_ref())
        .flat_map(|tokens| tokens.iter().map(|t| t.id as usize + 1))
        .max()
        .unwrap_or(0);
    let columns: Vec<Vec<Option<f64>>> = engines
        .iter()
        .map(|e| {
            let mut column = vec![None; vocab];
            if let Some(tokens) = &e.kept {
                for t in tokens {
                    column[t.id as usize] = Some(t.prob);
                }
            }
            column
        })
        .collect();
    let rows = (0..vocab)
        .map(|id| {
            let cells = columns
                .iter()
                .zip(&engines)
                .map(|(column, e)| match (&e.kept, column[id]) {
                    (None, _) => view! { <td>"refused"</td> }.into_any(),
                    (Some(_), Some(p)) => {
                        view! { <td data-value=p.to_string()>{format!("{p:.4}")}</td> }.into_any()
                    }
                    (Some(_), None) => {
                        view! { <td class="removed" data-value="0">"removed"</td> }.into_any()
                    }
                })
                .collect_view();
            view! { <tr><th scope="row">{id.to_string()}</th>{cells}</tr> }
        })
        .collect_view();
    view! {
        <div class="comparison" data-testid="engine-conformance">
            <h3>"The same settings under each engine"</h3>
            <p data-testid="conformance-summary">{summary}</p>
            {mirror_table("mirror", None, None, "Final probability of each token under the lab's rules, Hugging Face, llama.cpp and vLLM (their own orders)", &["Token", "lab", "hf", "llama.cpp", "vllm"], rows)}
        </div>
    }
}
