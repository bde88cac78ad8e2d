//! The decoding-step panel's data: the form's text (or the URL's) in, a checked
//! [`StepInput`] out for the model worker, which takes the step
//! ([`crate::worker::stepping`]); and what the charts read from the [`StepView`] that comes
//! back (a stage's tallest bars, its takeaway, where the draw landed).
//!
//! Everything here is plain data, so it is tested natively and the components only draw.

use std::fmt;

use policy::{Engine, Policy, Sampler, StageOrder};
use report::sentence;

pub use crate::worker::protocol::{Row, Segment, StageView, StepInput, StepView};

use crate::widgets::form::{Form, Problems};
use crate::widgets::number::{engine_number, whole, FieldError};

/// The decoding-step form, as the learner typed it.
#[derive(Clone, Debug, PartialEq)]
pub struct StepForm {
    pub logits: String,
    pub temperature: String,
    pub top_k: String,
    pub top_p: String,
    pub min_p: String,
    pub seed: String,
    pub order: StageOrder,
    /// Token ids that can never be chosen, comma-separated.
    pub forbidden: String,
    /// Additive logit bias, `id:value` pairs, comma-separated.
    pub bias: String,
    /// Whose semantics and order ([`policy::Engine`]).
    pub engine: Engine,
    /// A chain the learner reordered; `None` is the engine's (or the order's) own.
    pub samplers: Option<Vec<Sampler>>,
    pub typical: String,
    pub epsilon: String,
    pub eta: String,
    /// Top-nσ's n; empty is off.
    pub top_n_sigma: String,
    pub xtc_probability: String,
    pub xtc_threshold: String,
}

/// The samplers the decoding-step form has knobs for, which its chain editor orders (the
/// penalties and DRY read a context, which the panel does not have).
pub const STEP_SAMPLERS: [Sampler; 9] = [
    Sampler::TopNSigma,
    Sampler::TopK,
    Sampler::Typical,
    Sampler::TopP,
    Sampler::MinP,
    Sampler::Epsilon,
    Sampler::Eta,
    Sampler::Xtc,
    Sampler::Temperature,
];

impl Default for StepForm {
    /// The chapter's example: `choose([1.2, 0.1, 2.4, 1.7])` with its defaults.
    fn default() -> StepForm {
        StepForm {
            logits: "1.2, 0.1, 2.4, 1.7".into(),
            temperature: policy::LAB_TEMPERATURE.to_string(),
            top_k: "3".into(),
            top_p: "1".into(),
            min_p: "0".into(),
            seed: "7".into(),
            order: StageOrder::TemperatureFirst,
            forbidden: String::new(),
            bias: String::new(),
            engine: Engine::Lab,
            samplers: None,
            typical: "1".into(),
            epsilon: "0".into(),
            eta: "0".into(),
            top_n_sigma: String::new(),
            xtc_probability: "0".into(),
            xtc_threshold: policy::XTC_THRESHOLD.to_string(),
        }
    }
}

impl Form for StepForm {
    type Checked = StepInput;

