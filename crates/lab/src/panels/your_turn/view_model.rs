//! The chapter's "Your turn" exercise: predict which of temperature 0.2 and 1.5 gives more
//! varied outputs, then run both over the same N seeds on the tiny model and compare the
//! distinct outputs and the entropy of each setting.
//!
//! Plain data on the page's side of the worker seam: the form (URL keys `yt_prompt`,
//! `yt_n`, `yt_max`, `yt_seed`), the checked [`Exercise`] the worker is sent (2·N runs:
//! both [`TEMPERATURES`], the chapter's [`TOP_K`], the same consecutive seeds), each
//! setting's [`Summary`] of what came back, the [`verdict`], and the chapter's question,
//! hint and reasoning. The runs themselves are the model worker's (`worker/exercise.rs`).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::widgets::form::{Form, Problems};
use crate::widgets::knobs::{
    knob_defaults, knob_from_url, knob_ids, knob_keys, knob_labels, knob_pairs, read_knobs,
    KnobNames, KnobTexts,
};
use crate::widgets::number::{whole, whole_in, FieldError};
use crate::worker::protocol::{Exercise, Sample, TEMPERATURES};

/// The most seeds a run may take, and the most new tokens per output.
pub const MAX_SEEDS: u64 = 32;
pub const MAX_NEW_TOKENS: u64 = 64;

/// The chapter's question, hint and reasoning, word for word.
pub const QUESTION: &str = "Run the example with temperature 0.2 and then 1.5. Which setting should produce more varied outputs across several seeds?";
pub const HINT: &str = "Temperature divides every logit before softmax; compare how far apart the scaled values become.";
pub const REASONING: &str = "Temperature 1.5 flattens the retained distribution, so repeated draws vary more. Temperature 0.2 makes the largest retained logit dominate.";

/// What the learner predicts (and what a run shows): which setting varies more.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prediction {
    Low,
    High,
    Same,
}

/// The chapter's answer.
pub const ANSWER: Prediction = Prediction::High;

impl Prediction {
    pub const ALL: [Prediction; 3] = [Prediction::Low, Prediction::High, Prediction::Same];

    /// The radio button's value.
    pub fn slug(self) -> &'static str {
        match self {
            Prediction::Low => "low",
            Prediction::High => "high",
            Prediction::Same => "same",
        }
    }

    /// The radio button's label.
    pub fn label(self) -> &'static str {
        match self {
            Prediction::Low => "Temperature 0.2",
            Prediction::High => "Temperature 1.5",
            Prediction::Same => "About the same",
        }
    }

    /// The prediction inside a sentence.
    fn phrase(self) -> &'static str {
        match self {
            Prediction::Low => "temperature 0.2",
            Prediction::High => "temperature 1.5",
            Prediction::Same => "about the same",
        }
    }
}

/// The exercise's form, as the learner typed it (or as the URL gave it).
#[derive(Clone, Debug, PartialEq)]
pub struct ExerciseForm {
    pub prompt: String,
    pub seeds: String,
    pub max_tokens: String,
    pub first_seed: String,
    /// Every knob of the policy both settings share ([`policy::KNOBS`]; the temperature is
    /// each setting's own, so its field is not shown).
    pub policy: KnobTexts,
}

/// The exercise's fields' ids (`yt-top-k`), URL keys (`yt_top_k`) and starting policy: the
/// chapter's top-k.
pub fn knob_names() -> KnobNames {
    (knob_ids("yt"), knob_labels(""))
}

pub fn knob_url_keys() -> &'static [&'static str; policy::KNOB_COUNT] {
    knob_keys("yt")
}

pub fn policy_defaults() -> KnobTexts {
    knob_defaults(&[("top-k", TOP_K_TEXT)])
}

/// The knob the exercise sets itself, whose field it does not show.
pub const NOT_SHOWN: [&str; 1] = ["temperature"];

/// [`TOP_K`] as a form's text.
const TOP_K_TEXT: &str = "3";

