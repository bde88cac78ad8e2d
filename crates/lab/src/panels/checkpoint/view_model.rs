//! The chapter's checkpoint: multiple-choice questions on temperature, top-k, the order of
//! operations, stop reasons, KV memory and the throughput-versus-tail-latency failure, each
//! explained once answered; passed at 80 % or more of all the questions.
//!
//! Progress (the option chosen for each answered question) is saved in the browser's
//! localStorage under [`STORAGE_KEY`] as `{"version":1,"answers":{"<id>":<option>}}`;
//! anything else found there is ignored with a message. An answer is final until Reset,
//! because its explanation gives the right one away. The checkpoint keeps nothing in the
//! URL: a shared link should not carry someone's answers.
//!
//! So it has no [`Form`](crate::widgets::form::Form): nothing is typed (an answer is a
//! radio button, so every choice is an option), and nothing comes from or goes to the
//! URL. What can be wrong is the saved text, which is not a field the learner can fix:
//! [`restore`] turns it into one notice and a fresh start.

use std::fmt;

use serde_json::{json, Map, Value};

/// Where progress is saved.
pub const STORAGE_KEY: &str = "decode-lab.checkpoint.v1";

/// The pass mark, in percent of all the questions.
pub const PASS_PERCENT: usize = 80;

/// One question: the prompt, its options, which is right and why.
#[derive(Debug)]
pub struct Question {
    /// Stable: progress is saved under it.
    pub id: &'static str,
    pub prompt: &'static str,
    pub options: &'static [&'static str],
    pub answer: usize,
    pub explanation: &'static str,
}

