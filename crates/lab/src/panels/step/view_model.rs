//! The decoding-step panel's data: the form's text (or the URL's) in, a checked
//! [`StepInput`] out for the model worker, which takes the step
//! ([`crate::worker::stepping`]); and what the charts read from the [`StepView`] that comes
//! back (a stage's tallest bars, its takeaway, where the draw landed).
//!
//! Everything here is plain data, so it is tested natively and the components only draw.

use std::fmt;

use policy::chain::TEMPERATURE_LAST_CHAIN;
use policy::{Policy, Sampler, KNOBS, KNOB_COUNT};

pub use crate::worker::protocol::{Row, Segment, StageView, StepInput, StepView};

use crate::widgets::form::{Form, Problems};
use crate::widgets::knobs::{
    at, knob_defaults, knob_from_url, knob_ids, knob_keys, knob_pairs, read_knobs, KnobTexts,
};
use crate::widgets::number::{whole, FieldError};

/// The decoding-step form, as the learner typed it.
#[derive(Clone, Debug, PartialEq)]
pub struct StepForm {
    pub logits: String,
    pub seed: String,
    /// The prompt's token ids before this step, comma-separated: the context the
    /// penalties, DRY, bad words and sequence bias read.
    pub prompt: String,
    /// The token ids generated before this step (what the output penalties, the minimum
    /// of new tokens and mirostat count).
    pub output: String,
    /// Every knob of the policy ([`policy::KNOBS`]) but DRY's breakers, which are text a
    /// vocabulary finds and typed logits have none.
    pub policy: KnobTexts,
}

/// The samplers the decoding-step form's chain editor orders: llama.cpp's chain less the
/// penalties and DRY, which keep their place at the front, where they read the context.
pub const STEP_SAMPLERS: &[Sampler] = TEMPERATURE_LAST_CHAIN.split_at(2).1;

/// The knobs the panel shows before "More controls", in order.
pub const SHOWN: [&str; 6] = ["engine", "order", "temperature", "top-k", "top-p", "min-p"];

/// The knobs the panel draws no field of from the table: the chain, which its editor
/// orders, and DRY's breakers (text that a vocabulary finds; the typed logits have none).
pub const OWN: [&str; 2] = ["samplers", "dry-sequence-breaker"];

/// Each knob's field id, the URL key's `_` written `-` with no prefix (`top-k`).
pub fn ids() -> &'static [&'static str; KNOB_COUNT] {
    knob_ids("")
}

/// The policy the panel starts from: the chapter's `choose([1.2, 0.1, 2.4, 1.7])`, at
/// temperature 0.7 and top-k 3.
pub fn defaults() -> KnobTexts {
    knob_defaults(&[("top-k", "3")])
}

impl Default for StepForm {
    /// The chapter's example: `choose([1.2, 0.1, 2.4, 1.7])` with its defaults.
    fn default() -> StepForm {
        StepForm {
            logits: "1.2, 0.1, 2.4, 1.7".into(),
            seed: "7".into(),
            prompt: String::new(),
            output: String::new(),
            policy: defaults(),
        }
    }
}

/// The knobs whose value is one name among a few (the engine, the order) or a chain: a
/// URL's value that is not one is the URL's problem, and the field keeps its default, as a
/// drop-down cannot hold it.
fn url_choice(flag: &str, value: &str) -> Option<String> {
    let text = value.trim();
    let read = match flag {
        "engine" => text.parse::<policy::Engine>().map(drop),
        "order" => text.parse::<policy::StageOrder>().map(drop),
        "samplers" => policy::parse_samplers(text).map(drop),
        _ => return None,
    };
    read.err().map(|e| match flag {
        "engine" => report::sentence(format!("The URL asks for {e}; using the lab's own")),
        "samplers" => report::sentence(format!(
            "The URL's sampler order cannot be read: {e}; using the engine's order"
        )),
        _ => format!(
            "The URL asks for order \"{value}\", which is not hf or temperature-last; using temperature first."
        ),
    })
}

impl Form for StepForm {
    type Checked = StepInput;

    /// The form a URL's query asks for: `logits`, `seed`, `prompt_ids`, `output_ids` and
    /// every policy knob by its key (`temperature`, `top_k`, `order=hf|temperature-last`,
    /// `engine`, `samplers`, `forbidden`, `bias`, ...). Missing keys keep the chapter's
    /// defaults; the second value is what the URL held that could not be read.
    fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> (StepForm, Problems) {
        let mut form = StepForm::default();
        let mut problems = Problems::default();
        for (key, value) in pairs {
            match key {
                "logits" => form.logits = value.to_string(),
                "seed" => form.seed = value.to_string(),
                "prompt_ids" => form.prompt = value.to_string(),
                "output_ids" => form.output = value.to_string(),
                "dry_breakers" => {}
                key => {
                    let flag = policy::Knob::at_url(key).map(|k| k.flag);
                    match flag.and_then(|flag| url_choice(flag, value)) {
                        Some(problem) => {
                            let i = flag.and_then(at).unwrap_or_default();
                            problems.add(ids()[i], problem);
                        }
                        None => drop(knob_from_url(&mut form.policy, knob_keys(""), key, value)),
                    }
                }
            }
        }
        (form, problems)
    }

