//! The "Your turn" panel: the chapter's predict-then-reveal exercise. The learner predicts
//! which of temperature 0.2 and 1.5 varies more, runs both over N seeds on the tiny model
//! (CPU reference, in the model worker), and sees the outputs, their entropy, a chart with
//! its table, the verdict, then the chapter's hint and reasoning. The prediction is a radio
//! group that enables Run. It only draws; [`crate::panels::your_turn::view_model`] holds the
//! data, and the runs are a [`Job::Exercise`] for the model worker.

use leptos::prelude::*;

use crate::js::now_ms;
use crate::panels::panel_head;
use crate::panels::your_turn::view_model::{
    knob_names, policy_defaults, verdict, ExerciseForm, Prediction, Results, Summary, HINT,
    NOT_SHOWN, QUESTION, REASONING,
};
use crate::shell::url;
use crate::widgets::chart::{mirror_table, walk_notes};
use crate::widgets::field::{Field, TextArea};
use crate::widgets::form::{problem_at, problems_of, Form};
use crate::widgets::knobs::more_controls;
use crate::worker::protocol::{download_words, Event, Finished, Job, PanelWorker, TOP_K};

/// What the panel is doing.
#[derive(Clone, Debug, PartialEq)]
enum Phase {
    Idle,
    /// Fetching files or starting the CPU reference; the words say which.
    Loading(String),
    Running,
    Done,
    Cancelled(String),
    Failed(String),
}

impl Phase {
    fn key(&self) -> &'static str {
        match self {
            Phase::Idle => "idle",
            Phase::Loading(_) => "loading",
            Phase::Running => "running",
            Phase::Done => "done",
            Phase::Cancelled(_) => "cancelled",
            Phase::Failed(_) => "failed",
        }
    }

    fn busy(&self) -> bool {
        matches!(self, Phase::Loading(_) | Phase::Running)
    }
}

/// The live region speaks at most this often while runs go by, in milliseconds.
const ANNOUNCE_EVERY_MS: f64 = 1500.0;

