//! `decode-lab compare`: two policies on the same model, prompt and seeded stream
//! ([`policy::compare`]), printed as a table or as JSON.

use std::path::Path;

use policy::compare::{Comparison, RunShape};
use policy::{Policy, Precision, RunConfig, SeedSource, StopConfig};

use crate::error::CliError;
use crate::model_dir;
use crate::model_dir::WallClock;

/// What `compare` was asked: the shared run settings and the two policies (each with the
/// flags it was read from, for the report).
pub struct Request<'a> {
    pub dir: &'a Path,
    pub precision: Precision,
    pub prompt: &'a str,
    pub template: &'a str,
    pub seed: u64,
    pub seed_source: SeedSource,
    pub max_tokens: usize,
    pub a: (&'a str, Policy),
    pub b: (&'a str, Policy),
}

pub fn run(request: &Request) -> Result<Comparison, CliError> {
    let mut loaded = model_dir::load(request.dir, request.precision)?;
    let eos = loaded.tokenizer.end_of_text();
    let config = |policy: &Policy| RunConfig {
        app_version: env!("CARGO_PKG_VERSION").into(),
        prompt_template: request.template.into(),
        prompt: request.prompt.into(),
        // End-of-text ends the run unless the flags name the end, as in `generate`.
        policy: Policy {
            eos_token: policy.eos_token.or(Some(eos)),
            ..policy.clone()
        },
        seed: request.seed,
        seed_source: request.seed_source,
        max_tokens: request.max_tokens,
        stop: StopConfig::default(),
    };
    Ok(policy::compare::compare(
        &mut loaded.model,
        &loaded.tokenizer,
        &config(&request.a.1),
        &config(&request.b.1),
        &mut WallClock::new(),
    )?)
}

/// The comparison for people: each run's text and shape, the first divergence, then a row
/// per step of a's path.
pub fn table(request: &Request, c: &Comparison) -> String {
    let mut out = String::new();
    for (name, (flags, _), record, shape) in [
        ("a", &request.a, &c.a, &c.shape_a),
        ("b", &request.b, &c.b, &c.shape_b),
    ] {
        out += &format!(
            "{name} ({}): {:?}\n   {}; stopped: {}\n",
            if flags.trim().is_empty() {
                "defaults".to_string()
            } else {
                policy::Excerpt(flags.trim()).to_string()
            },
            record.output_text,
            shape_words(shape),
            record.stop_reason.describe(),
        );
    }
    out += &match c.first_divergence {
        None => "the same tokens at every step\n".to_string(),
        Some(t) => {
            let token = |record: &policy::RunRecord| {
                record
                    .steps
                    .get(t)
                    .map_or("nothing (stopped)".to_string(), |s| {
                        format!("{} {:?}", s.token, s.text)
                    })
            };
            format!(
                "first divergence at step {t}: a chose {}, b chose {}\n",
                token(&c.a),
                token(&c.b)
            )
        }
    };
    out += "\nalong a's path (b's policy on a's context):\n";
    out += "step | a token | b token | p_a(a's token) | p_b(a's token) | survivors a | survivors b | KL(a‖b) nats | TV\n";
    for s in &c.steps {
        let text_a = &c.a.steps[s.step].text;
        let b = match s.token_b {
            Some(id) => format!("{id} {:?}", c.b.steps[s.step].text),
            None => "–".to_string(),
        };
        let kl = if s.divergence.kl.is_finite() {
            format!("{:.4}", s.divergence.kl)
        } else {
            "∞".to_string()
        };
        out += &format!(
            "{} | {} {text_a:?} | {b} | {:.4} | {:.4} | {} | {} | {kl} | {:.4}\n",
            s.step, s.token_a, s.prob_a, s.prob_b, s.survivors_a, s.survivors_b, s.divergence.tv
        );
    }
    out.trim_end().to_string()
}

fn shape_words(shape: &RunShape) -> String {
    let figure = |x: Option<f64>| x.map_or("–".to_string(), |v| format!("{v:.3}"));
    format!(
        "{} tokens, distinct-1 {}, distinct-2 {}, repetition {}",
        shape.tokens,
        figure(shape.distinct_1),
        figure(shape.distinct_2),
        figure(shape.repetition)
    )
}