    /// The query that reproduces this form (the inverse of [`from_pairs`](Self::from_pairs)):
    /// the logits, the seed, the chapter's knobs always, and every other knob off its
    /// default.
    fn to_pairs(&self) -> Vec<(&'static str, String)> {
        let mut pairs = vec![("logits", self.logits.clone())];
        for flag in ["temperature", "top-k", "top-p", "min-p"] {
            if let Some(i) = at(flag) {
                pairs.push((KNOBS[i].key, self.policy[i].trim().to_string()));
            }
        }
        pairs.push(("seed", self.seed.clone()));
        if let Some(i) = at("order") {
            pairs.push(("order", self.policy[i].trim().to_string()));
        }
        let always = ["temperature", "top_k", "top_p", "min_p", "order"];
        pairs.extend(
            knob_pairs(&self.policy, &defaults(), knob_keys(""))
                .into_iter()
                .filter(|(key, _)| !always.contains(key)),
        );
        for (key, text) in [("prompt_ids", &self.prompt), ("output_ids", &self.output)] {
            if !text.trim().is_empty() {
                pairs.push((key, text.trim().to_string()));
            }
        }
        pairs
    }

    /// Reads every field, so that a form with three bad values names all three.
    fn check(&self) -> Result<StepInput, Problems> {
        let mut problems = Problems::default();
        let logits = problems.field("logits", parse_logits(&self.logits));
        // Token ids are checked against the logits once they read; until then, only their
        // syntax.
        let vocab = logits.as_ref().map_or(u32::MAX as usize, Vec::len);
        let read = read_knobs(&self.policy, ids(), &mut problems, &|e| e);
        if let Some((policy, _)) = &read {
            for (flag, label, ids) in policy_ids(policy) {
                if let Some(i) = at(flag) {
                    let inside = ids
                        .iter()
                        .try_for_each(|&id| in_vocab(id, vocab, label).map(drop));
                    problems.field(self::ids()[i], inside);
                }
            }
        }
        let prompt = problems.field("prompt-ids", token_ids(&self.prompt, vocab, "Prompt token"));
        let output = problems.field(
            "output-ids",
            token_ids(&self.output, vocab, "Generated token"),
        );
        let seed = problems.field("seed", whole(&self.seed, "Seed"));
        problems.or(|| {
            Some(StepInput {
                logits: logits?,
                policy: read?.0,
                prompt: prompt?,
                output: output?,
                seed: seed?,
            })
        })
    }
}

/// The token ids a policy names, by the knob that holds them and what one is called.
fn policy_ids(policy: &Policy) -> [(&'static str, &'static str, Vec<u32>); 5] {
    let sequences = |s: &[Vec<u32>]| s.iter().flatten().copied().collect();
    [
        ("forbid", "Forbidden token", policy.forbidden.clone()),
        (
            "bias",
            "Logit bias token",
            policy.logit_bias.iter().map(|&(id, _)| id).collect(),
        ),
        ("bad-words", "Bad-word token", sequences(&policy.bad_words)),
        (
            "sequence-bias",
            "Sequence-bias token",
            policy
                .sequence_bias
                .iter()
                .flat_map(|(ids, _)| ids.iter().copied())
                .collect(),
        ),
        ("eos", "End-of-sequence token", policy.eos_ids().collect()),
    ]
}

impl StepForm {
    /// The text of the knob named `flag`.
    pub fn knob(&self, flag: &str) -> &str {
        at(flag).map_or("", |i| self.policy[i].as_str())
    }

    /// Sets the knob named `flag` to `text`.
    pub fn set(&mut self, flag: &str, text: &str) {
        if let Some(i) = at(flag) {
            self.policy[i] = text.to_string();
        }
    }

    /// The form with the knob named `flag` at `text`.
    pub fn with(mut self, flag: &str, text: &str) -> StepForm {
        self.set(flag, text);
        self
    }

    /// The chain the step runs, as far as the form's knobs go: the learner's order, else
    /// the engine's, else the fixed order's (a choice that does not read is its default's).
    pub fn chain(&self) -> Vec<Sampler> {
        let policy = Policy {
            engine: self.knob("engine").trim().parse().unwrap_or_default(),
            order: self.knob("order").trim().parse().unwrap_or_default(),
            samplers: policy::parse_samplers(self.knob("samplers")).ok(),
            ..Policy::default()
        };
        policy
            .chain()
            .iter()
            .copied()
            .filter(|s| STEP_SAMPLERS.contains(s))
            .collect()
    }