impl Default for ExerciseForm {
    fn default() -> ExerciseForm {
        ExerciseForm {
            prompt: "The model".into(),
            seeds: "8".into(),
            // Short enough that the outputs can coincide: over 24 tokens even temperature
            // 0.2 drifts apart on every seed, and the distinct counts tie at N.
            max_tokens: "8".into(),
            // The chapter's `choose()` uses seed 7.
            first_seed: "7".into(),
            policy: policy_defaults(),
        }
    }
}

impl Form for ExerciseForm {
    type Checked = Exercise;

    /// The form a URL's query asks for: `yt_prompt`, `yt_n`, `yt_max`, `yt_seed`. Missing
    /// keys keep the defaults; every field is text, so any value is kept for
    /// [`check`](Form::check) to name and no key is a problem here.
    fn from_pairs<'a>(
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> (ExerciseForm, Problems) {
        let mut form = ExerciseForm::default();
        for (key, value) in pairs {
            match key {
                "yt_prompt" => form.prompt = value.to_string(),
                "yt_n" => form.seeds = value.to_string(),
                "yt_max" => form.max_tokens = value.to_string(),
                "yt_seed" => form.first_seed = value.to_string(),
                key => {
                    knob_from_url(&mut form.policy, knob_url_keys(), key, value);
                }
            }
        }
        (form, Problems::default())
    }

    /// The query that reproduces this form (the inverse of [`from_pairs`](Form::from_pairs)).
    fn to_pairs(&self) -> Vec<(&'static str, String)> {
        let mut pairs = vec![
            ("yt_prompt", self.prompt.clone()),
            ("yt_n", self.seeds.trim().to_string()),
            ("yt_max", self.max_tokens.trim().to_string()),
            ("yt_seed", self.first_seed.trim().to_string()),
        ];
        pairs.extend(knob_pairs(
            &self.policy,
            &policy_defaults(),
            knob_url_keys(),
        ));
        pairs
    }

    /// Reads every field, so that a form with three bad values names all three, each
    /// against its input's id.
    fn check(&self) -> Result<Exercise, Problems> {
        let mut problems = Problems::default();
        problems.prompt("yt-prompt", &self.prompt);
        let seeds = problems.field(
            "yt-n",
            whole_in(&self.seeds, "Seeds per temperature", 1, MAX_SEEDS),
        );
        let max_tokens = problems.field(
            "yt-max",
            whole_in(&self.max_tokens, "Max new tokens", 1, MAX_NEW_TOKENS),
        );
        // The seeds run from the first one upwards, so the last must still be a u64; until
        // the number of seeds reads, one seed is all the first one needs room for.
        let first_seed = problems.field(
            "yt-seed",
            whole(&self.first_seed, "First seed").and_then(|first| {
                let n = seeds.unwrap_or(1);
                first
                    .checked_add(n - 1)
                    .map(|_| first)
                    .ok_or(FieldError::NoRoomForSeeds { first, seeds: n })
            }),
        );
        let read = read_knobs(&self.policy, knob_names().0, &mut problems, &|e| e);
        problems.or(|| {
            let (policy, dry_breakers) = read?;
            Some(Exercise {
                prompt: self.prompt.clone(),
                seeds: seeds? as usize,
                max_tokens: max_tokens? as usize,
                first_seed: first_seed?,
                policy,
                dry_breakers,
            })
        })
    }
}

/// One distinct output and the seeds that made it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Group {
    pub text: String,
    pub seeds: Vec<u64>,
}

/// One setting's runs summarised: the chart's and the table's row.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub temperature: f64,
    pub runs: usize,
    /// Distinct output texts among the runs.
    pub distinct: usize,
    /// Distinct first tokens among the runs.
    pub distinct_first: usize,
    /// The outputs, most frequent first (ties by their first seed).
    pub groups: Vec<Group>,
    /// Steps over all runs; the means below weigh each step equally.
    pub steps: usize,
    pub mean_entropy_nats: f64,
    pub mean_chosen_prob: f64,
}

