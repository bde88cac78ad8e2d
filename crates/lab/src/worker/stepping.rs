//! The decoding-step panel's step, in the model worker ([`Job::Step`]): one
//! [`policy::step`] with every stage's snapshot, spread over the whole vocabulary
//! ([`policy::step_report::spread`]),
//! the draw laid along [0, 1), the line the chapter's `decode.py` prints for the same
//! settings where it can express them, and the same settings under every engine
//! ([`policy::conformance`]). The page only checks the form and draws what comes back.
//!
//! [`Job::Step`]: crate::worker::protocol::Job::Step

use policy::chapter::{self, Argpartition};
use policy::{NumpyRng, Policy, PolicyError, Snapshots, StepContext};
use report::sentence;

use crate::worker::protocol::{EngineColumn, Segment, StepInput, StepRefused, StepView, Stepped};

/// Runs one policy step for the checked form. A problem the policy finds only when it runs
/// (a temperature or bias that takes a logit beyond the range of a float) is refused at the
/// field that caused it.
pub fn step(input: &StepInput) -> Result<Stepped, StepRefused> {
    let StepInput {
        logits,
        policy,
        prompt,
        output,
        seed,
    } = input;
    let (logits, policy, seed) = (logits.as_slice(), policy, *seed);
    let tokens = [prompt.as_slice(), output].concat();
    let context = StepContext::new(&tokens, prompt.len());
    let mut rng = NumpyRng::new(seed);
    let outcome =
        policy::step(policy, logits, context, &mut rng, Snapshots::Record).map_err(|e| {
            StepRefused {
                field: field_of(&e).to_string(),
                message: sentence(e.to_string()),
            }
        })?;
    let stages = outcome.stages.unwrap_or_default();
    let strip = stages
        .last()
        .map(|last| strip(&last.tokens))
        .unwrap_or_default();
    let stages = policy::step_report::spread(&stages, logits.len());
    // `decode.py` knows temperature and top-k alone (either order gives its draw: top-k
    // keeps the same tokens before or after scaling).
    let chapter = Policy {
        temperature: policy.temperature,
        top_k: policy.top_k,
        order: policy.order,
        ..Policy::default()
    };
    let chapter_line = (*policy == chapter && policy.top_k > 0)
        .then(|| {
            chapter::choose(
                logits,
                policy.temperature,
                policy.top_k,
                seed,
                Argpartition::default(),
            )
        })
        .and_then(Result::ok)
        .map(|choice| choice.to_string());
    let view = StepView {
        stages,
        token: outcome.token,
        prob: outcome.prob,
        draw: outcome.draw,
        entropy: outcome.entropy,
        strip,
        seed,
        chapter_line,
    };
    let conformance = policy::conformance(policy, logits, context, seed);
    Ok(Stepped {
        view,
        engines: conformance
            .engines
            .into_iter()
            .map(|e| EngineColumn {
                engine: e.engine,
                kept: e.result.ok(),
            })
            .collect(),
        summary: conformance.summary,
    })
}

/// The survivors of a final distribution (ascending ids) as consecutive segments of [0, 1).
fn strip(tokens: &[policy::TokenProb]) -> Vec<Segment> {
    let bounds = policy::rng::choice_bounds(tokens.iter().map(|t| t.prob));
    let mut from = 0.0;
    tokens
        .iter()
        .zip(bounds)
        .map(|(t, to)| {
            let segment = Segment {
                id: t.id,
                prob: t.prob,
                from,
                to,
            };
            from = to;
            segment
        })
        .collect()
}

/// The knob (by its flag) whose field a refusal belongs to; the logits' for the rest. The
/// page has checked each knob under its engine, so what is left is found only by running.
fn field_of(error: &PolicyError) -> &'static str {
    match error {
        PolicyError::TemperatureOverflow { .. } | PolicyError::InvalidTemperature(_) => {
            "temperature"
        }
        PolicyError::ConstraintOverflow { .. } => "bias",
        PolicyError::OrderAndEngine | PolicyError::OrderAndSamplers => "order",
        PolicyError::EngineRefuses { .. } => "engine",
        _ => "logits",
    }
}