    /// The form with sampler `at` of [`chain`](Self::chain) moved one place earlier
    /// (`up`) or later; the moved chain replaces any fixed order. `None` at either end.
    pub fn moved(&self, at: usize, up: bool) -> Option<StepForm> {
        let mut chain = self.chain();
        let other = if up { at.checked_sub(1)? } else { at + 1 };
        if other >= chain.len() {
            return None;
        }
        chain.swap(at, other);
        // The penalties and DRY keep their place at the front.
        let mut full = vec![Sampler::Penalties, Sampler::Dry];
        full.extend(chain);
        let order = policy::StageOrder::default().to_string();
        Some(
            self.clone()
                .with("samplers", &policy::chain::samplers_label(&full))
                .with("order", &order),
        )
    }
}

/// Parses token ids (`3, 7` or `3 7`), each among the `vocab` logits.
fn token_ids(text: &str, vocab: usize, name: &str) -> Result<Vec<u32>, FieldError> {
    text.split(|c: char| c == ',' || c.is_whitespace())
        .filter(|s| !s.is_empty())
        .map(|s| token_id(s, vocab, name))
        .collect()
}

fn token_id(text: &str, vocab: usize, name: &str) -> Result<u32, FieldError> {
    let id = text.parse::<u32>().map_err(|_| FieldError::TokenId {
        label: name.to_string(),
        text: text.to_string(),
    })?;
    in_vocab(id, vocab, name)
}

fn in_vocab(id: u32, vocab: usize, name: &str) -> Result<u32, FieldError> {
    if (id as usize) < vocab {
        Ok(id)
    } else {
        Err(FieldError::NotInVocab {
            label: name.to_string(),
            id,
            vocab,
        })
    }
}

/// The most bars a stage chart draws. A larger vocabulary (the tiny model's 768 tokens)
/// draws its `MOST_BARS - 1` tallest bars and the rest as one bar, so that no bar is
/// thinner than a line; the whole vocabulary stays in a table of its own.
pub const MOST_BARS: usize = 20;

/// The tokens a stage chart draws as one bar: how many, how many of them the stage kept,
/// their probability after it, and what the ones it removed would have had together.
#[derive(Clone, Debug, PartialEq)]
pub struct Rest {
    pub count: usize,
    pub kept: usize,
    pub prob: f64,
    pub unkept: Option<f64>,
}

/// How a stage chart draws its rows (a lab's choice, not the policy's: the policy's
/// [`StageView`] holds every token).
pub trait Bars {
    /// The rows the chart draws one bar each, in id order, and the rest as one: every row
    /// when there are at most [`MOST_BARS`]; else the `MOST_BARS - 1` tallest bars (a
    /// removed token stands as tall as what it would have had; the lower id first among
    /// equals).
    fn shown(&self) -> (Vec<&Row>, Option<Rest>);
}

impl Bars for StageView {
    fn shown(&self) -> (Vec<&Row>, Option<Rest>) {
        if self.rows.len() <= MOST_BARS {
            return (self.rows.iter().collect(), None);
        }
        let height = |r: &Row| r.unkept.unwrap_or(r.prob);
        let mut ranked: Vec<&Row> = self.rows.iter().collect();
        ranked.sort_by(|a, b| height(b).total_cmp(&height(a)).then(a.id.cmp(&b.id)));
        let rest = ranked.split_off(MOST_BARS - 1);
        ranked.sort_by_key(|r| r.id);
        let unkept: Vec<f64> = rest.iter().filter_map(|r| r.unkept).collect();
        let rest = Rest {
            count: rest.len(),
            kept: rest.iter().filter(|r| r.logit.is_some()).count(),
            prob: rest.iter().map(|r| r.prob).sum(),
            unkept: (!unkept.is_empty()).then(|| unkept.iter().sum()),
        };
        (ranked, Some(rest))
    }
}

/// Logits as the decoding-step panel's text: four decimals, comma-separated.
pub fn logits_text(logits: &[f32]) -> String {
    logits
        .iter()
        .map(|l| format!("{l:.4}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Parses a comma- or space-separated list of logits.
pub fn parse_logits(text: &str) -> Result<Vec<f64>, FieldError> {
    let logits = text
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<f64>().map_err(|_| FieldError::Logit {
                text: s.to_string(),
            })
        })
        .collect::<Result<Vec<f64>, FieldError>>()?;
    if logits.is_empty() {
        return Err(FieldError::NoLogits);
    }
    // A logit that is not finite cannot cross to the worker (its messages are JSON).
    policy::check_logits(&logits).map_err(FieldError::Policy)?;
    Ok(logits)
}

impl StepView {
    /// The effective vocabulary: e^entropy, the number of equally likely tokens with the same
    /// entropy.
    pub fn effective_vocabulary(&self) -> f64 {
        self.entropy.exp()
    }

    /// The segment the draw landed in (the chosen token's); `None` when greedy.
    pub fn landed(&self) -> Option<&Segment> {
        let u = self.draw?;
        let at = policy::rng::choice_index(self.strip.iter().map(|s| s.prob), u);
        self.strip.get(at)
    }
}

/// The panel's field that a step's [`StepRefused`](crate::worker::protocol::StepRefused)
/// names by its knob's flag; the logits' for any other name.
pub fn step_field(flag: &str) -> &'static str {
    at(flag).map_or("logits", |i| ids()[i])
}

