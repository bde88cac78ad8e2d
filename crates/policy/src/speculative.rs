//! Speculative sampling (Leviathan, Kalman and Matias, "Fast Inference from Transformers via
//! Speculative Decoding", ICML 2023, Algorithm 1; Chen et al. 2023 likewise): a cheap draft
//! proposes k tokens, the target scores them in one call, and the rule below keeps the output
//! distributed exactly as the target's.
//!
//! Both distributions are the *final* ones of the decoding policy ([`final_distribution`]),
//! so temperature, top-k, top-p and the constraints shape the acceptance:
//!
//! - a drafted token x (drawn from the draft's q) is accepted with probability
//!   min(1, p(x) / q(x)); on rejection the token is drawn from the residual
//!   norm(max(0, p − q)), and the block ends there;
//! - if all k are accepted, one more token is drawn from the target's next distribution;
//! - under greedy decoding both distributions are one-hot, so the rule accepts exactly when
//!   the two argmaxes agree and otherwise emits the target's argmax.
//!
//! A drafted token is accepted with probability α = Σ_x min(p(x), q(x))
//! ([`acceptance_rate`]); with i.i.d. acceptance one verification emits
//! E = (1 − α^(k+1)) / (1 − α) tokens ([`expected_tokens_per_verify`]).
//!
//! Randomness is only the seeded [`NumpyRng`] handed in, and a certain outcome draws
//! nothing (an acceptance when p(x) ≥ q(x), a rejection when p(x) = 0, a token from a
//! one-hot distribution), so greedy speculation consumes no draws at all.

use crate::pipeline::{Logit, Snapshots, StepContext, Stepper};
use crate::rng::{choice_index, NumpyRng};
use crate::{Policy, PolicyError};

/// How far from 1 a distribution's sum may be (rounding of a softmax over a vocabulary).
const SUM_TOLERANCE: f64 = 1e-9;

/// The final distribution of `policy` over the whole vocabulary, for these `logits` and
/// `context`: what a step draws from (one-hot at the argmax when greedy), as a dense vector.
/// It is the step's last stage snapshot; no draw is taken from any generator.
pub fn final_distribution<L: Logit>(
    stepper: &mut Stepper,
    policy: &Policy,
    logits: &[L],
    context: StepContext<'_>,
    out: &mut Vec<f64>,
) -> Result<(), PolicyError> {
    let outcome = stepper.step_with_draw(policy, logits, context, 0.0, Snapshots::Record)?;
    out.clear();
    out.resize(logits.len(), 0.0);
    let last = outcome.stages.as_ref().and_then(|stages| stages.last());
    for t in last.map(|s| s.tokens.as_slice()).unwrap_or_default() {
        out[t.id as usize] = t.prob;
    }
    Ok(())
}

fn check_distribution(role: &'static str, p: &[f64]) -> Result<(), PolicyError> {
    if let Some((index, &value)) = p
        .iter()
        .enumerate()
        .find(|(_, x)| !(x.is_finite() && **x >= 0.0))
    {
        return Err(PolicyError::InvalidProbability { role, index, value });
    }
    let sum: f64 = p.iter().sum();
    if (sum - 1.0).abs() > SUM_TOLERANCE {
        return Err(PolicyError::DistributionSum { role, sum });
    }
    Ok(())
}

fn check_pair(target: &[f64], draft: &[f64]) -> Result<(), PolicyError> {
    if target.len() != draft.len() {
        return Err(PolicyError::DistributionLengths {
            target: target.len(),
            draft: draft.len(),
        });
    }
    check_distribution("target", target)?;
    check_distribution("draft", draft)
}

/// α = Σ_x min(p(x), q(x)): the probability that the rule accepts a token drawn from the
/// draft `q`, when the target's distribution is `p` (1 minus their total variation distance).
pub fn acceptance_rate(target: &[f64], draft: &[f64]) -> Result<f64, PolicyError> {
    check_pair(target, draft)?;
    Ok(target.iter().zip(draft).map(|(p, q)| p.min(*q)).sum())
}