pub const QUESTIONS: [Question; 8] = [
    Question {
        id: "temperature",
        prompt: "You run the chapter's choose() with temperature 0.2 and then 1.5, each across several seeds. Which setting gives the more varied outputs?",
        options: &[
            "Temperature 0.2",
            "Temperature 1.5",
            "Neither: temperature keeps the order of the logits, so the draws are the same",
            "Neither: top-k fixes the set of tokens, so temperature has no effect",
        ],
        answer: 1,
        explanation: "Temperature divides every logit before the softmax. At 1.5 the scaled values move closer together, so the retained distribution is flatter and repeated draws vary more; at 0.2 they spread apart and the largest retained logit dominates. The order of the logits never changes, but their probabilities do.",
    },
    Question {
        id: "top-k-zero",
        prompt: "With logits [1.2, 0.1, 2.4, 1.7] and top_k = 3, what chance does token 1 (logit 0.1) have of being chosen?",
        options: &[
            "Exactly zero",
            "A small but positive chance, about 0.1",
            "Its softmax probability over all four tokens",
            "It depends on the seed",
        ],
        answer: 0,
        explanation: "Top-k keeps the three largest scaled logits (tokens 2, 3 and 0) and the softmax is taken over those survivors only. The returned probabilities describe only the retained set: a filtered token has exactly zero chance under this policy, whatever the seed.",
    },
    Question {
        id: "order",
        prompt: "In what order does the chapter turn logits into a token?",
        options: &[
            "Softmax over all the logits, then temperature, then top-k, then sample",
            "Sample first, then apply the temperature to the chosen token's probability",
            "Constraints on the newest position's logits, divide by temperature, filter with top-k or top-p, a stable softmax over the survivors, then sample or take the argmax",
            "Filter with top-k, sample, then apply constraints such as forbidden tokens",
        ],
        answer: 2,
        explanation: "Start from the logits at the newest position and apply constraints (forbidden tokens, a repetition rule) before normalisation; shape the distribution by dividing by temperature and filtering with top-k or top-p; normalise the survivors with a numerically stable softmax; then sample or take the argmax. Constraints applied after sampling could not stop a forbidden token.",
    },
    Question {
        id: "stop-reason",
        prompt: "A reply ends because it reached the maximum length, not because the model emitted its end-of-sequence token. Why does the chapter insist on recording the exact stop reason?",
        options: &[
            "Because the stop reason changes which tokens are sampled on replay",
            "It only matters for greedy decoding",
            "So the output can be explained and replayed: a reply cut off at max_tokens is a different outcome from one that finished with eos",
            "To choose the temperature for the next request",
        ],
        answer: 2,
        explanation: "The record holds the prompt template, tokenizer, seed, sampling parameters, maximum length and stop reason so that an output can be explained or replayed. A truncated answer (max_tokens) and a finished one (eos) look alike as text but are different product behaviour; the lab's records name max_tokens, eos, stop_token, stop_sequence, context_full or cancelled.",
    },
    Question {
        id: "kv-memory",
        prompt: "Llama-2-7B has L = 32 layers, H_kv = 32 KV heads and d_head = 128. In fp16 (q = 2 bytes), how much KV cache does one sequence (B = 1) of S = 4096 tokens need?",
        options: &["0.5 GiB", "1 GiB", "2 GiB", "4 GiB"],
        answer: 2,
        explanation: "2 · L · B · S · H_kv · d_head · q = 2 · 32 · 1 · 4096 · 32 · 128 · 2 = 2,147,483,648 bytes = 2 GiB. The leading 2 counts keys and values; each cached token costs 512 KiB.",
    },
    Question {
        id: "gqa",
        prompt: "Llama-3-8B keeps Llama-2-7B's 32 layers, 32 query heads and d_head of 128 but has 8 KV heads (grouped-query attention). At the same B, S and q, its KV cache is…",
        options: &[
            "the same size, because the query heads set the cache",
            "a quarter of the size",
            "eight times larger",
            "half the size",
        ],
        answer: 1,
        explanation: "The cache stores keys and values per KV head, not per query head: going from 32 to 8 KV heads divides H_kv, and so the memory, by 4 (2 GiB becomes 0.5 GiB at 4096 tokens). Multi-query attention (Falcon-7B, one KV head) goes further still.",
    },
    Question {
        id: "throughput-tail",
        prompt: "A team maximises aggregate tokens per second by packing ever larger decode batches. What failure does the chapter warn about?",
        options: &[
            "Throughput falls, because larger batches cost more per token",
            "None: more tokens per second improves every user's experience",
            "Only the cost per token rises; latency is unaffected",
            "p99 first-token latency is destroyed and a rare-language quality slice is harmed, even while the average looks better",
        ],
        answer: 3,
        explanation: "Maximising aggregate tokens/s destroys p99 first-token latency and harms a rare-language quality slice. Give this failure a detector, an owner, a mitigation and a stop condition, serve behind explicit p99 first-token and cost/token SLOs, and degrade an unsafe release to a named baseline or the last known-good version.",
    },
    Question {
        id: "ledger",
        prompt: "In the chapter's memory ledger (3.2 GB of weights, gradients and optimizer, 0.34 GB of activations per sample, a 24 GB device, a 10 % reserve), what is the largest microbatch that fits?",
        options: &["16", "54", "61", "70"],
        answer: 1,
        explanation: "The usable budget is 24 × 0.9 = 21.6 GB, and (21.6 − 3.2) / 0.34 = 54.1, so 54 samples (21.56 GB) fit and 55 (21.9 GB) do not. 61 forgets the reserve: (24 − 3.2) / 0.34 = 61.2.",
    },
];

/// Whether `correct` of `total` reaches the pass mark, in exact integer arithmetic.
pub fn passes(correct: usize, total: usize) -> bool {
    total > 0 && correct * 100 >= PASS_PERCENT * total
}

/// The option chosen for each question, in [`QUESTIONS`] order; `None` until answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Progress {
    answers: Vec<Option<usize>>,
}

impl Default for Progress {
    fn default() -> Progress {
        Progress {
            answers: vec![None; QUESTIONS.len()],
        }
    }
}

impl Progress {
    pub fn answer(&self, question: usize) -> Option<usize> {
        self.answers.get(question).copied().flatten()
    }