/// The browser (or the OS) gave no entropy for a fresh seed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NoFreshSeed(getrandom::Error);

impl fmt::Display for NoFreshSeed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "No fresh seed could be drawn: {}.", self.0)
    }
}

// getrandom's error is no `std::error::Error` without its `std` feature: no source.
impl std::error::Error for NoFreshSeed {}

/// A fresh seed from the browser's (or the OS's) entropy, for the "New seed" button.
pub fn fresh_seed() -> Result<u64, NoFreshSeed> {
    getrandom::u64().map_err(NoFreshSeed)
}

// The step is the model worker's: these tests take it as the panel does, through it.
#[cfg(all(test, feature = "worker"))]
mod tests {
    use super::*;
    use crate::widgets::form::Problems;
    use crate::worker::protocol::Stepped;
    use crate::worker::stepping::step;
    use policy::StageOrder;

    /// The form checked, then the worker's step, its refusal at the field it names.
    fn stepped(form: &StepForm) -> Result<Stepped, Problems> {
        let input = form.check()?;
        step(&input).map_err(|r| Problems::one(step_field(&r.field), r.message))
    }

    fn run_step(form: &StepForm) -> Result<StepView, Problems> {
        stepped(form).map(|s| s.view)
    }

    fn run_conformance(form: &StepForm) -> Option<Stepped> {
        stepped(form).ok()
    }

    #[test]
    fn the_chain_editor_orders_every_sampler_but_those_that_read_the_context() {
        assert_eq!(STEP_SAMPLERS.len(), 10);
        assert!(!STEP_SAMPLERS.contains(&Sampler::Penalties));
        assert!(!STEP_SAMPLERS.contains(&Sampler::Dry));
        assert_eq!(STEP_SAMPLERS.last(), Some(&Sampler::Temperature));
    }

    #[test]
    fn the_default_form_is_the_chapter_example() {
        let view = run_step(&StepForm::default()).unwrap();
        let last = view.stages.last().unwrap();
        assert_eq!(last.label, "top-k");
        assert_eq!(last.survivors, 3);
        assert_eq!(last.rows[1].prob, 0.0, "token 1 is filtered by top-k 3");
        assert!((last.rows.iter().map(|r| r.prob).sum::<f64>() - 1.0).abs() < 1e-12);
        assert!(view.chapter_line.is_some());
    }

    /// The chapter's example by hand: softmax(logits / 0.7), then top-k 3 removes token 1,
    /// so token 1 would have had p1 / (1 − p1) and the cut-off is token 0's p0 / (1 − p1).
    #[test]
    fn a_cut_draws_its_line_and_what_it_removed_would_have_had() {
        let view = run_step(&StepForm::default()).unwrap();
        let logits = [1.2f64, 0.1, 2.4, 1.7];
        let weights: Vec<f64> = logits.iter().map(|l| ((l - 2.4) / 0.7).exp()).collect();
        let total: f64 = weights.iter().sum();
        let p: Vec<f64> = weights.iter().map(|w| w / total).collect();
        let top_k = view.stages.last().unwrap();
        let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
        assert!(close(top_k.rows[1].unkept.unwrap(), p[1] / (1.0 - p[1])));
        assert!(close(top_k.cut_off.unwrap(), p[0] / (1.0 - p[1])));
        assert!(top_k
            .rows
            .iter()
            .filter(|r| r.id != 1)
            .all(|r| r.unkept.is_none()));
        // The temperature stage removes nothing and draws no line.
        assert!(view
            .stages
            .iter()
            .filter(|s| s.label != "top-k")
            .all(|s| s.cut_off.is_none()));
    }

