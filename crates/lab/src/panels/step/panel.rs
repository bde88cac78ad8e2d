//! The decoding-step panel: logits and policy controls in, every stage's distribution
//! and the chosen token out (announced in a polite live region). The sampler chain can be
//! reordered with the keyboard, and the same settings run through every engine preset
//! beside it (the conformance view). The logits can also be the tiny model's for a
//! prompt: a [`Job::PromptLogits`] to the model worker, one prefill on the CPU reference.
//! The form is [`crate::panels::step::view_model`]; the step itself is a [`Job::Step`] to
//! the same worker, answered at once ([`crate::worker::stepping`]), so the page links no
//! policy step.

use leptos::prelude::*;
use policy::{Engine, StageOrder};

use crate::panels::step::distribution_chart::Distribution;
use crate::panels::step::draw_strip::DrawStrip;
use crate::panels::step::view_model::{fresh_seed, logits_text, step_field, StepForm};
use crate::shell::url;
use crate::widgets::chart::mirror_table;
use crate::widgets::controls::hidden;
use crate::widgets::field::{chosen, options, Choice, Field};
use crate::widgets::form::{problem_at, problems_of, Form, ProblemSummary, Problems};
use crate::worker::protocol::PanelWorker;
use crate::worker::protocol::{download_words, EngineColumn, Event, Job, Stepped};