#[component]
pub fn YourTurnPanel() -> impl IntoView {
    let pairs = url::pairs();
    // Every field is text, so the URL's pairs alone hold no problem: a bad value stays in
    // its field and the check below names it there.
    let (initial, _) =
        ExerciseForm::from_pairs(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())));

    let (prompt, set_prompt) = signal(initial.prompt);
    let (seeds, set_seeds) = signal(initial.seeds);
    let (max_tokens, set_max_tokens) = signal(initial.max_tokens);
    let (first_seed, set_first_seed) = signal(initial.first_seed);
    let knobs = initial.policy.map(RwSignal::new);
    let prediction = RwSignal::new(None::<Prediction>);

    let phase = RwSignal::new(Phase::Idle);
    let progress = RwSignal::new(None::<(usize, usize)>);
    let announcement = RwSignal::new(String::new());
    let results = RwSignal::new(None::<(Results, Prediction)>);
    // The model worker, started with the first run; a panic in it drops it for a new one.
    let worker = PanelWorker::new();
    // The prediction of the run in progress, and when the live region last spoke.
    let predicted = StoredValue::new(None::<Prediction>);
    let announced_at = StoredValue::new(f64::NEG_INFINITY);

    let form = Memo::new(move |_| ExerciseForm {
        prompt: prompt.get(),
        seeds: seeds.get(),
        max_tokens: max_tokens.get(),
        first_seed: first_seed.get(),
        policy: knobs.map(|k| k.get()),
    });

    url::follow(move || form.get().to_pairs());
    let checked = Memo::new(move |_| form.get().check());
    let problems = problems_of(None, checked);
    let problem = problem_at(problems);

    let busy = move || phase.with(Phase::busy);

    let on_event = move |event: Event| match event {
        Event::Working(what) => phase.set(Phase::Loading(what)),
        Event::Download { file, got, total } => {
            phase.set(Phase::Loading(download_words(&file, got, total)))
        }
        Event::Generating => phase.set(Phase::Running),
        Event::ExerciseRun(p) => {
            progress.set(Some((p.index, p.total)));
            let now = now_ms();
            if now - announced_at.get_value() >= ANNOUNCE_EVERY_MS {
                announced_at.set_value(now);
                announcement.set(format!(
                    "Run {} of {}: temperature {}, seed {}…",
                    p.index + 1,
                    p.total,
                    p.temperature,
                    p.seed
                ));
            }
        }
        Event::ExerciseDone(finished) => match *finished {
            Finished::Complete { exercise, samples } => {
                let done = Results::new(*exercise, samples);
                let total = done.exercise.total_runs();
                progress.set(Some((total, total)));
                announcement.set(format!(
                    "All {total} runs are done; the comparison is below."
                ));
                if let Some(p) = predicted.get_value() {
                    results.set(Some((done, p)));
                }
                phase.set(Phase::Done);
            }
            Finished::Cancelled { done, total } => {
                announcement.set(String::new());
                phase.set(Phase::Cancelled(format!(
                    "Cancelled after {done} of {total} runs. Run again to see the comparison."
                )));
            }
        },
        Event::Failed(message) => phase.set(Phase::Failed(message)),
        Event::Panicked(message) => phase.set(Phase::Failed(
            worker.panicked(&message, "Run again to start a new one."),
        )),
        // Answers to jobs this panel never sends.
        _ => {}
    };

    let start_run = move || {
        if phase.with_untracked(Phase::busy) {
            return;
        }
        let Some(p) = prediction.get_untracked() else {
            phase.set(Phase::Failed(
                "Choose a prediction first: the exercise is to predict before you see the runs."
                    .to_string(),
            ));
            return;
        };
        // Run waits while a field has a problem (each is named at its field and above the
        // form); the worker gets the checked exercise.
        let Ok(exercise) = checked.get_untracked() else {
            return;
        };
        predicted.set_value(Some(p));
        results.set(None);
        progress.set(None);
        announcement.set(String::new());
        announced_at.set_value(f64::NEG_INFINITY);
        phase.set(Phase::Loading("Starting the model worker…".to_string()));
        if let Err(message) = worker.send(&Job::Exercise(Box::new(exercise)), on_event) {
            phase.set(Phase::Failed(message.to_string()));
        }
    };

    let radios = Prediction::ALL
        .into_iter()
        .map(|p| {
            let id = format!("yt-predict-{}", p.slug());
            view! {
                <div class="yt-choice">
                    <input
                        type="radio"
                        id=id.clone()
                        name="yt-prediction"
                        value=p.slug()
                        prop:checked=move || prediction.get() == Some(p)
                        disabled=busy
                        on:change=move |_| prediction.set(Some(p))
                    />
                    <label for=id>{p.label()}</label>
                </div>
            }
        })
        .collect_view();

    let run_note = move || {
        match prediction.get() {
        None => "Choose a prediction above to enable Run.".to_string(),
        Some(_) if checked.with(Result::is_err) => {
            "Run waits until every field reads; the fields to change are listed above.".to_string()
        }
        Some(p) => format!(
            "Your prediction: {}. Run compares both temperatures over the same seeds on the CPU reference.",
            p.label().to_lowercase()
        ),
    }
    };

    let status = move || match phase.get() {
        Phase::Idle | Phase::Failed(_) => None,
        Phase::Loading(what) => Some(view! { <p class="progress">{what}</p> }.into_any()),
        Phase::Running => {
            Some(view! { <p class="progress">{move || announcement.get()}</p> }.into_any())
        }
        Phase::Done => Some(view! { <p class="done">{move || announcement.get()}</p> }.into_any()),
        Phase::Cancelled(what) => Some(view! { <p class="done">{what}</p> }.into_any()),
    };
    let error = move || match phase.get() {
        Phase::Failed(message) => Some(view! { <p class="error" role="alert">{message}</p> }),
        _ => None,
    };
    let bar = move || {
        progress.get().map(|(done, total)| {
            view! {
                <div class="field yt-progress">
                    <label for="yt-progress">"Runs"</label>
                    <progress id="yt-progress" max=total value=done>
                        {format!("{done} of {total}")}
                    </progress>
                </div>
            }
        })
    };

    let reveal = move || {
        results
            .get()
            .map(|(r, p)| view! { <Reveal results=r prediction=p/> })
    };

    view! {
        <section class="panel your-turn" id="your-turn" aria-labelledby="your-turn-title" data-state=move || phase.get().key()>
            {panel_head("your-turn", "Your turn", "Pause and predict before revealing the answer.", None, Some(problems))}
            <form class="yt-form" on:submit=move |ev| {
                ev.prevent_default();
                start_run();
            }>
                <fieldset class="yt-predict">
                    <legend>"1. Predict: " {QUESTION}</legend>
                    {radios}
                </fieldset>
                <details class="yt-hint">
                    <summary>"Need a hint?"</summary>
                    <p>{HINT}</p>
                </details>
                <fieldset class="yt-settings-form">
                    <legend>"2. Choose what to run"</legend>
                    <p class="yt-explain">
                        {format!(
                            "Both settings keep the chapter's top-k of {TOP_K} (and any knob you add under More controls) and use the same consecutive seeds, so the only difference is the temperature."
                        )}
                    </p>
                    <div class="controls">
                        <TextArea id="yt-prompt" problem=problem("yt-prompt") label="Prompt" hint="The text the model continues in every run." value=prompt.into() set=set_prompt wide=true/>
                        <Field id="yt-n" problem=problem("yt-n") label="Seeds per temperature" hint="How many runs each setting gets (1 to 32)." value=seeds.into() set=set_seeds inputmode="numeric"/>
                        <Field id="yt-max" problem=problem("yt-max") label="Max new tokens" hint="Per run (1 to 64). Long outputs all differ, even at 0.2." value=max_tokens.into() set=set_max_tokens inputmode="numeric"/>
                        <Field id="yt-seed" problem=problem("yt-seed") label="First seed" hint="Seeds run from this one upwards, the same for both settings." value=first_seed.into() set=set_first_seed inputmode="numeric"/>
                        {more_controls(&NOT_SHOWN, knob_names(), knobs, &policy_defaults(), problem)}
                    </div>
                </fieldset>
                <div class="field buttons">
                    <button
                        type="submit"
                        aria-describedby="yt-run-note"
                        disabled=move || busy() || prediction.get().is_none() || checked.with(Result::is_err)
                    >
                        "3. Run both"
                    </button>
                    <button
                        type="button"
                        class="secondary"
                        disabled=move || !busy()
                        on:click=move |_| worker.cancel()
                    >
                        "Cancel"
                    </button>
                </div>
                <p id="yt-run-note" class="yt-run-note">{run_note}</p>
            </form>
            {bar}
            <div class="run" aria-live="polite" data-testid="yt-status">{status}</div>
            {error}
            {reveal}
        </section>
    }
}