    /// The form a URL's query asks for: `logits`, `temperature`, `top_k`, `top_p`, `min_p`,
    /// `seed`, `order=hf|temperature-last`, `forbidden`, `bias`. Missing keys keep the
    /// chapter's defaults; the second value is what the URL held that could not be read.
    fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> (StepForm, Problems) {
        let mut form = StepForm::default();
        let mut problems = Problems::default();
        for (key, value) in pairs {
            let value = value.to_string();
            match key {
                "logits" => form.logits = value,
                "temperature" => form.temperature = value,
                "top_k" => form.top_k = value,
                "top_p" => form.top_p = value,
                "min_p" => form.min_p = value,
                "seed" => form.seed = value,
                "forbidden" => form.forbidden = value,
                "bias" => form.bias = value,
                "typical" => form.typical = value,
                "epsilon" => form.epsilon = value,
                "eta" => form.eta = value,
                "top_n_sigma" => form.top_n_sigma = value,
                "xtc_probability" => form.xtc_probability = value,
                "xtc_threshold" => form.xtc_threshold = value,
                "engine" => match value.parse() {
                    Ok(engine) => form.engine = engine,
                    Err(e) => problems.add("engine", sentence(format!("The URL asks for {e}; using the lab's own"))),
                },
                "samplers" => match policy::parse_samplers(&value) {
                    Ok(chain) => form.samplers = Some(chain),
                    Err(e) => problems.add("samplers", sentence(format!("The URL's sampler order cannot be read: {e}; using the engine's order"))),
                },
                "order" => match value.parse() {
                    Ok(order) => form.order = order,
                    Err(_) => problems.add("order", format!(
                        "The URL asks for order \"{value}\", which is not hf or temperature-last; using temperature first."
                    )),
                },
                _ => {}
            }
        }
        (form, problems)
    }