    /// Records `option` for `question`; an answered question keeps its first answer.
    /// Returns whether anything changed.
    pub fn choose(&mut self, question: usize, option: usize) -> bool {
        let valid = QUESTIONS
            .get(question)
            .is_some_and(|q| option < q.options.len());
        match self.answers.get_mut(question) {
            Some(slot @ None) if valid => {
                *slot = Some(option);
                true
            }
            _ => false,
        }
    }

    pub fn answered(&self) -> usize {
        self.answers.iter().flatten().count()
    }

    pub fn correct(&self) -> usize {
        QUESTIONS
            .iter()
            .zip(&self.answers)
            .filter(|(q, a)| **a == Some(q.answer))
            .count()
    }

    /// Correct answers as a percentage of all the questions (unanswered count as wrong).
    pub fn percent(&self) -> f64 {
        100.0 * self.correct() as f64 / QUESTIONS.len() as f64
    }

    pub fn passed(&self) -> bool {
        passes(self.correct(), QUESTIONS.len())
    }

    /// The text saved in localStorage.
    pub fn to_storage(&self) -> String {
        let answers: Map<String, Value> = QUESTIONS
            .iter()
            .zip(&self.answers)
            .filter_map(|(q, a)| a.map(|a| (q.id.to_string(), json!(a))))
            .collect();
        json!({ "version": 1, "answers": answers }).to_string()
    }

    /// Progress from saved text, or why it cannot be read (the caller starts afresh).
    pub fn from_storage(text: &str) -> Result<Progress, SavedError> {
        let value: Value = serde_json::from_str(text).map_err(SavedError::NotJson)?;
        if value.get("version") != Some(&json!(1)) {
            return Err(SavedError::NotVersion1);
        }
        let Some(answers) = value.get("answers").and_then(Value::as_object) else {
            return Err(SavedError::NoAnswers);
        };
        let mut progress = Progress::default();
        for (id, choice) in answers {
            let Some(i) = QUESTIONS.iter().position(|q| q.id == id) else {
                return Err(SavedError::UnknownQuestion { id: id.clone() });
            };
            let option = choice
                .as_u64()
                .and_then(|o| usize::try_from(o).ok())
                .filter(|&o| o < QUESTIONS[i].options.len());
            let Some(option) = option else {
                return Err(SavedError::NotAnOption {
                    id: id.clone(),
                    choice: choice.clone(),
                });
            };
            progress.answers[i] = Some(option);
        }
        Ok(progress)
    }
}

/// Why saved progress cannot be read; `Display` is the reason the panel gives in brackets.
#[derive(Debug)]
pub enum SavedError {
    NotJson(serde_json::Error),
    NotVersion1,
    NoAnswers,
    /// An answer to a question (`id`) the checkpoint does not have.
    UnknownQuestion {
        id: String,
    },
    /// An answer (`choice`) to question `id` that is not one of its options.
    NotAnOption {
        id: String,
        choice: Value,
    },
}

impl fmt::Display for SavedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SavedError::NotJson(e) => write!(f, "it is not JSON ({e})"),
            SavedError::NotVersion1 => {
                f.write_str("it is not version 1 of the checkpoint's progress")
            }
            SavedError::NoAnswers => f.write_str("it has no answers object"),
            SavedError::UnknownQuestion { id } => write!(
                f,
                "it answers a question \"{id}\" the checkpoint does not have"
            ),
            SavedError::NotAnOption { id, choice } => {
                write!(f, "its answer to \"{id}\" is {choice}, not an option")
            }
        }
    }
}

impl std::error::Error for SavedError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SavedError::NotJson(e) => Some(e),
            _ => None,
        }
    }
}

/// Two reasons are equal when they say the same: serde's error has no `PartialEq`.
impl PartialEq for SavedError {
    fn eq(&self, other: &SavedError) -> bool {
        self.to_string() == other.to_string()
    }
}