/// The reveal: the verdict, the chart and its table, each setting's outputs, then the
/// chapter's hint and reasoning.
#[component]
fn Reveal(results: Results, prediction: Prediction) -> impl IntoView {
    let verdict = verdict(prediction, &results);
    let settings = results
        .summaries
        .iter()
        .map(|s| view! { <SettingOutputs summary=s.clone() prompt=results.exercise.prompt.clone()/> })
        .collect_view();
    view! {
        <section class="yt-reveal" aria-labelledby="yt-reveal-title" data-testid="yt-reveal">
            <h3 id="yt-reveal-title">"What the model did"</h3>
            <p class="yt-verdict" data-right=verdict.right.to_string()>
                <strong>{verdict.headline}</strong>
            </p>
            <p>{verdict.evidence}</p>
            <Comparison summaries=results.summaries.clone()/>
            <div class="yt-settings">{settings}</div>
            <h3>"Check your reasoning"</h3>
            <p><strong>"Hint: "</strong>{HINT}</p>
            <p data-testid="yt-reasoning">{REASONING}</p>
        </section>
    }
}

/// One setting's outputs, duplicates grouped with their count and seeds.
#[component]
fn SettingOutputs(summary: Summary, prompt: String) -> impl IntoView {
    let title = format!("Temperature {}", summary.temperature);
    let line = format!(
        "{} runs, {} distinct {} ({} distinct first {}); mean entropy {:.3} bits ({:.3} nats) per token; the chosen token's probability averaged {:.3}.",
        summary.runs,
        summary.distinct,
        if summary.distinct == 1 { "output" } else { "outputs" },
        summary.distinct_first,
        if summary.distinct_first == 1 { "token" } else { "tokens" },
        summary.mean_entropy_bits(),
        summary.mean_entropy_nats,
        summary.mean_chosen_prob,
    );
    let groups = summary
        .groups
        .iter()
        .map(|g| {
            let n = g.seeds.len();
            let seeds = g
                .seeds
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ");
            let times = if n == 1 {
                format!("once (seed {seeds})")
            } else {
                format!("{n} times (seeds {seeds})")
            };
            view! {
                <li data-count=n>
                    <span class="yt-text">
                        <span class="prompt-echo">{prompt.clone()}</span>
                        {g.text.clone()}
                    </span>
                    <small class="yt-count">{times}</small>
                </li>
            }
        })
        .collect_view();
    view! {
        <div class="yt-setting" data-temperature=summary.temperature.to_string() data-distinct=summary.distinct>
            <h4>{title}</h4>
            <p>{line}</p>
            <ol class="yt-outputs">{groups}</ol>
        </div>
    }
}

