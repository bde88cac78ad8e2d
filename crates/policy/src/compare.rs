//! Two policies on the same model, prompt and seeded stream: where their tokens part, how far
//! apart their distributions are at every step, and what each generation looks like.
//!
//! Both runs draw from `NumpyRng::new(seed)`, so step t of each uses the same uniform
//! whenever both sample. The distances are teacher-forced along run a's path: at each of a's
//! steps the model's logits for a's context go through both policies, and the two final
//! distributions are compared, so a step's numbers never depend on b having drifted away.
//! A policy whose step has state or chance is followed exactly: a's mirostat μ is the one
//! its run recorded at each step, b's moves along a's tokens by b's own update, and XTC
//! with a chance between 0 and 1 is the mixture of its fired and unfired distributions.
//!
//! - KL(a‖b) = Σ p_a ln(p_a / p_b) in nats over a's survivors; infinite when a keeps a token
//!   that b removes.
//! - Total variation = ½ Σ |p_a − p_b|, in [0, 1].
//! - distinct-n = distinct token n-grams over all n-grams of one output; the repetition rate
//!   is the share of token 4-grams already seen earlier in the same output.

use std::collections::HashSet;

use serde::{Serialize, Serializer};

use crate::generate::{generate, GenerateError, LanguageModel, Unobserved, Vocabulary};
use crate::math;
use crate::pipeline::{MirostatMu, Policy, Snapshots, StepContext, Stepper, TokenProb};
use crate::record::{RunConfig, RunRecord};
use crate::{Clock, NumpyRng};

/// How far apart two distributions over the same tokens are.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Divergence {
    /// KL(a‖b) in nats; `f64::INFINITY` (written `"inf"` in JSON) when a keeps a token b
    /// removes.
    #[serde(serialize_with = "finite_or_inf")]
    pub kl: f64,
    /// Total-variation distance, in [0, 1].
    pub tv: f64,
}

fn finite_or_inf<S: Serializer>(x: &f64, serializer: S) -> Result<S::Ok, S::Error> {
    if x.is_finite() {
        serializer.serialize_f64(*x)
    } else {
        serializer.serialize_str("inf")
    }
}

/// KL(a‖b) and the total variation between two sparse distributions, each listing its
/// survivors in ascending id order (as a [`StageSnapshot`](crate::StageSnapshot) does);
/// every unlisted token has probability 0.
pub fn divergence(a: &[TokenProb], b: &[TokenProb]) -> Divergence {
    let (mut kl, mut abs) = (0.0f64, 0.0f64);
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        let ia = a.get(i).map_or(u32::MAX, |t| t.id);
        let jb = b.get(j).map_or(u32::MAX, |t| t.id);
        let (pa, pb) = match ia.cmp(&jb) {
            std::cmp::Ordering::Less => {
                i += 1;
                (a[i - 1].prob, 0.0)
            }
            std::cmp::Ordering::Greater => {
                j += 1;
                (0.0, b[j - 1].prob)
            }
            std::cmp::Ordering::Equal => {
                i += 1;
                j += 1;
                (a[i - 1].prob, b[j - 1].prob)
            }
        };
        abs += (pa - pb).abs();
        if pa > 0.0 {
            kl += if pb > 0.0 {
                pa * math::ln(pa / pb)
            } else {
                f64::INFINITY
            };
        }
    }
    Divergence {
        // Rounding can leave a tiny negative sum for identical distributions.
        kl: kl.max(0.0),
        tv: (abs / 2.0).min(1.0),
    }
}

/// distinct-n of one output: distinct token n-grams over all its n-grams; `None` when it has
/// fewer than n tokens.
pub fn distinct_n(tokens: &[u32], n: usize) -> Option<f64> {
    if n == 0 || tokens.len() < n {
        return None;
    }
    let grams: HashSet<&[u32]> = tokens.windows(n).collect();
    Some(grams.len() as f64 / (tokens.len() - n + 1) as f64)
}

/// (4-grams, those already seen earlier in the same output): the repetition rate's parts.
pub fn repeated_fourgrams(tokens: &[u32]) -> (usize, usize) {
    let mut seen = HashSet::new();
    let mut repeated = 0;
    for w in tokens.windows(4) {
        if !seen.insert(w) {
            repeated += 1;
        }
    }
    (tokens.len().saturating_sub(3), repeated)
}

/// What one policy's run looks like as text.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunShape {
    pub tokens: usize,
    /// `None` (absent) when the output has fewer tokens than n.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub distinct_1: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub distinct_2: Option<f64>,
    /// The share of token 4-grams already seen earlier in the output; absent below 4 tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repetition: Option<f64>,
}