    /// The query that reproduces this form (the inverse of [`from_pairs`](Self::from_pairs)).
    fn to_pairs(&self) -> Vec<(&'static str, String)> {
        let mut pairs = vec![
            ("logits", self.logits.clone()),
            ("temperature", self.temperature.clone()),
            ("top_k", self.top_k.clone()),
            ("top_p", self.top_p.clone()),
            ("min_p", self.min_p.clone()),
            ("seed", self.seed.clone()),
            ("order", self.order.to_string()),
        ];
        if !self.forbidden.trim().is_empty() {
            pairs.push(("forbidden", self.forbidden.clone()));
        }
        if !self.bias.trim().is_empty() {
            pairs.push(("bias", self.bias.clone()));
        }
        if !self.engine.is_lab() {
            pairs.push(("engine", self.engine.to_string()));
        }
        if let Some(chain) = &self.samplers {
            pairs.push(("samplers", policy::chain::samplers_label(chain)));
        }
        // The modern samplers' knobs, only when moved from their defaults.
        let defaults = StepForm::default();
        for (key, value, default) in [
            ("typical", &self.typical, &defaults.typical),
            ("epsilon", &self.epsilon, &defaults.epsilon),
            ("eta", &self.eta, &defaults.eta),
            ("top_n_sigma", &self.top_n_sigma, &defaults.top_n_sigma),
            (
                "xtc_probability",
                &self.xtc_probability,
                &defaults.xtc_probability,
            ),
            (
                "xtc_threshold",
                &self.xtc_threshold,
                &defaults.xtc_threshold,
            ),
        ] {
            if value.trim() != default {
                pairs.push((key, value.clone()));
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
        let forbidden = problems.field("forbidden", parse_forbidden(&self.forbidden, vocab));
        let logit_bias = problems.field("bias", parse_bias(&self.bias, vocab));
        let engine = self.engine;
        let knob = |text: &str, label: &str, set: fn(&mut Policy, f64)| {
            engine_number(text, label, engine, set)
        };
        let temperature = problems.field(
            "temperature",
            knob(&self.temperature, "Temperature", |p, v| p.temperature = v),
        );
        let top_k = problems.field("top-k", whole(&self.top_k, "Top-k"));
        let top_p = problems.field("top-p", knob(&self.top_p, "Top-p", |p, v| p.top_p = v));
        let min_p = problems.field("min-p", knob(&self.min_p, "Min-p", |p, v| p.min_p = v));
        let typical = problems.field(
            "typical",
            knob(&self.typical, "Typical", |p, v| p.typical_p = v),
        );
        let epsilon = problems.field(
            "epsilon",
            knob(&self.epsilon, "ε-cutoff", |p, v| p.epsilon_cutoff = v),
        );
        let eta = problems.field("eta", knob(&self.eta, "η-cutoff", |p, v| p.eta_cutoff = v));
        let top_n_sigma = problems.field(
            "top-n-sigma",
            if self.top_n_sigma.trim().is_empty() {
                Ok(None)
            } else {
                knob(&self.top_n_sigma, "Top-nσ", |p, v| p.top_n_sigma = Some(v)).map(Some)
            },
        );
        let xtc_probability = problems.field(
            "xtc-probability",
            knob(&self.xtc_probability, "XTC probability", |p, v| {
                p.xtc_probability = v
            }),
        );
        // The threshold alone switches nothing on: its range is checked with XTC on, under
        // the lab's rules unless llama.cpp's (engines without XTC refuse its probability).
        let xtc_engine = if engine == Engine::LlamaCpp {
            engine
        } else {
            Engine::Lab
        };
        let xtc_threshold = problems.field(
            "xtc-threshold",
            engine_number(&self.xtc_threshold, "XTC threshold", xtc_engine, |p, v| {
                p.xtc_probability = 0.5;
                p.xtc_threshold = v;
            }),
        );
        let seed = problems.field("seed", whole(&self.seed, "Seed"));
        problems.or(|| {
            Some(StepInput {
                logits: logits?,
                policy: Policy {
                    forbidden: forbidden?,
                    logit_bias: logit_bias?,
                    temperature: temperature?,
                    top_k: top_k? as usize,
                    top_p: top_p?,
                    min_p: min_p?,
                    order: self.order,
                    engine,
                    samplers: self.samplers.clone(),
                    typical_p: typical?,
                    epsilon_cutoff: epsilon?,
                    eta_cutoff: eta?,
                    top_n_sigma: top_n_sigma?,
                    xtc_probability: xtc_probability?,
                    xtc_threshold: xtc_threshold?,
                    ..Policy::default()
                },
                seed: seed?,
            })
        })
    }
}

impl StepForm {
    /// The chain the step runs, as far as the form's knobs go: the learner's order, else
    /// the engine's, else the fixed order's.
    pub fn chain(&self) -> Vec<Sampler> {
        let policy = Policy {
            engine: self.engine,
            order: self.order,
            samplers: self.samplers.clone(),
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
        Some(StepForm {
            samplers: Some(full),
            order: StageOrder::default(),
            ..self.clone()
        })
    }
}

/// Parses forbidden token ids: `3, 7`.
fn parse_forbidden(text: &str, vocab: usize) -> Result<Vec<u32>, FieldError> {
    text.split(|c: char| c == ',' || c.is_whitespace())
        .filter(|s| !s.is_empty())
        .map(|s| token_id(s, vocab, "Forbidden token"))
        .collect()
}

/// Parses a logit bias (`2:-1.5, 0:+3`, the syntax of [`policy::parse_logit_bias`]) whose
/// ids are all among the logits.
fn parse_bias(text: &str, vocab: usize) -> Result<Vec<(u32, f64)>, FieldError> {
    let bias = policy::parse_logit_bias(text).map_err(FieldError::Policy)?;
    for &(id, _) in &bias {
        in_vocab(id, vocab, "Logit bias token")?;
    }
    Ok(bias)
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

impl StageView {
    /// The most probable token the stage kept (the lowest id among equals).
    pub fn top(&self) -> Option<&Row> {
        self.rows
            .iter()
            .filter(|r| r.logit.is_some())
            .fold(None::<&Row>, |best, r| match best {
                Some(b) if b.prob >= r.prob => Some(b),
                _ => Some(r),
            })
    }

    /// The rows the chart draws one bar each, in id order, and the rest as one: every row
    /// when there are at most [`MOST_BARS`]; else the `MOST_BARS - 1` tallest bars (a
    /// removed token stands as tall as what it would have had; the lower id first among
    /// equals).
    pub fn shown(&self) -> (Vec<&Row>, Option<Rest>) {
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

    /// The chart's takeaway, from its rows: the most probable token after the stage and its
    /// share of the probability, then what the stage removed: "After top-k, token 2 has
    /// 61.2 %, and token 1 was removed."
    pub fn takeaway(&self) -> String {
        let label = &self.label;
        let top = self.top();
        let removed: Vec<String> = self
            .rows
            .iter()
            .filter(|r| r.unkept.is_some())
            .map(|r| r.id.to_string())
            .collect();
        let mut text = match top {
            Some(r) => format!("After {label}, token {} has {:.1} %", r.id, 100.0 * r.prob),
            None => format!("After {label}, no token is left"),
        };
        // One short sentence, with no second naming of the stage, so that the takeaway
        // reads at grade 9 or below.
        text += &match removed.as_slice() {
            [] => ", and no token was removed.".to_string(),
            [one] => format!(", and token {one} was removed."),
            [init @ .., last] if removed.len() <= 5 => {
                format!(", and tokens {} and {last} were removed.", init.join(", "))
            }
            many => format!(", and {} tokens were removed.", many.len()),
        };
        text
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

/// The panel's field named `field` (a step's [`StepRefused`](crate::worker::protocol::StepRefused)
/// names it as text), the logits' when no other field has the name.
pub fn step_field(field: &str) -> &'static str {
    const FIELDS: [&str; 16] = [
        "logits",
        "temperature",
        "top-k",
        "top-p",
        "min-p",
        "typical",
        "epsilon",
        "eta",
        "top-n-sigma",
        "xtc-probability",
        "xtc-threshold",
        "bias",
        "forbidden",
        "order",
        "engine",
        "samplers",
    ];
    FIELDS.into_iter().find(|f| *f == field).unwrap_or("logits")
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
            top_k: "25".into(),
            top_p: "1".into(),
            ..StepForm::default()
        };
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
            ("top-k", |f| f.top_k = "3".into()),
            ("top-p", |f| f.top_p = "0.6".into()),
            ("min-p", |f| f.min_p = "0.3".into()),
            ("epsilon", |f| f.epsilon = "0.08".into()),
            ("eta", |f| f.eta = "0.2".into()),
            ("top-n-sigma", |f| f.top_n_sigma = "0.5".into()),
            ("typical", |f| f.typical = "0.5".into()),
            ("xtc", |f| {
                f.xtc_probability = "1".into();
                f.xtc_threshold = "0.1".into()
            }),
        ];
        for (label, set) in forms {
            let mut form = StepForm {
                logits: logits.clone(),
                top_k: "0".into(),
                temperature: "1".into(),
                ..StepForm::default()
            };
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
            problem(|f| f.temperature = "warm".into(), "temperature"),
            "Temperature must be a number, but it is \"warm\"."
        );
        assert_eq!(
            problem(|f| f.temperature = "-1".into(), "temperature"),
            "Temperature -1 is invalid: it must be a finite number, at least 0 (0 means greedy)."
        );
        assert_eq!(
            problem(|f| f.top_p = "0".into(), "top-p"),
            "Top-p 0 is invalid: it must be greater than 0 and at most 1."
        );
        assert_eq!(
            problem(|f| f.seed = "-3".into(), "seed"),
            "Seed must be a whole number of at least 0, but it is \"-3\"."
        );
        assert!(problem(|f| f.logits = "1, NaN".into(), "logits").starts_with("Logit 1 is NaN"));
        assert_eq!(
            problem(|f| f.forbidden = "2, 9".into(), "forbidden"),
            "Forbidden token 9 is not a token here: the logits have ids 0 to 3."
        );
        assert_eq!(
            problem(|f| f.bias = "2=1".into(), "bias"),
            "Logit bias \"2=1\" is not of the form id:value, for example 2:-1.5."
        );
        assert_eq!(
            problem(|f| f.bias = "1:x".into(), "bias"),
            "Logit bias for token 1 must be a finite number, but it is \"x\"."
        );
        assert_eq!(
            problem(|f| f.bias = "1:1, 9:1".into(), "bias"),
            "Logit bias token 9 is not a token here: the logits have ids 0 to 3."
        );
        assert!(problem(|f| f.temperature = "1e-320".into(), "temperature")
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
        let mut form = StepForm {
            forbidden: "2".into(),
            ..StepForm::default()
        };
        let view = run_step(&form).unwrap();
        assert_eq!(view.stages[0].rows[2].prob, 0.0);
        assert_ne!(view.token, 2);
        assert_eq!(view.stages.last().unwrap().survivors, 3);
        // A bias of +10 on token 1 makes it the overwhelming favourite: softmax by hand.
        form.forbidden.clear();
        form.bias = "1:+10".into();
        form.temperature = "1".into();
        form.top_k = "0".into();
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
            order: StageOrder::TemperatureLast,
            forbidden: "0".into(),
            bias: "1:0.5".into(),
            ..StepForm::default()
        };
        let pairs = form.to_pairs();
        let (back, problems) = StepForm::from_pairs(pairs.iter().map(|(k, v)| (*k, v.as_str())));
        assert_eq!(back, form);
        assert!(problems.is_empty());
        let (odd, problems) = StepForm::from_pairs([("order", "sideways"), ("top_k", "x")]);
        assert_eq!(odd.order, StageOrder::TemperatureFirst);
        assert_eq!(
            odd.top_k, "x",
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
            "temperature;top_n_sigma;top_k;top_p;min_p;typ_p;epsilon;eta;xtc"
        );
        assert!(
            form.moved(0, true).is_none(),
            "the first cannot move earlier"
        );
        let moved = form.moved(0, false).unwrap();
        assert_eq!(
            names(&moved),
            "top_n_sigma;temperature;top_k;top_p;min_p;typ_p;epsilon;eta;xtc"
        );
        let llama = StepForm {
            engine: Engine::LlamaCpp,
            ..moved.clone()
        };
        let pairs = llama.to_pairs();
        let (back, problems) = StepForm::from_pairs(pairs.iter().map(|(k, v)| (*k, v.as_str())));
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(back, llama);
        // An engine's own order, until the learner moves something.
        let preset = StepForm {
            engine: Engine::LlamaCpp,
            ..StepForm::default()
        };
        assert_eq!(
            names(&preset),
            "top_n_sigma;top_k;typ_p;top_p;min_p;epsilon;eta;xtc;temperature"
        );
    }

    #[test]
    fn each_engine_refuses_at_the_field_it_names() {
        let problem = |engine, f: fn(&mut StepForm), field: &str| {
            let mut form = StepForm {
                engine,
                ..StepForm::default()
            };
            f(&mut form);
            let problems = run_step(&form).unwrap_err();
            problems
                .of(field)
                .unwrap_or_else(|| panic!("{field}: {problems:?}"))
        };
        assert_eq!(
            problem(Engine::Vllm, |f| f.typical = "0.9".into(), "typical"),
            "Vllm does not take typical-p 0.9: it takes no such sampler."
        );
        assert_eq!(
            problem(Engine::Vllm, |f| f.top_p = "0".into(), "top-p"),
            "Vllm does not take top-p 0: it takes a top-p greater than 0 and at most 1."
        );
        // llama.cpp takes top-p 0 and keeps the top token.
        let zero = StepForm {
            engine: Engine::LlamaCpp,
            top_p: "0".into(),
            ..StepForm::default()
        };
        assert_eq!(run_step(&zero).unwrap().stages.last().unwrap().survivors, 1);
        let both = StepForm {
            engine: Engine::Hf,
            order: StageOrder::TemperatureLast,
            ..StepForm::default()
        };
        let problems = run_step(&both).unwrap_err();
        assert!(problems.of("order").is_some(), "{problems:?}");
    }

    #[test]
    fn the_conformance_view_runs_every_engine_on_the_form() {
        let form = StepForm {
            logits: "3, 2, 1".into(),
            temperature: "0.5".into(),
            top_k: "0".into(),
            top_p: "0.8".into(),
            ..StepForm::default()
        };
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