const WIDTH: f64 = 400.0;
const HEIGHT: f64 = 178.0;
const TOP: f64 = 36.0;
const AXIS: f64 = 36.0;

/// Distinct outputs and mean entropy per setting: SVG bars and a table, from the same rows.
#[component]
fn Comparison(summaries: [Summary; 2]) -> impl IntoView {
    let runs = summaries.iter().map(|s| s.runs).max().unwrap_or(1).max(1) as f64;
    // Three tokens can hold at most log2(3) bits; a tie at the k-th logit can keep more.
    let bits_max = summaries
        .iter()
        .map(Summary::mean_entropy_bits)
        .fold((TOP_K as f64).log2(), f64::max);
    let plot = HEIGHT - TOP - AXIS;
    let half = WIDTH / 2.0;
    let bar = half / 4.0;
    let bars = |metric: usize| {
        summaries
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let (value, scale, text) = match metric {
                    0 => (s.distinct as f64, runs, s.distinct.to_string()),
                    _ => {
                        let b = s.mean_entropy_bits();
                        (b, bits_max, format!("{b:.2}"))
                    }
                };
                let h = (value / scale).clamp(0.0, 1.0) * plot;
                let x = metric as f64 * half + bar * (0.75 + 1.5 * i as f64);
                view! {
                    <rect x=x y=TOP + plot - h width=bar height=h.max(1.0) class=format!("bar yt-bar-{i}") data-point=i data-sound=value></rect>
                    <text x=x + bar / 2.0 y=TOP + plot - h - 4.0 text-anchor="middle" class="axis-label">{text}</text>
                    <text x=x + bar / 2.0 y=HEIGHT - AXIS + 14.0 text-anchor="middle" class="axis-label">{s.temperature.to_string()}</text>
                }
            })
            .collect_view()
    };
    let label = format!(
        "Distinct outputs of {}: {} at temperature {} and {} at {}. Mean entropy per token: {:.2} bits and {:.2} bits.",
        runs,
        summaries[0].distinct,
        summaries[0].temperature,
        summaries[1].distinct,
        summaries[1].temperature,
        summaries[0].mean_entropy_bits(),
        summaries[1].mean_entropy_bits(),
    );
    let rows = summaries
        .iter()
        .map(|s| {
            let bits = s.mean_entropy_bits();
            view! {
                <tr>
                    <th scope="row">{s.temperature.to_string()}</th>
                    <td data-value=s.runs>{s.runs.to_string()}</td>
                    <td data-value=s.distinct>{s.distinct.to_string()}</td>
                    <td data-value=s.distinct_first>{s.distinct_first.to_string()}</td>
                    <td data-value=bits.to_string()>{format!("{bits:.3}")}</td>
                    <td data-value=s.mean_entropy_nats.to_string()>{format!("{:.3}", s.mean_entropy_nats)}</td>
                    <td data-value=s.mean_chosen_prob.to_string()>{format!("{:.3}", s.mean_chosen_prob)}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <figure class="stage yt-chart" data-walk="">
            <figcaption>"Distinct outputs and mean entropy per setting"</figcaption>
            <p class="takeaway">{label.clone()}</p>
            <svg class="chart" viewBox=format!("0 0 {WIDTH} {HEIGHT}") tabindex="0" role="application" aria-label=label data-walk-chart="">
                <text x=half / 2.0 y="14" text-anchor="middle" class="axis-label">{format!("Distinct outputs (of {runs})")}</text>
                <text x=half + half / 2.0 y="14" text-anchor="middle" class="axis-label">{format!("Entropy, bits per token (max {bits_max:.2})")}</text>
                <line x1="0" y1=TOP + plot x2=WIDTH y2=TOP + plot class="axis"></line>
                <line x1=half y1=TOP x2=half y2=TOP + plot class="axis"></line>
                {bars(0)}
                {bars(1)}
                <text x=half y=HEIGHT - 4.0 text-anchor="middle" class="axis-label">"temperature"</text>
            </svg>
            {walk_notes()}
            {mirror_table("mirror", None, Some("yt-table"), "For each temperature: distinct outputs and first tokens. Mean entropy per token. Mean probability of the chosen token.", &["Temperature", "Runs", "Distinct outputs", "Distinct first tokens", "Entropy (bits/token)", "Entropy (nats/token)", "Chosen-token probability"], rows)}
        </figure>
    }
}