#[component]
pub fn StepPanel() -> impl IntoView {
    let pairs = url::pairs();
    let (defaults, url_problems) =
        StepForm::from_pairs(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    // The URL's problems with the order stay until the learner picks an order.
    let url_problems = RwSignal::new(url_problems);
    let (logits, set_logits) = signal(defaults.logits);
    let (temperature, set_temperature) = signal(defaults.temperature);
    let (top_k, set_top_k) = signal(defaults.top_k);
    let (top_p, set_top_p) = signal(defaults.top_p);
    let (min_p, set_min_p) = signal(defaults.min_p);
    let (seed, set_seed) = signal(defaults.seed);
    let (order, set_order) = signal(defaults.order);
    let (forbidden, set_forbidden) = signal(defaults.forbidden);
    let (bias, set_bias) = signal(defaults.bias);
    let (engine, set_engine) = signal(defaults.engine);
    let (samplers, set_samplers) = signal(defaults.samplers);
    let (typical, set_typical) = signal(defaults.typical);
    let (epsilon, set_epsilon) = signal(defaults.epsilon);
    let (eta, set_eta) = signal(defaults.eta);
    let (top_n_sigma, set_top_n_sigma) = signal(defaults.top_n_sigma);
    let (xtc_probability, set_xtc_probability) = signal(defaults.xtc_probability);
    let (xtc_threshold, set_xtc_threshold) = signal(defaults.xtc_threshold);
    let (seed_error, set_seed_error) = signal(None::<String>);
    let (model_prompt, set_model_prompt) = signal("The model".to_string());
    let model_status = RwSignal::new(None::<(bool, String)>);

    let form = Memo::new(move |_| StepForm {
        logits: logits.get(),
        temperature: temperature.get(),
        top_k: top_k.get(),
        top_p: top_p.get(),
        min_p: min_p.get(),
        seed: seed.get(),
        order: order.get(),
        forbidden: forbidden.get(),
        bias: bias.get(),
        engine: engine.get(),
        samplers: samplers.get(),
        typical: typical.get(),
        epsilon: epsilon.get(),
        eta: eta.get(),
        top_n_sigma: top_n_sigma.get(),
        xtc_probability: xtc_probability.get(),
        xtc_threshold: xtc_threshold.get(),
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
        set_order.set(moved.order);
        set_samplers.set(moved.samplers);
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
    let on_event = move |event: Event| match event {
        Event::Working(what) => model_status.set(Some((true, what))),
        Event::Download { file, got, total } => {
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
        Event::Panicked(message) => {
            worker.discard();
            model_status.set(Some((
                false,
                format!("The model worker hit an internal error and stopped: {message}. Ask again to start a new one."),
            )));
        }
        // Answers to jobs this panel never sends.
        _ => {}
    };
    let take_logits = move |_| {
        if model_status.with_untracked(|s| matches!(s, Some((true, _)))) {
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
            <h2 id="step-title">"Decoding step"</h2>
            <p>
                "Start from the logits at the newest position, shape the distribution with temperature, top-k, top-p and min-p, then sample with a seeded generator. Each stage below is drawn as bars and listed as a table."
            </p>
            <ProblemSummary problems=problems/>
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
                <Field id="temperature" problem=problem("temperature") label="Temperature" hint="0 is greedy; higher flattens." value=temperature.into() set=set_temperature/>
                <Field id="top-k" problem=problem("top-k") label="Top-k" hint="Keep the k highest; 0 is off." value=top_k.into() set=set_top_k inputmode="numeric"/>
                <Field id="top-p" problem=problem("top-p") label="Top-p" hint="Keep the smallest set with this much probability; 1 is off." value=top_p.into() set=set_top_p/>
                <Field id="min-p" problem=problem("min-p") label="Min-p" hint="Keep tokens at least this fraction of the top probability; 0 is off." value=min_p.into() set=set_min_p/>
                <Field id="seed" problem=problem("seed") label="Seed" hint="The same seed gives the same draw." value=seed.into() set=set_seed inputmode="numeric"/>
                <Field id="forbidden" problem=problem("forbidden") label="Forbidden tokens" hint="Ids that can never be chosen, e.g. 2, 3." value=forbidden.into() set=set_forbidden inputmode="text"/>
                <Field id="bias" problem=problem("bias") label="Logit bias" hint="id:value pairs added to the logits first, e.g. 1:+2, 3:-1." value=bias.into() set=set_bias inputmode="text"/>
                <Field id="typical" problem=problem("typical") label="Typical" hint="Locally typical sampling's mass; 1 is off." value=typical.into() set=set_typical/>
                <Field id="epsilon" problem=problem("epsilon") label="ε-cutoff" hint="Remove tokens below this probability; 0 is off." value=epsilon.into() set=set_epsilon/>
                <Field id="eta" problem=problem("eta") label="η-cutoff" hint="ε for min(ε, √ε·e^−H); 0 is off." value=eta.into() set=set_eta/>
                <Field id="top-n-sigma" problem=problem("top-n-sigma") label="Top-nσ" hint="Keep logits within n standard deviations of the largest; empty is off." value=top_n_sigma.into() set=set_top_n_sigma/>
                <Field id="xtc-probability" problem=problem("xtc-probability") label="XTC probability" hint="The chance a step excludes its top choices; 0 is off." value=xtc_probability.into() set=set_xtc_probability/>
                <Field id="xtc-threshold" problem=problem("xtc-threshold") label="XTC threshold" hint="The probability that makes a token a top choice." value=xtc_threshold.into() set=set_xtc_threshold/>
                <Choice id="engine" problem=problem("engine") label="Engine" options=engine_options() value=Signal::derive(move || engine.get().to_string()) set=chosen("engine", url_problems, set_engine)/>
                <Choice id="order" problem=problem("order") label="Order" options=order_options() value=Signal::derive(move || order.get().to_string()) set=chosen("order", url_problems, set_order)/>
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
                    <small>{move || if samplers.get().is_some() { "Your order. " } else { "The engine's order. " }}"Each stage runs on what the one above it left."</small>
                    <button type="button" on:click=move |_| set_samplers.set(None) disabled=move || samplers.get().is_none()>"Use the engine's order"</button>
                </div>
                <div class="field" hidden=hidden("seed", "New seed", None, None)>
                    <button type="button" on:click=new_seed>"New seed"</button>
                    {move || seed_error.get().map(|e| view! { <p class="error" role="alert">{e}</p> })}
                </div>
            </form>
            <p class="chosen" id="chosen" aria-live="polite">{chosen_line}</p>
            <div class="result">{outcome}</div>
        </section>
    }
}

/// The engine drop-down's options.
pub(crate) fn engine_options() -> Vec<(String, String)> {
    options(&[
        (Engine::Lab, "The lab's own rules (ties kept at every cut)"),
        (Engine::Hf, "Hugging Face transformers"),
        (Engine::LlamaCpp, "llama.cpp"),
        (Engine::Vllm, "vLLM"),
    ])
}

/// The order drop-down's options.
fn order_options() -> Vec<(String, String)> {
    options(&[
        (
            StageOrder::TemperatureFirst,
            "Temperature first (Hugging Face)",
        ),
        (StageOrder::TemperatureLast, "Temperature last (llama.cpp)"),
    ])
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