impl Summary {
    pub fn of(temperature: f64, samples: &[Sample]) -> Summary {
        let mut groups: Vec<Group> = Vec::new();
        for sample in samples {
            match groups.iter_mut().find(|g| g.text == sample.text) {
                Some(group) => group.seeds.push(sample.seed),
                None => groups.push(Group {
                    text: sample.text.clone(),
                    seeds: vec![sample.seed],
                }),
            }
        }
        // Stable: among equal counts the first seen (lowest seed) stays first.
        groups.sort_by_key(|g| std::cmp::Reverse(g.seeds.len()));
        let distinct_first = samples
            .iter()
            .filter_map(|s| s.tokens.first())
            .collect::<BTreeSet<_>>()
            .len();
        let steps: usize = samples.iter().map(|s| s.entropies.len()).sum();
        let mean = |values: &dyn Fn(&Sample) -> &[f64]| {
            let total: f64 = samples.iter().flat_map(values).sum();
            if steps == 0 {
                0.0
            } else {
                total / steps as f64
            }
        };
        Summary {
            temperature,
            runs: samples.len(),
            distinct: groups.len(),
            distinct_first,
            groups,
            steps,
            mean_entropy_nats: mean(&|s| &s.entropies),
            mean_chosen_prob: mean(&|s| &s.probs),
        }
    }

    pub fn mean_entropy_bits(&self) -> f64 {
        self.mean_entropy_nats / std::f64::consts::LN_2
    }
}

/// A finished exercise: every sample of each setting and its summary.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Results {
    pub exercise: Exercise,
    /// Indexed like [`TEMPERATURES`].
    pub samples: [Vec<Sample>; 2],
    pub summaries: [Summary; 2],
}

impl Results {
    pub fn new(exercise: Exercise, samples: [Vec<Sample>; 2]) -> Results {
        let summaries = [
            Summary::of(TEMPERATURES[0], &samples[0]),
            Summary::of(TEMPERATURES[1], &samples[1]),
        ];
        Results {
            exercise,
            samples,
            summaries,
        }
    }

    /// Which setting varied more in these runs, by the number of distinct outputs.
    pub fn observed(&self) -> Prediction {
        let [low, high] = &self.summaries;
        match low.distinct.cmp(&high.distinct) {
            std::cmp::Ordering::Less => Prediction::High,
            std::cmp::Ordering::Greater => Prediction::Low,
            std::cmp::Ordering::Equal => Prediction::Same,
        }
    }
}

/// Whether the prediction was right, and what the runs showed, in sentences.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    pub right: bool,
    pub headline: String,
    pub evidence: String,
}