    /// The takeaway by hand for the chapter's example: after top-k 3, token 2 holds
    /// e^(2.4/0.7) over the three kept weights, and top-k removed token 1 alone.
    #[test]
    fn the_takeaway_names_the_top_token_its_share_and_what_was_removed() {
        let view = run_step(&StepForm::default()).unwrap();
        let kept = [1.2f64, 2.4, 1.7].map(|l| ((l - 2.4) / 0.7).exp());
        let share = 100.0 / kept.iter().sum::<f64>();
        let top_k = view.stages.last().unwrap();
        assert_eq!(
            top_k.takeaway(),
            format!("After top-k, token 2 has {share:.1} %, and token 1 was removed.")
        );
        // Plain words: Flesch–Kincaid grade 9 or below (Chartability's reading level).
        for stage in &view.stages {
            let grade = crate::widgets::walk::grade(&stage.takeaway());
            assert!(grade <= 9.0, "grade {grade:.1}: {}", stage.takeaway());
        }
        let first = &view.stages[0];
        assert!(first.takeaway().ends_with(", and no token was removed."));
        let mut many = top_k.clone();
        for row in &mut many.rows {
            row.unkept = Some(0.1);
        }
        assert!(many
            .takeaway()
            .ends_with(", and tokens 0, 1, 2 and 3 were removed."));
        many.rows.iter_mut().for_each(|r| r.logit = None);
        assert!(many
            .takeaway()
            .starts_with("After top-k, no token is left,"));
    }

    /// A vocabulary larger than [`MOST_BARS`] draws its tallest bars and the rest as one,
    /// checked against a sort by hand: 30 tokens whose logit is their id, top-k 25, so the
    /// tallest are ids 29 down to 11, and the rest (ids 0 to 10) hold what the kept ones
    /// among them (5 to 10) have, while top-k removed 0 to 4.
    #[test]
    fn a_large_vocabulary_draws_its_tallest_bars_and_the_rest_as_one() {
        let form = StepForm {
            logits: (0..30)
                .map(|i| format!("{}", i as f64 / 4.0))
                .collect::<Vec<_>>()
                .join(", "),
            ..StepForm::default()
        }
        .with("top-k", "25")
        .with("top-p", "1");
        let view = run_step(&form).unwrap();
        let top_k = view.stages.last().unwrap();
        let (bars, rest) = top_k.shown();
        let ids: Vec<u32> = bars.iter().map(|r| r.id).collect();
        assert_eq!(ids, (11..30).collect::<Vec<u32>>());
        let rest = rest.expect("30 tokens are more than MOST_BARS");
        assert_eq!((rest.count, rest.kept), (11, 6));
        let by_hand: f64 = top_k.rows[5..11].iter().map(|r| r.prob).sum();
        assert!((rest.prob - by_hand).abs() < 1e-15);
        let unkept: f64 = top_k.rows[..5].iter().map(|r| r.unkept.unwrap()).sum();
        assert!((rest.unkept.unwrap() - unkept).abs() < 1e-15);
        assert_eq!(top_k.top().map(|r| r.id), Some(29));
        // Every bar and the rest hold the whole distribution.
        let total: f64 = bars.iter().map(|r| r.prob).sum::<f64>() + rest.prob;
        assert!((total - 1.0).abs() < 1e-12);
        // The chapter's four tokens are drawn one bar each.
        let small = run_step(&StepForm::default()).unwrap();
        assert!(small
            .stages
            .iter()
            .all(|s| s.shown().1.is_none() && s.shown().0.len() == 4));
    }

    /// Every stage that cuts by likelihood keeps every token at least as likely as any it
    /// removed; typical sampling and XTC remove otherwise and draw no line.
    #[test]
    fn every_likelihood_cut_lies_above_all_it_removed() {
        let logits = "2.0, 1.4, 1.3, 0.9, 0.2, -0.5, -1.0, 0.05".to_string();
        type Edit = fn(&mut StepForm);
        let forms: [(&str, Edit); 8] = [
            ("top-k", |f| f.set("top-k", "3")),
            ("top-p", |f| f.set("top-p", "0.6")),
            ("min-p", |f| f.set("min-p", "0.3")),
            ("epsilon", |f| f.set("epsilon-cutoff", "0.08")),
            ("eta", |f| f.set("eta-cutoff", "0.2")),
            ("top-n-sigma", |f| f.set("top-n-sigma", "0.5")),
            ("typical", |f| f.set("typical", "0.5")),
            ("xtc", |f| {
                f.set("xtc-probability", "1");
                f.set("xtc-threshold", "0.1")
            }),
        ];
        for (label, set) in forms {
            let mut form = StepForm {
                logits: logits.clone(),
                ..StepForm::default()
            }
            .with("top-k", "0")
            .with("temperature", "1");
            set(&mut form);
            let view = run_step(&form).unwrap();
            let stage = view.stages.iter().find(|s| s.label == label).unwrap();
            let removed: Vec<f64> = stage.rows.iter().filter_map(|r| r.unkept).collect();
            assert!(!removed.is_empty(), "{label} removed nothing");
            match stage.cut_off {
                Some(cut) => {
                    assert!(!matches!(label, "typical" | "xtc"), "{label}");
                    assert!(
                        removed.iter().all(|&p| p <= cut + 1e-15),
                        "{label}: {removed:?} over {cut}"
                    );
                    let lowest = stage
                        .rows
                        .iter()
                        .filter(|r| r.logit.is_some())
                        .map(|r| r.prob);
                    assert_eq!(lowest.fold(f64::INFINITY, f64::min), cut);
                }
                None => assert!(matches!(label, "typical" | "xtc"), "{label} drew no line"),
            }
        }
    }

