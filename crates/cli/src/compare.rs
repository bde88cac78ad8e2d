//! `decode-lab compare`: two policies on the same model, prompt and seeded stream
//! ([`policy::compare`]), printed as the report of `policy::compare_report` in Markdown or as JSON.

use std::path::Path;

use policy::compare::Comparison;
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