/// What the panel says about saved text: the progress, and a sentence when it was unusable.
pub fn restore(saved: Option<&str>) -> (Progress, Option<String>) {
    match saved.map(Progress::from_storage) {
        None => (Progress::default(), None),
        Some(Ok(p)) => (p, None),
        Some(Err(why)) => (
            Progress::default(),
            Some(format!(
                "Saved checkpoint progress could not be read ({why}), so the checkpoint starts afresh."
            )),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pass_mark_is_80_percent_inclusive() {
        assert!(passes(4, 5));
        assert!(!passes(3, 5));
        assert!(passes(8, 10) && !passes(7, 10));
        assert!(passes(7, 8) && !passes(6, 8));
        assert!(!passes(0, 0));
    }

    fn with(choices: &[(usize, usize)]) -> Progress {
        let mut p = Progress::default();
        for &(q, o) in choices {
            assert!(p.choose(q, o));
        }
        p
    }

    #[test]
    fn scoring_counts_unanswered_as_wrong() {
        let all_right: Vec<(usize, usize)> = QUESTIONS
            .iter()
            .enumerate()
            .map(|(i, q)| (i, q.answer))
            .collect();
        let p = with(&all_right);
        assert_eq!((p.answered(), p.correct(), p.percent()), (8, 8, 100.0));
        assert!(p.passed());
        // Seven of eight right (87.5 %) passes; six (75 %) does not.
        let wrong = |i: usize| (QUESTIONS[i].answer + 1) % QUESTIONS[i].options.len();
        let mut seven = all_right.clone();
        seven[0].1 = wrong(0);
        assert!(with(&seven).passed());
        let mut six = seven.clone();
        six[5].1 = wrong(5);
        assert!(!with(&six).passed());
        // Six right and two unanswered is 75 %: unanswered questions count against.
        let six_answered = with(&all_right[..6]);
        assert_eq!((six_answered.answered(), six_answered.correct()), (6, 6));
        assert!(!six_answered.passed());
        assert!(with(&all_right[..7]).passed());
    }

    #[test]
    fn an_answer_is_final_and_out_of_range_choices_are_refused() {
        let mut p = Progress::default();
        assert!(p.choose(0, 1));
        assert!(!p.choose(0, 2));
        assert_eq!(p.answer(0), Some(1));
        assert!(!p.choose(1, 99));
        assert!(!p.choose(99, 0));
        assert_eq!(p.answered(), 1);
    }

    #[test]
    fn storage_round_trips() {
        let p = with(&[(0, 1), (4, 3), (7, 1)]);
        let text = p.to_storage();
        assert_eq!(
            text,
            r#"{"answers":{"kv-memory":3,"ledger":1,"temperature":1},"version":1}"#
        );
        assert_eq!(Progress::from_storage(&text), Ok(p));
        assert_eq!(restore(None), (Progress::default(), None));
    }

    #[test]
    fn corrupt_storage_is_ignored_with_a_message() {
        for (text, why) in [
            ("{not json", "it is not JSON"),
            ("[1,2]", "it is not version 1"),
            (r#"{"version":2,"answers":{}}"#, "it is not version 1"),
            (r#"{"version":1}"#, "it has no answers object"),
            (
                r#"{"version":1,"answers":{"nope":0}}"#,
                "a question \"nope\"",
            ),
            (
                r#"{"version":1,"answers":{"gqa":9}}"#,
                "its answer to \"gqa\" is 9",
            ),
            (r#"{"version":1,"answers":{"gqa":-1}}"#, "is -1"),
            (r#"{"version":1,"answers":{"gqa":"b"}}"#, "is \"b\""),
            ("", "it is not JSON"),
        ] {
            let (progress, message) = restore(Some(text));
            assert_eq!(progress, Progress::default(), "{text}");
            let message = message.unwrap();
            assert!(message.contains(why), "{text}: {message}");
            assert!(message.starts_with("Saved checkpoint progress could not be read ("));
        }
    }

    #[test]
    fn every_question_is_well_formed() {
        let mut ids: Vec<&str> = QUESTIONS.iter().map(|q| q.id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), QUESTIONS.len(), "ids are unique");
        for q in &QUESTIONS {
            assert!(
                q.answer < q.options.len() && q.options.len() >= 3,
                "{}",
                q.id
            );
            assert!(!q.explanation.is_empty());
        }
    }
}