    #[test]
    fn bad_input_becomes_a_sentence_at_its_field() {
        let problem = |f: fn(&mut StepForm), field: &str| {
            let mut form = StepForm::default();
            f(&mut form);
            let problems = run_step(&form).unwrap_err();
            assert_eq!(problems.len(), 1, "{problems:?}");
            problems
                .of(field)
                .unwrap_or_else(|| panic!("{field}: {problems:?}"))
        };
        assert_eq!(
            problem(|f| f.logits = "1, x".into(), "logits"),
            "Logit \"x\" is not a number."
        );
        assert_eq!(
            problem(|f| f.logits = " ".into(), "logits"),
            "Type at least one logit, for example 1.2, 0.1, 2.4, 1.7."
        );
        assert_eq!(
            problem(|f| f.set("temperature", "warm"), "temperature"),
            "Temperature must be a number, but it is \"warm\"."
        );
        assert_eq!(
            problem(|f| f.set("temperature", "-1"), "temperature"),
            "Temperature -1 is invalid: it must be a finite number, at least 0 (0 means greedy)."
        );
        assert_eq!(
            problem(|f| f.set("top-p", "0"), "top-p"),
            "Top-p 0 is invalid: it must be greater than 0 and at most 1."
        );
        assert_eq!(
            problem(|f| f.seed = "-3".into(), "seed"),
            "Seed must be a whole number of at least 0, but it is \"-3\"."
        );
        assert!(problem(|f| f.logits = "1, NaN".into(), "logits").starts_with("Logit 1 is NaN"));
        assert_eq!(
            problem(|f| f.set("forbid", "2, 9"), "forbidden"),
            "Forbidden token 9 is not a token here: the logits have ids 0 to 3."
        );
        assert_eq!(
            problem(|f| f.set("bias", "2=1"), "bias"),
            "Logit bias \"2=1\" is not of the form id:value, for example 2:-1.5."
        );
        assert_eq!(
            problem(|f| f.set("bias", "1:x"), "bias"),
            "Logit bias for token 1 must be a finite number, but it is \"x\"."
        );
        assert_eq!(
            problem(|f| f.set("bias", "1:1, 9:1"), "bias"),
            "Logit bias token 9 is not a token here: the logits have ids 0 to 3."
        );
        assert!(problem(|f| f.set("temperature", "1e-320"), "temperature")
            .contains("beyond the range of a float"));
    }

    /// The draw lands in the chosen token's segment, for every order and filter; the
    /// segments tile [0, 1); the effective vocabulary is e^H, by hand for a uniform case.
    #[test]
    fn the_draw_lands_in_the_chosen_tokens_segment() {
        for seed in 0..40u64 {
            for (temperature, top_k, top_p, order) in [
                ("0.7", "3", "1", "hf"),
                ("1.3", "0", "0.8", "hf"),
                ("0.9", "2", "0.9", "temperature-last"),
                ("2", "0", "1", "hf"),
            ] {
                let (form, _) = StepForm::from_pairs([
                    ("logits", "1.2, 0.1, 2.4, 1.7, -0.5, 2.4"),
                    ("temperature", temperature),
                    ("top_k", top_k),
                    ("top_p", top_p),
                    ("order", order),
                    ("seed", &seed.to_string()),
                ]);
                let view = run_step(&form).unwrap();
                let landed = view.landed().unwrap();
                assert_eq!(
                    landed.id, view.token,
                    "seed {seed} {temperature} {top_k} {top_p}"
                );
                let u = view.draw.unwrap();
                assert!(landed.from <= u && u < landed.to);
                assert_eq!(view.strip[0].from, 0.0);
                assert!((view.strip.last().unwrap().to - 1.0).abs() < 1e-15);
                assert!(view
                    .strip
                    .windows(2)
                    .all(|w| w[0].to == w[1].from && w[0].id < w[1].id));
            }
        }
        let (form, _) = StepForm::from_pairs([("logits", "1, 1, 1, 1"), ("top_k", "0")]);
        let view = run_step(&form).unwrap();
        assert!((view.effective_vocabulary() - 4.0).abs() < 1e-12);
        let (greedy, _) = StepForm::from_pairs([("temperature", "0")]);
        let view = run_step(&greedy).unwrap();
        assert_eq!(view.landed(), None);
        assert_eq!(view.strip.len(), 1);
    }