pub fn verdict(prediction: Prediction, results: &Results) -> Verdict {
    let [low, high] = &results.summaries;
    let right = prediction == ANSWER;
    let headline = if right {
        "Your prediction is right: temperature 1.5 gives the more varied outputs.".to_string()
    } else {
        format!(
            "You predicted {}; the answer is temperature 1.5, which gives the more varied outputs.",
            prediction.phrase()
        )
    };
    let counts = format!(
        "Over the same {} seeds, temperature 0.2 gave {} distinct {} and temperature 1.5 gave {}; the mean entropy per token was {:.3} bits at 0.2 and {:.3} bits at 1.5.",
        low.runs,
        low.distinct,
        if low.distinct == 1 { "output" } else { "outputs" },
        high.distinct,
        low.mean_entropy_bits(),
        high.mean_entropy_bits(),
    );
    let flatter = high.mean_entropy_nats > low.mean_entropy_nats;
    let evidence = match results.observed() {
        Prediction::High => format!("{counts} The model agrees with the chapter."),
        Prediction::Same if flatter => format!(
            "{counts} The counts tie this time (a short output, few seeds or a very confident prompt can do that), but the higher entropy at 1.5 shows its distribution is flatter; try more seeds or more tokens."
        ),
        _ => format!(
            "{counts} These runs went against the chapter; with so few draws chance can do that. Try more seeds or more tokens."
        ),
    };
    Verdict {
        right,
        headline,
        evidence,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::widgets::form::the_only_problem;

    fn sample(seed: u64, text: &str, first: u32, entropies: &[f64], probs: &[f64]) -> Sample {
        Sample {
            seed,
            text: text.into(),
            tokens: vec![first; entropies.len()],
            entropies: entropies.to_vec(),
            probs: probs.to_vec(),
        }
    }

    #[test]
    fn the_form_checks_every_field_and_round_trips_the_url() {
        let exercise = ExerciseForm::default().check().unwrap();
        assert_eq!(
            exercise,
            Exercise {
                prompt: "The model".into(),
                seeds: 8,
                max_tokens: 8,
                first_seed: 7,
                policy: policy::Policy {
                    temperature: policy::LAB_TEMPERATURE,
                    top_k: crate::worker::protocol::TOP_K,
                    ..policy::Policy::default()
                },
                dry_breakers: Vec::new(),
            }
        );
        let problem = |f: fn(&mut ExerciseForm), field| the_only_problem(f, field);
        assert_eq!(
            problem(|f| f.prompt = " ".into(), "yt-prompt"),
            "Type a prompt: the model needs at least one token to start from."
        );
        assert_eq!(
            problem(|f| f.seeds = "33".into(), "yt-n"),
            "Seeds per temperature must be a whole number from 1 to 32, but it is \"33\"."
        );
        assert_eq!(
            problem(|f| f.seeds = "0".into(), "yt-n"),
            "Seeds per temperature must be a whole number from 1 to 32, but it is \"0\"."
        );
        assert_eq!(
            problem(|f| f.max_tokens = "lots".into(), "yt-max"),
            "Max new tokens must be a whole number from 1 to 64, but it is \"lots\"."
        );
        assert_eq!(
            problem(|f| f.max_tokens = "65".into(), "yt-max"),
            "Max new tokens must be a whole number from 1 to 64, but it is \"65\"."
        );
        assert_eq!(
            problem(|f| f.first_seed = "-1".into(), "yt-seed"),
            "First seed must be a whole number of at least 0, but it is \"-1\"."
        );
        assert_eq!(
            problem(|f| f.first_seed = u64::MAX.to_string(), "yt-seed"),
            format!(
                "First seed {} leaves no room for 8 consecutive seeds; use a smaller one.",
                u64::MAX
            )
        );
        // One seed needs no room beyond the first, even the largest.
        let one = ExerciseForm {
            seeds: "1".into(),
            first_seed: u64::MAX.to_string(),
            ..ExerciseForm::default()
        };
        assert_eq!(one.check().unwrap().first_seed, u64::MAX);

        let mut form = ExerciseForm {
            prompt: "Once upon".into(),
            seeds: "3".into(),
            max_tokens: "5".into(),
            first_seed: "40".into(),
            ..ExerciseForm::default()
        };
        let pairs = form.to_pairs();
        let keys: Vec<&str> = pairs.iter().map(|(k, _)| *k).collect();
        assert_eq!(keys, ["yt_prompt", "yt_n", "yt_max", "yt_seed"]);
        let (back, problems) =
            ExerciseForm::from_pairs(pairs.iter().map(|(k, v)| (*k, v.as_str())));
        assert_eq!(back, form);
        assert!(problems.is_empty());
        // A knob the learner adds goes to both settings, from the URL and back.
        form.policy[crate::widgets::knobs::at("min-p").unwrap()] = "0.1".into();
        let pairs = form.to_pairs();
        assert!(pairs.contains(&("yt_min_p", "0.1".to_string())));
        let (back, _) = ExerciseForm::from_pairs(pairs.iter().map(|(k, v)| (*k, v.as_str())));
        assert_eq!(back, form);
        let exercise = back.check().unwrap();
        assert_eq!((exercise.policy.min_p, exercise.policy.top_k), (0.1, 3));
        // The runs are the model worker's to plan.
        #[cfg(feature = "worker")]
        assert!(exercise
            .plan()
            .iter()
            .all(|run| run.config.policy.min_p == 0.1));
        let bad = |f: fn(&mut ExerciseForm)| the_only_problem(f, "yt-min-p");
        assert!(
            bad(|f| f.policy[crate::widgets::knobs::at("min-p").unwrap()] = "2".into())
                .starts_with("Min-p 2 is invalid")
        );
        let (other, problems) = ExerciseForm::from_pairs([("panel", "your-turn")]);
        assert_eq!(other, ExerciseForm::default());
        assert!(problems.is_empty());
    }

    #[test]
    fn a_url_with_bad_values_names_every_field() {
        let (form, url) = ExerciseForm::from_pairs([
            ("panel", "your-turn"),
            ("yt_prompt", ""),
            ("yt_n", "many"),
            ("yt_max", "0"),
            ("yt_seed", "x"),
        ]);
        assert!(url.is_empty(), "a bad value stays in its field: {url:?}");
        assert_eq!(form.seeds, "many");
        let problems = form.check().unwrap_err();
        let fields: Vec<_> = problems.iter().map(|p| p.field).collect();
        assert_eq!(fields, ["yt-prompt", "yt-n", "yt-max", "yt-seed"]);
        assert_eq!(
            problems.of("yt-n").unwrap(),
            "Seeds per temperature must be a whole number from 1 to 32, but it is \"many\"."
        );
        assert_eq!(
            problems.of("yt-seed").unwrap(),
            "First seed must be a whole number of at least 0, but it is \"x\"."
        );
    }

    #[test]
    fn a_summary_groups_duplicates_and_weighs_every_step() {
        let samples = [
            sample(1, "a b", 5, &[0.1, 0.3], &[0.9, 0.7]),
            sample(2, "c", 6, &[0.2], &[0.5]),
            sample(3, "a b", 5, &[0.4, 0.0], &[0.8, 1.0]),
        ];
        let s = Summary::of(1.5, &samples);
        assert_eq!(s.runs, 3);
        assert_eq!(s.distinct, 2);
        assert_eq!(s.distinct_first, 2);
        assert_eq!(
            s.groups,
            [
                Group {
                    text: "a b".into(),
                    seeds: vec![1, 3]
                },
                Group {
                    text: "c".into(),
                    seeds: vec![2]
                }
            ]
        );
        assert_eq!(s.steps, 5);
        assert!((s.mean_entropy_nats - 1.0 / 5.0).abs() < 1e-12);
        assert!((s.mean_chosen_prob - 3.9 / 5.0).abs() < 1e-12);
        assert!((s.mean_entropy_bits() - 0.2 / 2f64.ln()).abs() < 1e-12);
    }

    #[test]
    fn the_verdict_judges_the_prediction_and_reports_the_runs() {
        let exercise = ExerciseForm::default().check().unwrap();
        let low: Vec<Sample> = (0..2)
            .map(|i| sample(i, "same", 1, &[0.01], &[0.99]))
            .collect();
        let high: Vec<Sample> = (0..2)
            .map(|i| sample(i, &format!("out {i}"), i as u32, &[0.9], &[0.4]))
            .collect();
        let results = Results::new(exercise.clone(), [low.clone(), high]);
        assert_eq!(results.observed(), Prediction::High);
        let v = verdict(Prediction::High, &results);
        assert!(v.right);
        assert_eq!(
            v.headline,
            "Your prediction is right: temperature 1.5 gives the more varied outputs."
        );
        assert!(v.evidence.starts_with("Over the same 2 seeds, temperature 0.2 gave 1 distinct output and temperature 1.5 gave 2;"), "{}", v.evidence);
        assert!(v.evidence.ends_with("The model agrees with the chapter."));
        let v = verdict(Prediction::Same, &results);
        assert!(!v.right);
        assert_eq!(v.headline, "You predicted about the same; the answer is temperature 1.5, which gives the more varied outputs.");

        let tie = Results::new(exercise, [low.clone(), low]);
        assert_eq!(tie.observed(), Prediction::Same);
        assert!(verdict(Prediction::Low, &tie)
            .evidence
            .contains("went against the chapter"));
    }
}
