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
        }
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
    let chapter_line = (policy.top_p == 1.0 && policy.min_p == 0.0 && policy.top_k > 0)
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
            "Temperature -1 is invalid: it must be a number at least 0 (0 means greedy)."
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
    }
}