    /// The URL: three bad values, and all three are named, each at its field.
    #[test]
    fn every_bad_field_is_named() {
        let (form, url) = StepForm::from_pairs([
            ("panel", "step"),
            ("temperature", "abc"),
            ("top_k", "-3"),
            ("logits", "1,2,zz"),
            ("order", "sideways"),
        ]);
        let problems = run_step(&form).unwrap_err();
        let fields: Vec<_> = problems.iter().map(|p| p.field).collect();
        assert_eq!(fields, ["logits", "temperature", "top-k"]);
        assert_eq!(
            problems.of("logits").unwrap(),
            "Logit \"zz\" is not a number."
        );
        assert_eq!(
            problems.of("top-k").unwrap(),
            "Top-k must be a whole number of at least 0, but it is \"-3\"."
        );
        assert_eq!(url.iter().map(|p| p.field).collect::<Vec<_>>(), ["order"]);
    }

    #[test]
    fn constraints_act_before_the_filters() {
        // Forbidding the argmax (token 2) leaves 3, 0, 1; with top-k 3 all survive.
        let mut form = StepForm::default().with("forbid", "2");
        let view = run_step(&form).unwrap();
        assert_eq!(view.stages[0].rows[2].prob, 0.0);
        assert_ne!(view.token, 2);
        assert_eq!(view.stages.last().unwrap().survivors, 3);
        // A bias of +10 on token 1 makes it the overwhelming favourite: softmax by hand.
        form.set("forbid", "");
        form.set("bias", "1:+10");
        form.set("temperature", "1");
        form.set("top-k", "0");
        let view = run_step(&form).unwrap();
        let z: Vec<f64> = [1.2, 10.1, 2.4, 1.7]
            .iter()
            .map(|l: &f64| l.exp())
            .collect();
        let expected = z[1] / z.iter().sum::<f64>();
        assert!((view.stages.last().unwrap().rows[1].prob - expected).abs() < 1e-12);
    }

    #[test]
    fn the_url_round_trips_the_form() {
        let form = StepForm {
            logits: "1, 2, 3".into(),
            ..StepForm::default()
        }
        .with("order", "temperature-last")
        .with("forbid", "0")
        .with("bias", "1:0.5");
        let pairs = form.to_pairs();
        let (back, problems) = StepForm::from_pairs(pairs.iter().map(|(k, v)| (*k, v.as_str())));
        assert_eq!(back, form);
        assert!(problems.is_empty());
        let (odd, problems) = StepForm::from_pairs([("order", "sideways"), ("top_k", "x")]);
        assert_eq!(odd.knob("order"), StageOrder::TemperatureFirst.to_string());
        assert_eq!(
            odd.knob("top-k"),
            "x",
            "a bad number is kept for the form to report"
        );
        assert_eq!(problems.len(), 1);
    }

    #[test]
    fn the_chain_moves_one_place_and_the_url_keeps_it() {
        let form = StepForm::default();
        let names = |f: &StepForm| {
            f.chain()
                .iter()
                .map(|s| s.name())
                .collect::<Vec<_>>()
                .join(";")
        };
        assert_eq!(
            names(&form),
            "temperature;top_n_sigma;top_h;top_k;top_p;min_p;typ_p;epsilon;eta;xtc"
        );
        assert!(
            form.moved(0, true).is_none(),
            "the first cannot move earlier"
        );
        let moved = form.moved(0, false).unwrap();
        assert_eq!(
            names(&moved),
            "top_n_sigma;temperature;top_h;top_k;top_p;min_p;typ_p;epsilon;eta;xtc"
        );
        let llama = moved.clone().with("engine", "llama.cpp");
        let pairs = llama.to_pairs();
        let (back, problems) = StepForm::from_pairs(pairs.iter().map(|(k, v)| (*k, v.as_str())));
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(back, llama);
        // An engine's own order, until the learner moves something.
        let preset = StepForm::default().with("engine", "llama.cpp");
        assert_eq!(
            names(&preset),
            "top_n_sigma;top_h;top_k;typ_p;top_p;min_p;epsilon;eta;xtc;temperature"
        );
    }

    #[test]
    fn each_engine_refuses_at_the_field_it_names() {
        let problem = |engine: &str, f: fn(&mut StepForm), field: &str| {
            let mut form = StepForm::default().with("engine", engine);
            f(&mut form);
            let problems = run_step(&form).unwrap_err();
            problems
                .of(field)
                .unwrap_or_else(|| panic!("{field}: {problems:?}"))
        };
        assert_eq!(
            problem("vllm", |f| f.set("typical", "0.9"), "typical"),
            "Vllm does not take typical-p 0.9: it takes no such sampler."
        );
        assert_eq!(
            problem("vllm", |f| f.set("top-p", "0"), "top-p"),
            "Vllm does not take top-p 0: it takes a top-p greater than 0 and at most 1."
        );
        // llama.cpp takes top-p 0 and keeps the top token.
        let zero = StepForm::default()
            .with("engine", "llama.cpp")
            .with("top-p", "0");
        assert_eq!(run_step(&zero).unwrap().stages.last().unwrap().survivors, 1);
        let both = StepForm::default()
            .with("engine", "hf")
            .with("order", "temperature-last");
        let problems = run_step(&both).unwrap_err();
        assert!(problems.of("order").is_some(), "{problems:?}");
    }

