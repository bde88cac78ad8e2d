//! The checkpoint panel: the chapter's questions as radio groups, an explanation under each
//! once answered, the score against the 80 % pass mark, and progress kept in localStorage
//! (see [`crate::panels::checkpoint::view_model`] for the format; a blocked or missing storage only means the
//! answers last as long as the page).

use std::fmt;

use leptos::prelude::*;

use crate::panels::checkpoint::view_model::{
    restore, Progress, PASS_PERCENT, QUESTIONS, STORAGE_KEY,
};

/// Why the progress could not be kept in (or read from, or cleared from) localStorage.
#[derive(Clone, Copy, Debug, PartialEq)]
enum StorageError {
    NoWindow,
    Blocked,
    NoStorage,
    Read,
    Write,
    Clear,
}

impl fmt::Display for StorageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StorageError::NoWindow => "this page has no window",
            StorageError::Blocked => "the browser blocks localStorage here",
            StorageError::NoStorage => "this browser has no localStorage",
            StorageError::Read => "localStorage could not be read",
            StorageError::Write => "localStorage refused to store it (full or blocked)",
            StorageError::Clear => "localStorage could not be cleared",
        })
    }
}

fn storage() -> Result<web_sys::Storage, StorageError> {
    web_sys::window()
        .ok_or(StorageError::NoWindow)?
        .local_storage()
        .map_err(|_| StorageError::Blocked)?
        .ok_or(StorageError::NoStorage)
}

fn load() -> Result<Option<String>, StorageError> {
    storage()?
        .get_item(STORAGE_KEY)
        .map_err(|_| StorageError::Read)
}

fn save(progress: &Progress) -> Result<(), StorageError> {
    storage()?
        .set_item(STORAGE_KEY, &progress.to_storage())
        .map_err(|_| StorageError::Write)
}

fn forget() -> Result<(), StorageError> {
    storage()?
        .remove_item(STORAGE_KEY)
        .map_err(|_| StorageError::Clear)
}

fn unsaved(why: StorageError) -> String {
    format!("Progress is not saved in this browser ({why}); answers last until the page closes.")
}

#[component]
pub fn CheckpointPanel() -> impl IntoView {
    let (initial, message) = match load() {
        Ok(saved) => restore(saved.as_deref()),
        Err(why) => (Progress::default(), Some(unsaved(why))),
    };
    let restored = initial.answered();
    let progress = RwSignal::new(initial);
    let notice = RwSignal::new(message);
    let info = RwSignal::new(
        (restored > 0).then(|| format!("Restored {restored} saved answer(s) from this browser.")),
    );

    let choose = move |question: usize, option: usize| {
        let mut changed = false;
        progress.update(|p| changed = p.choose(question, option));
        if changed {
            if let Err(why) = progress.with_untracked(save) {
                notice.set(Some(unsaved(why)));
            }
        }
    };
    // The option selected but not yet checked, per question: arrow keys move the selection
    // within a radio group, so a selection alone must not be final.
    let pending: [RwSignal<Option<usize>>; QUESTIONS.len()] =
        std::array::from_fn(|_| RwSignal::new(None));
    let reset = move |_| {
        progress.set(Progress::default());
        for p in pending {
            p.set(None);
        }
        info.set(None);
        notice.set(forget().err().map(unsaved));
    };

    let questions = QUESTIONS
        .iter()
        .enumerate()
        .map(|(qi, q)| {
            let answered = move || progress.with(|p| p.answer(qi).is_some());
            let options = q
                .options
                .iter()
                .enumerate()
                .map(|(oi, text)| {
                    let id = format!("checkpoint-{}-{oi}", q.id);
                    view! {
                        <div class="checkpoint-option">
                            <input
                                type="radio"
                                id=id.clone()
                                name=format!("checkpoint-{}", q.id)
                                value=oi.to_string()
                                prop:checked=move || {
                                    progress.with(|p| p.answer(qi)).or(pending[qi].get()) == Some(oi)
                                }
                                on:change=move |_| pending[qi].set(Some(oi))
                            />
                            <label for=id>{*text}</label>
                        </div>
                    }
                })
                .collect_view();
            let feedback = move || {
                let chosen = progress.with(|p| p.answer(qi))?;
                let right = chosen == q.answer;
                let verdict = if right {
                    "Correct.".to_string()
                } else {
                    format!("Not quite: the answer is \u{201c}{}\u{201d}.", q.options[q.answer])
                };
                Some(view! {
                    <div class="checkpoint-feedback" data-correct=right.to_string()>
                        <p class=if right { "checkpoint-right" } else { "checkpoint-wrong" }>
                            <strong>{verdict}</strong>
                        </p>
                        <p>{q.explanation}</p>
                    </div>
                })
            };
            view! {
                <fieldset class="checkpoint-question" id=format!("checkpoint-{}", q.id) disabled=answered>
                    <legend>{format!("{}. {}", qi + 1, q.prompt)}</legend>
                    {options}
                    <button
                        type="button"
                        class="secondary"
                        disabled=move || answered() || pending[qi].get().is_none()
                        on:click=move |_| {
                            if let Some(option) = pending[qi].get_untracked() {
                                choose(qi, option);
                            }
                        }
                    >
                        "Check answer"
                    </button>
                    <div aria-live="polite">{feedback}</div>
                </fieldset>
            }
        })
        .collect_view();

    let total = QUESTIONS.len();
    let needed = (PASS_PERCENT * total).div_ceil(100);
    let score = move || {
        progress.with(|p| {
            let (answered, correct) = (p.answered(), p.correct());
            let status = if p.passed() {
                "Passed.".to_string()
            } else if answered == total {
                "Not passed: Reset to try again.".to_string()
            } else {
                "Not passed yet.".to_string()
            };
            view! {
                <p class="checkpoint-score" data-answered=answered data-correct=correct data-passed=p.passed().to_string()>
                    {format!(
                        "Answered {answered} of {total}; {correct} correct ({:.1} % of all {total}). The pass mark is {PASS_PERCENT} % ({needed} of {total}). ",
                        p.percent()
                    )}
                    <strong>{status}</strong>
                </p>
            }
        })
    };

    view! {
        <section class="panel" aria-labelledby="checkpoint-title">
            <h2 id="checkpoint-title">"Checkpoint"</h2>
            <p>
                {format!("Predict before you look: select an option and press Check answer. A checked answer is final, and its explanation appears under it. Passing takes {PASS_PERCENT} % of the questions. Your answers are kept in this browser only.")}
            </p>
            {move || info.get().map(|m| view! { <p class="progress">{m}</p> })}
            {move || notice.get().map(|m| view! { <p class="error" role="alert">{m}</p> })}
            <div class="checkpoint-summary" aria-live="polite">{score}</div>
            <form class="checkpoint" on:submit=|ev| ev.prevent_default()>
                {questions}
            </form>
            <div class="field buttons">
                <button type="button" class="secondary" id="checkpoint-reset" on:click=reset>"Reset"</button>
            </div>
        </section>
    }
}