impl RunShape {
    pub fn of(record: &RunRecord) -> RunShape {
        let ids: Vec<u32> = record.steps.iter().map(|s| s.token).collect();
        let (fourgrams, repeated) = repeated_fourgrams(&ids);
        RunShape {
            tokens: ids.len(),
            distinct_1: distinct_n(&ids, 1),
            distinct_2: distinct_n(&ids, 2),
            repetition: (fourgrams > 0).then(|| repeated as f64 / fourgrams as f64),
        }
    }
}

/// One step of a's path, with both policies' final distributions over its logits.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StepComparison {
    pub step: usize,
    pub token_a: u32,
    /// b's token at the same step of its own run; absent once b has stopped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_b: Option<u32>,
    /// The probability of a's token under each policy, teacher-forced on a's context.
    pub prob_a: f64,
    pub prob_b: f64,
    pub survivors_a: usize,
    pub survivors_b: usize,
    #[serde(flatten)]
    pub divergence: Divergence,
}

/// Both runs and how they differ.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Comparison {
    pub a: RunRecord,
    pub b: RunRecord,
    /// The first step whose tokens differ (or where one run has stopped and the other not);
    /// absent when the outputs are the same tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_divergence: Option<usize>,
    pub steps: Vec<StepComparison>,
    pub shape_a: RunShape,
    pub shape_b: RunShape,
}

/// Runs `a` and `b` (the same prompt, template, seed and budget; only the policies should
/// differ) and compares them; see the module docs.
pub fn compare<M: LanguageModel + ?Sized>(
    model: &mut M,
    vocabulary: &dyn Vocabulary,
    a: &RunConfig,
    b: &RunConfig,
    clock: &mut dyn Clock,
) -> Result<Comparison, GenerateError> {
    let run_a = generate(model, vocabulary, a, clock, &mut Unobserved)?;
    let run_b = generate(model, vocabulary, b, clock, &mut Unobserved)?;
    let mut logits = Vec::with_capacity(run_a.steps.len());
    for t in 0..run_a.steps.len() {
        let row = if t == 0 {
            model.prefill(&run_a.prompt_tokens)
        } else {
            model.decode_step(run_a.steps[t - 1].token)
        };
        logits.push(row.map_err(GenerateError::model)?.to_vec());
    }
    comparison(a, b, run_a, run_b, &logits)
}

/// The comparison of two finished runs of `a` and `b`, given the model's logits at each of
/// a's steps, teacher-forced on a's path (`logits[0]` after the prompt, `logits[t]` after
/// a's first t tokens). [`compare`] computes them synchronously; a caller whose model
/// answers asynchronously (the lab's worker) computes them its own way and comes here.
pub fn comparison(
    a: &RunConfig,
    b: &RunConfig,
    run_a: RunRecord,
    run_b: RunRecord,
    logits: &[Vec<f32>],
) -> Result<Comparison, GenerateError> {
    let prompt = &run_a.prompt_tokens;
    let mut context = prompt.clone();
    let mut stepper = Stepper::default();
    let mut steps = Vec::with_capacity(run_a.steps.len());
    // b's mirostat μ along a's path, moved by a's tokens as b's own run would be by its own.
    let mut mu_b = None;
    for ((t, s), logits) in run_a.steps.iter().enumerate().zip(logits) {
        let here = StepContext::new(&context, prompt.len());
        let final_a = final_distribution(
            &mut stepper,
            a,
            logits,
            here.with_mirostat_mu(s.mirostat_mu),
        )?;
        let final_b = final_distribution(&mut stepper, b, logits, here.with_mirostat_mu(mu_b))?;
        let prob_of = |dist: &[TokenProb]| {
            dist.binary_search_by_key(&s.token, |t| t.id)
                .map_or(0.0, |k| dist[k].prob)
        };
        let prob_b = prob_of(&final_b);
        if b.policy.mirostat != 0 {
            let mu = mu_b.unwrap_or_else(|| MirostatMu::first(&b.policy));
            mu_b = Some(MirostatMu::after(&b.policy, mu, prob_b).next);
        }
        steps.push(StepComparison {
            step: t,
            token_a: s.token,
            token_b: run_b.steps.get(t).map(|s| s.token),
            prob_a: prob_of(&final_a),
            prob_b,
            survivors_a: final_a.len(),
            survivors_b: final_b.len(),
            divergence: divergence(&final_a, &final_b),
        });
        context.push(s.token);
    }

    let longest = run_a.steps.len().max(run_b.steps.len());
    let first_divergence = (0..longest)
        .find(|&t| run_a.steps.get(t).map(|s| s.token) != run_b.steps.get(t).map(|s| s.token));
    Ok(Comparison {
        shape_a: RunShape::of(&run_a),
        shape_b: RunShape::of(&run_b),
        a: run_a,
        b: run_b,
        first_divergence,
        steps,
    })
}

