//! The lab's one interface to the policy core: text from the form in, a view model out.
//!
//! Everything here is plain data, so it is tested natively and the components only draw.

use policy::chapter::{self, Argpartition};
use policy::{NumpyRng, Policy, Snapshots, StageOrder, StepContext};

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
}

impl Default for StepForm {
    /// The chapter's example: `choose([1.2, 0.1, 2.4, 1.7])` with its defaults.
    fn default() -> StepForm {
        StepForm {
            logits: "1.2, 0.1, 2.4, 1.7".into(),
            temperature: "0.7".into(),
            top_k: "3".into(),
            top_p: "1".into(),
            min_p: "0".into(),
            seed: "7".into(),
            order: StageOrder::TemperatureFirst,
            forbidden: String::new(),
            bias: String::new(),
        }
    }
}

impl StepForm {
    /// The form a URL's query asks for: `logits`, `temperature`, `top_k`, `top_p`, `min_p`,
    /// `seed`, `order=hf|temperature-last`, `forbidden`, `bias`. Missing keys keep the
    /// chapter's defaults; the second value is what the URL held that could not be read.
    pub fn from_pairs<'a>(
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> (StepForm, Vec<String>) {
        let mut form = StepForm::default();
        let mut problems = Vec::new();
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
                "order" => match value.parse() {
                    Ok(order) => form.order = order,
                    Err(_) => problems.push(format!(
                        "The URL asks for order \"{value}\", which is not hf or temperature-last; using temperature first."
                    )),
                },
                _ => {}
            }
        }
        (form, problems)
    }

    /// The query that reproduces this form (the inverse of [`from_pairs`](Self::from_pairs)).
    pub fn to_pairs(&self) -> Vec<(&'static str, String)> {
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
        pairs
    }

    /// The same form with the other stage order, for the side-by-side comparison.
    pub fn other_order(&self) -> StepForm {
        StepForm {
            order: match self.order {
                StageOrder::TemperatureFirst => StageOrder::TemperatureLast,
                StageOrder::TemperatureLast => StageOrder::TemperatureFirst,
            },
            ..self.clone()
        }
    }
}

/// Parses forbidden token ids: `3, 7`.
fn parse_forbidden(text: &str, vocab: usize) -> Result<Vec<u32>, String> {
    text.split(|c: char| c == ',' || c.is_whitespace())
        .filter(|s| !s.is_empty())
        .map(|s| token_id(s, vocab, "Forbidden token"))
        .collect()
}

/// Parses a logit bias (`2:-1.5, 0:+3`, the syntax of [`policy::parse_logit_bias`]) whose
/// ids are all among the logits.
fn parse_bias(text: &str, vocab: usize) -> Result<Vec<(u32, f64)>, String> {
    let bias = policy::parse_logit_bias(text).map_err(|e| sentence(e.to_string()))?;
    for &(id, _) in &bias {
        in_vocab(id, vocab, "Logit bias token")?;
    }
    Ok(bias)
}

fn token_id(text: &str, vocab: usize, name: &str) -> Result<u32, String> {
    let id = text
        .parse::<u32>()
        .map_err(|_| format!("{name} \"{text}\" is not a token id (a whole number)."))?;
    in_vocab(id, vocab, name)
}

fn in_vocab(id: u32, vocab: usize, name: &str) -> Result<u32, String> {
    if (id as usize) < vocab {
        Ok(id)
    } else {
        Err(format!(
            "{name} {id} is not a token here: the logits have ids 0 to {}.",
            vocab - 1
        ))
    }
}

/// One row of a distribution chart and of its table: every token of the vocabulary.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub id: u32,
    /// `None` when the token was removed by an earlier stage.
    pub logit: Option<f64>,
    pub prob: f64,
}

/// The distribution after one stage.
#[derive(Clone, Debug, PartialEq)]
pub struct StageView {
    pub label: &'static str,
    pub survivors: usize,
    pub rows: Vec<Row>,
}

/// Everything the decoding-step panel shows.
#[derive(Clone, Debug, PartialEq)]
pub struct StepView {
    pub stages: Vec<StageView>,
    pub token: u32,
    pub prob: f64,
    pub draw: Option<f64>,
    pub seed: u64,
    /// What the chapter's decode.py prints for the same logits, temperature, top-k and
    /// seed, when those settings are expressible there.
    pub chapter_line: Option<String>,
}

/// `text` as a number, or a sentence naming the field and what it holds.
pub(crate) fn number(text: &str, name: &str) -> Result<f64, String> {
    text.trim()
        .parse::<f64>()
        .map_err(|_| format!("{name} must be a number, but it is \"{}\".", text.trim()))
}

/// `text` as a whole number, or a sentence naming the field and what it holds.
pub(crate) fn whole(text: &str, name: &str) -> Result<u64, String> {
    text.trim().parse::<u64>().map_err(|_| {
        format!(
            "{name} must be a whole number of at least 0, but it is \"{}\".",
            text.trim()
        )
    })
}