/// E = (1 − α^(k+1)) / (1 − α): the expected tokens one verification of `k` drafted tokens
/// emits when each is accepted with probability `alpha` (k + 1 at α = 1).
pub fn expected_tokens_per_verify(alpha: f64, k: usize) -> Result<f64, PolicyError> {
    if k == 0 {
        return Err(PolicyError::NoDraftTokens);
    }
    if !(0.0..=1.0).contains(&alpha) {
        return Err(PolicyError::InvalidAcceptanceRate(alpha));
    }
    let k = k as f64;
    Ok(if alpha == 1.0 {
        k + 1.0
    } else {
        (1.0 - alpha.powf(k + 1.0)) / (1.0 - alpha)
    })
}

/// What the rule does with one drafted token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Accepted,
    /// Rejected; `token`, drawn from the residual, is emitted in its place.
    Rejected {
        token: u32,
    },
}

/// min(1, p(x) / q(x)), the probability of accepting `x`.
fn accept_probability(p: f64, q: f64) -> f64 {
    if p >= q {
        1.0
    } else {
        p / q
    }
}

/// max(0, p − q), unnormalised (the draw normalises it).
fn residual(target: &[f64], draft: &[f64]) -> Vec<f64> {
    target
        .iter()
        .zip(draft)
        .map(|(p, q)| (p - q).max(0.0))
        .collect()
}

/// A token drawn from non-negative `weights` as NumPy's `choice` does, without a draw when
/// only one token has weight.
fn draw(weights: &[f64], rng: &mut NumpyRng) -> u32 {
    let mut live = weights.iter().enumerate().filter(|(_, &w)| w > 0.0);
    match (live.next(), live.next()) {
        (Some((only, _)), None) => only as u32,
        _ => choice_index(weights.iter().copied(), rng.random()) as u32,
    }
}

/// The rule for one drafted token `drafted`, drawn from `draft`, against `target`.
pub fn verify(
    target: &[f64],
    draft: &[f64],
    drafted: u32,
    rng: &mut NumpyRng,
) -> Result<Verdict, PolicyError> {
    check_pair(target, draft)?;
    let x = drafted as usize;
    let (p, q) = match (target.get(x), draft.get(x)) {
        (Some(&p), Some(&q)) => (p, q),
        _ => {
            return Err(PolicyError::TokenOutOfRange {
                role: "drafted",
                id: drafted,
                vocab: target.len(),
            })
        }
    };
    if q == 0.0 {
        return Err(PolicyError::ImpossibleDraft { token: drafted });
    }
    let accept = accept_probability(p, q);
    let accepted = accept == 1.0 || (accept > 0.0 && rng.random() < accept);
    if accepted {
        return Ok(Verdict::Accepted);
    }
    // p(x) < q(x), so Σ max(0, p − q) = Σ max(0, q − p) ≥ q(x) − p(x) > 0.
    let token = draw(&residual(target, draft), rng);
    Ok(Verdict::Rejected { token })
}

/// One verification: `drafted[i]` was drawn from `drafts[i]`, and `targets[i]` is the target's
/// distribution at the same position; `targets` has one more, for the token after the last
/// drafted one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verified {
    /// How many drafted tokens were accepted, in order.
    pub accepted: usize,
    /// The token emitted after them: the residual's draw at the first rejection, or a draw
    /// from the last target distribution when every drafted token was accepted.
    pub next: u32,
}

impl Verified {
    /// The tokens this verification emits: the accepted drafts, then `next`.
    pub fn tokens(&self, drafted: &[u32]) -> Vec<u32> {
        let mut tokens = drafted[..self.accepted.min(drafted.len())].to_vec();
        tokens.push(self.next);
        tokens
    }
}