    /// Every knob but DRY's breakers (text a vocabulary finds) goes from the URL into the
    /// form, back into the URL, and into the step's policy as the policy crate reads it.
    #[test]
    fn every_knob_goes_from_the_url_to_the_form_and_the_step() {
        let logits = "1, 2, 3, 4, 5, 6, 7, 8, 9, 10";
        for (knob, &(flag, text, beside)) in KNOBS.iter().zip(&crate::widgets::knobs::SAMPLES) {
            assert_eq!(knob.flag, flag, "the samples follow the table");
            if OWN.contains(&flag) && flag != "samplers" {
                continue;
            }
            let key = |flag| policy::Knob::named(flag).unwrap().key;
            let mut url = vec![("logits", logits), (knob.key, text)];
            url.extend(beside.iter().map(|(flag, text)| (key(flag), *text)));
            let (form, problems) = StepForm::from_pairs(url.iter().copied());
            assert!(problems.is_empty(), "{flag}: {problems:?}");
            assert_eq!(form.knob(flag), text);
            let back = form.to_pairs();
            assert!(
                back.contains(&(knob.key, text.to_string())),
                "{flag}: {back:?}"
            );
            let input = form.check().unwrap_or_else(|e| panic!("{flag}: {e:?}"));
            let mut given = vec![("top-k", "3")];
            given.extend(beside.iter().copied());
            given.push((flag, text));
            let expected = policy::PolicyRequest::new(
                given
                    .iter()
                    .map(|(flag, text)| (policy::Knob::named(flag).unwrap(), text.to_string())),
            )
            .policy(policy::LAB_TEMPERATURE)
            .unwrap();
            assert_eq!(input.policy, expected, "{flag}");
            // And the worker takes the step.
            step(&input).unwrap_or_else(|e| panic!("{flag}: {e:?}"));
        }
    }

    /// The tokens before the step are the context the penalties read: the repetition
    /// penalty every earlier token (Hugging Face's rule: a positive logit divided by it),
    /// the frequency penalty only those generated (OpenAI's: subtracted per occurrence).
    /// Softmax by hand.
    #[test]
    fn the_penalties_read_the_tokens_before_the_step() {
        let last = |form: StepForm| {
            let view = run_step(&form).unwrap();
            let rows = &view.stages.last().unwrap().rows;
            rows.iter().map(|r| r.prob).collect::<Vec<f64>>()
        };
        let softmax = |logits: [f64; 4]| {
            let z: f64 = logits.iter().map(|l| l.exp()).sum();
            logits.map(|l| l.exp() / z)
        };
        let close = |a: &[f64], b: &[f64]| a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-12);
        let base = StepForm {
            prompt: "2".into(),
            output: "3, 3".into(),
            ..StepForm::default()
        }
        .with("temperature", "1")
        .with("top-k", "0");
        let repeated = last(base.clone().with("repetition-penalty", "2"));
        assert!(
            close(&repeated, &softmax([1.2, 0.1, 1.2, 0.85])),
            "{repeated:?}"
        );
        let frequent = last(base.clone().with("frequency-penalty", "0.5"));
        assert!(
            close(&frequent, &softmax([1.2, 0.1, 2.4, 0.7])),
            "{frequent:?}"
        );
        let bad = StepForm {
            output: "1, 9".into(),
            ..base
        };
        assert_eq!(
            bad.check().unwrap_err().of("output-ids").unwrap(),
            "Generated token 9 is not a token here: the logits have ids 0 to 3."
        );
    }

    #[test]
    fn the_conformance_view_runs_every_engine_on_the_form() {
        let form = StepForm {
            logits: "3, 2, 1".into(),
            ..StepForm::default()
        }
        .with("temperature", "0.5")
        .with("top-k", "0")
        .with("top-p", "0.8");
        let c = run_conformance(&form).unwrap();
        assert_eq!(
            c.summary,
            "lab, hf and vllm keep {0}; llama.cpp keeps {0, 1}."
        );
        assert_eq!(
            c.engines
                .iter()
                .map(|e| e.engine.name())
                .collect::<Vec<_>>(),
            ["lab", "hf", "llama.cpp", "vllm"],
            "the panel's table heads its columns in this order"
        );
        let view = run_step(&form).unwrap();
        assert!(view.stages.iter().all(|s| !s.explanation.is_empty()));
    }
}