/// Parses a comma- or space-separated list of logits.
pub fn parse_logits(text: &str) -> Result<Vec<f64>, String> {
    let logits = text
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<f64>()
                .map_err(|_| format!("Logit \"{s}\" is not a number."))
        })
        .collect::<Result<Vec<f64>, String>>()?;
    if logits.is_empty() {
        return Err("Type at least one logit, for example 1.2, 0.1, 2.4, 1.7.".into());
    }
    Ok(logits)
}

/// Runs one policy step for the form; errors are sentences for the learner.
pub fn run_step(form: &StepForm) -> Result<StepView, String> {
    let logits = parse_logits(&form.logits)?;
    let policy = Policy {
        forbidden: parse_forbidden(&form.forbidden, logits.len())?,
        logit_bias: parse_bias(&form.bias, logits.len())?,
        temperature: number(&form.temperature, "Temperature")?,
        top_k: whole(&form.top_k, "Top-k")? as usize,
        top_p: number(&form.top_p, "Top-p")?,
        min_p: number(&form.min_p, "Min-p")?,
        order: form.order,
        ..Policy::default()
    };
    let seed = whole(&form.seed, "Seed")?;
    let mut rng = NumpyRng::new(seed);
    let outcome = policy::step(
        &policy,
        &logits,
        StepContext::default(),
        &mut rng,
        Snapshots::Record,
    )
    .map_err(|e| sentence(e.to_string()))?;
    let stages = outcome
        .stages
        .unwrap_or_default()
        .into_iter()
        .map(|stage| {
            let mut rows: Vec<Row> = (0..logits.len() as u32)
                .map(|id| Row {
                    id,
                    logit: None,
                    prob: 0.0,
                })
                .collect();
            for t in &stage.tokens {
                rows[t.id as usize] = Row {
                    id: t.id,
                    logit: Some(t.logit),
                    prob: t.prob,
                };
            }
            StageView {
                label: stage.stage.label(),
                survivors: stage.survivors,
                rows,
            }
        })
        .collect();
    let chapter_line = (policy.top_p == 1.0
        && policy.min_p == 0.0
        && policy.top_k > 0
        && policy.forbidden.is_empty()
        && policy.logit_bias.is_empty())
    .then(|| {
        chapter::choose(
            &logits,
            policy.temperature,
            policy.top_k,
            seed,
            Argpartition::default(),
        )
    })
    .and_then(Result::ok)
    .map(|choice| choice.to_string());
    Ok(StepView {
        stages,
        token: outcome.token,
        prob: outcome.prob,
        draw: outcome.draw,
        seed,
        chapter_line,
    })
}

/// A policy error as a sentence: capitalised, with a full stop.
pub(crate) fn sentence(message: String) -> String {
    let mut chars = message.chars();
    match chars.next() {
        Some(first) => format!("{}{}.", first.to_uppercase(), chars.as_str()),
        None => message,
    }
}

/// A fresh seed from the browser's (or the OS's) entropy, for the "New seed" button.
pub fn fresh_seed() -> Result<u64, String> {
    getrandom::u64().map_err(|e| format!("No fresh seed could be drawn: {e}."))
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn bad_input_becomes_a_sentence() {
        let form = |f: fn(&mut StepForm)| {
            let mut form = StepForm::default();
            f(&mut form);
            run_step(&form).unwrap_err()
        };
        assert_eq!(
            form(|f| f.logits = "1, x".into()),
            "Logit \"x\" is not a number."
        );
        assert_eq!(
            form(|f| f.logits = " ".into()),
            "Type at least one logit, for example 1.2, 0.1, 2.4, 1.7."
        );
        assert_eq!(
            form(|f| f.temperature = "warm".into()),
            "Temperature must be a number, but it is \"warm\"."
        );
        assert_eq!(
            form(|f| f.temperature = "-1".into()),
            "Temperature -1 is invalid: it must be a finite number, at least 0 (0 means greedy)."
        );
        assert_eq!(
            form(|f| f.top_p = "0".into()),
            "Top-p 0 is invalid: it must be greater than 0 and at most 1."
        );
        assert_eq!(
            form(|f| f.seed = "-3".into()),
            "Seed must be a whole number of at least 0, but it is \"-3\"."
        );
        assert!(form(|f| f.logits = "1, NaN".into()).starts_with("Logit 1 is NaN"));
        assert_eq!(
            form(|f| f.forbidden = "2, 9".into()),
            "Forbidden token 9 is not a token here: the logits have ids 0 to 3."
        );
        assert_eq!(
            form(|f| f.bias = "2=1".into()),
            "Logit bias \"2=1\" is not of the form id:value, for example 2:-1.5."
        );
        assert_eq!(
            form(|f| f.bias = "1:x".into()),
            "Logit bias for token 1 must be a finite number, but it is \"x\"."
        );
        assert_eq!(
            form(|f| f.bias = "1:1, 9:1".into()),
            "Logit bias token 9 is not a token here: the logits have ids 0 to 3."
        );
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
}