/// Verifies a block of drafted tokens, stopping at the first rejection.
pub fn verify_block(
    targets: &[Vec<f64>],
    drafts: &[Vec<f64>],
    drafted: &[u32],
    rng: &mut NumpyRng,
) -> Result<Verified, PolicyError> {
    if drafted.is_empty() {
        return Err(PolicyError::NoDraftTokens);
    }
    if drafts.len() != drafted.len() || targets.len() != drafted.len() + 1 {
        return Err(PolicyError::BlockShape {
            drafted: drafted.len(),
            drafts: drafts.len(),
            targets: targets.len(),
        });
    }
    for (i, ((target, draft), &x)) in targets.iter().zip(drafts).zip(drafted).enumerate() {
        if let Verdict::Rejected { token } = verify(target, draft, x, rng)? {
            return Ok(Verified {
                accepted: i,
                next: token,
            });
        }
    }
    let last = &targets[drafted.len()];
    check_distribution("target", last)?;
    let next = draw(last, rng);
    Ok(Verified {
        accepted: drafted.len(),
        next,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: [f64; 6] = [0.30, 0.05, 0.25, 0.0, 0.15, 0.25];
    const Q: [f64; 6] = [0.10, 0.40, 0.20, 0.10, 0.20, 0.0];

    /// The law of one step, summed exactly over the vocabulary from the rule's own parts:
    /// P(out = y) = q(y) · a(y) + Σ_x q(x) (1 − a(x)) · r(y) / Σ r, which must be p(y).
    #[test]
    fn one_step_emits_the_target_distribution_exactly() {
        let pairs = [(P, Q), (Q, P), (P, P), ([0.0, 0.0, 1.0, 0.0, 0.0, 0.0], Q)];
        for (p, q) in pairs {
            let r = residual(&p, &q);
            let r_total: f64 = r.iter().sum();
            let rejected: f64 = (0..6)
                .filter(|&x| q[x] > 0.0)
                .map(|x| q[x] * (1.0 - accept_probability(p[x], q[x])))
                .sum();
            for y in 0..6 {
                let kept = if q[y] > 0.0 {
                    q[y] * accept_probability(p[y], q[y])
                } else {
                    0.0
                };
                let replaced = if rejected > 0.0 {
                    rejected * r[y] / r_total
                } else {
                    0.0
                };
                assert!(
                    (kept + replaced - p[y]).abs() < 1e-15,
                    "p {p:?} q {q:?} y {y}"
                );
            }
        }
    }

    /// The same law by drawing: the draft token from q, then `verify`, 200,000 times. Each
    /// frequency is within 5 standard errors sqrt(p (1 − p) / n) of p (a false alarm about
    /// once in 1.7 million per token), and a token of p = 0 never appears.
    #[test]
    fn one_step_emits_the_target_distribution_by_count() {
        let n = 200_000;
        let mut rng = NumpyRng::new(13);
        let mut counts = [0usize; 6];
        let mut accepted = 0usize;
        for _ in 0..n {
            let x = choice_index(Q.iter().copied(), rng.random()) as u32;
            let out = match verify(&P, &Q, x, &mut rng).unwrap() {
                Verdict::Accepted => {
                    accepted += 1;
                    x
                }
                Verdict::Rejected { token } => token,
            };
            counts[out as usize] += 1;
        }
        for (y, &c) in counts.iter().enumerate() {
            let f = c as f64 / n as f64;
            let se = (P[y] * (1.0 - P[y]) / n as f64).sqrt();
            assert!(
                (f - P[y]).abs() <= 5.0 * se,
                "token {y}: {f} against {}",
                P[y]
            );
        }
        assert_eq!(counts[3], 0);
        let alpha = acceptance_rate(&P, &Q).unwrap();
        assert!(
            (alpha - 0.5).abs() < 1e-15,
            "0.1 + 0.05 + 0.2 + 0 + 0.15 + 0"
        );
        let f = accepted as f64 / n as f64;
        assert!((f - alpha).abs() <= 5.0 * (alpha * (1.0 - alpha) / n as f64).sqrt());
    }

    /// E against a direct simulation: k Bernoulli(α) acceptances, stop at the first
    /// rejection, one more token either way; 200,000 blocks, within 5 standard errors.
    #[test]
    fn expected_tokens_match_a_simulation() {
        let mut rng = NumpyRng::new(5);
        for (alpha, k) in [(0.3, 4), (0.6, 4), (0.9, 2), (0.75, 8)] {
            let n = 200_000;
            let emitted: Vec<f64> = (0..n)
                .map(|_| {
                    let run = (0..k).take_while(|_| rng.random() < alpha).count();
                    (run + 1) as f64
                })
                .collect();
            let mean = emitted.iter().sum::<f64>() / n as f64;
            let var = emitted.iter().map(|e| (e - mean).powi(2)).sum::<f64>() / n as f64;
            let e = expected_tokens_per_verify(alpha, k).unwrap();
            assert!(
                (mean - e).abs() <= 5.0 * (var / n as f64).sqrt(),
                "α {alpha}, k {k}: simulated {mean}, formula {e}"
            );
        }
        assert_eq!(expected_tokens_per_verify(1.0, 4).unwrap(), 5.0);
        assert_eq!(expected_tokens_per_verify(0.0, 4).unwrap(), 1.0);
        assert_eq!(
            expected_tokens_per_verify(0.5, 0).unwrap_err(),
            PolicyError::NoDraftTokens
        );
        assert_eq!(
            expected_tokens_per_verify(1.5, 4).unwrap_err(),
            PolicyError::InvalidAcceptanceRate(1.5)
        );
    }

    /// Greedy: one-hot distributions; accepted exactly when the argmaxes agree, else the
    /// target's argmax, and no draw is consumed to accept.
    #[test]
    fn greedy_accepts_when_the_argmaxes_agree() {
        let one_hot = |i: usize| {
            (0..6)
                .map(|j| f64::from(u8::from(i == j)))
                .collect::<Vec<_>>()
        };
        let mut rng = NumpyRng::new(1);
        let untouched = rng.clone();
        assert_eq!(
            verify(&one_hot(2), &one_hot(2), 2, &mut rng),
            Ok(Verdict::Accepted)
        );
        assert_eq!(
            verify(&one_hot(4), &one_hot(2), 2, &mut rng),
            Ok(Verdict::Rejected { token: 4 })
        );
        assert_eq!(acceptance_rate(&one_hot(4), &one_hot(2)), Ok(0.0));
        assert_eq!(acceptance_rate(&one_hot(4), &one_hot(4)), Ok(1.0));
        let targets = [one_hot(1), one_hot(2), one_hot(5), one_hot(0)];
        let drafts = [one_hot(1), one_hot(2), one_hot(3)];
        let verified = verify_block(&targets, &drafts, &[1, 2, 3], &mut rng).unwrap();
        assert_eq!(
            verified,
            Verified {
                accepted: 2,
                next: 5
            }
        );
        assert_eq!(verified.tokens(&[1, 2, 3]), [1, 2, 5]);
        let all = verify_block(&targets, &targets[..3], &[1, 2, 5], &mut rng).unwrap();
        assert_eq!(all.tokens(&[1, 2, 5]), [1, 2, 5, 0]);
        assert_eq!(rng, untouched, "greedy speculation draws nothing");
    }

    #[test]
    fn bad_input_names_the_value() {
        let mut rng = NumpyRng::new(0);
        assert_eq!(
            verify(&P, &Q, 5, &mut rng),
            Err(PolicyError::ImpossibleDraft { token: 5 })
        );
        assert_eq!(
            verify(&P, &Q, 9, &mut rng),
            Err(PolicyError::TokenOutOfRange {
                role: "drafted",
                id: 9,
                vocab: 6
            })
        );
        assert_eq!(
            acceptance_rate(&P, &Q[..5]),
            Err(PolicyError::DistributionLengths {
                target: 6,
                draft: 5
            })
        );
        assert!(matches!(
            acceptance_rate(&[0.5, 0.6], &[0.5, 0.5]),
            Err(PolicyError::DistributionSum { role: "target", .. })
        ));
        assert_eq!(
            acceptance_rate(&[0.5, 0.5], &[1.5, -0.5]),
            Err(PolicyError::InvalidProbability {
                role: "draft",
                index: 1,
                value: -0.5
            })
        );
        assert_eq!(
            verify_block(&[P.to_vec()], &[Q.to_vec()], &[0], &mut rng),
            Err(PolicyError::BlockShape {
                drafted: 1,
                drafts: 1,
                targets: 1
            })
        );
        assert_eq!(
            verify_block(&[P.to_vec()], &[], &[], &mut rng),
            Err(PolicyError::NoDraftTokens)
        );
    }
}