/// The policy's final distribution over `logits` (its survivors, ascending ids): the last
/// stage snapshot, which every step ends on. The draw does not move it, with one
/// exception: XTC with a chance strictly between 0 and 1 removes the top choices only when
/// its chance fires, so its distribution is the mixture of the two, weighted by the chance.
fn final_distribution(
    stepper: &mut Stepper,
    config: &RunConfig,
    logits: &[f32],
    context: StepContext<'_>,
) -> Result<Vec<TokenProb>, GenerateError> {
    let chance = config.policy.xtc_probability;
    if chance > 0.0 && chance < 1.0 {
        let with = |probability| Policy {
            xtc_probability: probability,
            ..config.policy.clone()
        };
        let fired = last_stage(stepper, &with(1.0), logits, context)?;
        let not = last_stage(stepper, &with(0.0), logits, context)?;
        return Ok(mixture(&fired, chance, &not));
    }
    last_stage(stepper, &config.policy, logits, context)
}

fn last_stage(
    stepper: &mut Stepper,
    policy: &Policy,
    logits: &[f32],
    context: StepContext<'_>,
) -> Result<Vec<TokenProb>, GenerateError> {
    let outcome = stepper.step(
        policy,
        logits,
        context,
        &mut NumpyRng::new(0),
        Snapshots::Record,
    )?;
    Ok(outcome
        .stages
        .and_then(|mut stages| stages.pop())
        .map(|last| last.tokens)
        .unwrap_or_default())
}

/// w · a + (1 − w) · b over two sparse distributions in ascending ids.
fn mixture(a: &[TokenProb], w: f64, b: &[TokenProb]) -> Vec<TokenProb> {
    let mut out = Vec::with_capacity(a.len().max(b.len()));
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        let ia = a.get(i).map_or(u32::MAX, |t| t.id);
        let jb = b.get(j).map_or(u32::MAX, |t| t.id);
        let (token, pa, pb) = match ia.cmp(&jb) {
            std::cmp::Ordering::Less => {
                i += 1;
                (a[i - 1], a[i - 1].prob, 0.0)
            }
            std::cmp::Ordering::Greater => {
                j += 1;
                (b[j - 1], 0.0, b[j - 1].prob)
            }
            std::cmp::Ordering::Equal => {
                i += 1;
                j += 1;
                (b[j - 1], a[i - 1].prob, b[j - 1].prob)
            }
        };
        out.push(TokenProb {
            prob: w * pa + (1.0 - w) * pb,
            ..token
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dist(pairs: &[(u32, f64)]) -> Vec<TokenProb> {
        pairs
            .iter()
            .map(|&(id, prob)| TokenProb {
                id,
                logit: 0.0,
                prob,
            })
            .collect()
    }

    /// By hand: a = (0.5, 0.5, 0), b = (0.25, 0.25, 0.5).
    /// KL = 2 · 0.5 ln 2 = ln 2; TV = ½ (0.25 + 0.25 + 0.5) = 0.5.
    #[test]
    fn kl_and_tv_by_hand() {
        let a = dist(&[(0, 0.5), (1, 0.5)]);
        let b = dist(&[(0, 0.25), (1, 0.25), (2, 0.5)]);
        let d = divergence(&a, &b);
        assert!((d.kl - 2f64.ln()).abs() < 1e-15, "{d:?}");
        assert!((d.tv - 0.5).abs() < 1e-15);
        // b keeps token 2, which a removes: KL(b‖a) is infinite; TV is symmetric.
        let back = divergence(&b, &a);
        assert_eq!(back.kl, f64::INFINITY);
        assert_eq!(back.tv, d.tv);
        assert_eq!(
            serde_json::to_string(&back).unwrap(),
            r#"{"kl":"inf","tv":0.5}"#
        );
        let same = divergence(&a, &a);
        assert_eq!((same.kl, same.tv), (0.0, 0.0));
    }

    #[test]
    fn distinct_n_and_repetition_by_hand() {
        let ids = [1, 2, 3, 4, 1, 2, 3, 4, 5];
        assert_eq!(distinct_n(&ids, 1), Some(5.0 / 9.0));
        // Bigrams 12 23 34 41 12 23 34 45: 5 distinct of 8.
        assert_eq!(distinct_n(&ids, 2), Some(5.0 / 8.0));
        // 4-grams 1234 2341 3412 4123 1234 2345: one repeat of 6.
        assert_eq!(repeated_fourgrams(&ids), (6, 1));
        assert_eq!(distinct_n(&[7], 2), None);
        assert_eq!(repeated_fourgrams(&[1, 2]), (0, 0));
    }
}
