//! The model's own distribution beside the policy's: the softmax of the logits at
//! temperature 1, before any constraint, filter or temperature. A step's record keeps the
//! chosen token's probability under it and its five most probable tokens, so that a greedy
//! step (probability 1 under the policy) still shows how sure the model was. This is what
//! Hugging Face returns as `output_logits` beside the processed `output_scores`.
//!
//! Three passes over the logits, O(V) with no sort: the maximum (by chunks, vectorised, as
//! top-k reads it), the normaliser Σ exp(l − max) in f64, and the five largest logits (a
//! token enters only when it beats the fifth, so the pass is a compare per logit).

use serde::{Deserialize, Serialize};

use crate::math;
use crate::pipeline::{max_logit, Logit, TokenProb};
use crate::PolicyError;

/// How many of the model's most probable tokens a step keeps.
pub const MODEL_TOP: usize = 5;

/// One step's view of the model's own distribution.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelView {
    /// The chosen token's probability under the model's softmax at temperature 1.
    pub prob: f64,
    /// Its natural logarithm, computed as `logit − logsumexp` (exact where `prob` underflows).
    pub logprob: f64,
    /// The model's [`MODEL_TOP`] most probable tokens, most probable first, ties to the
    /// lower id; `logit` is the raw logit.
    pub top: Vec<TokenProb>,
}

/// The model's own distribution at `token`, from the logits the model returned.
pub fn model_view<L: Logit>(logits: &[L], token: u32) -> Result<ModelView, PolicyError> {
    let vocab = logits.len();
    if vocab == 0 {
        return Err(PolicyError::EmptyVocabulary);
    }
    if token as usize >= vocab {
        return Err(PolicyError::TokenOutOfRange {
            role: "chosen",
            id: token,
            vocab,
        });
    }
    let max = max_logit(logits)?;
    let total = math::sum_exp(logits, L::to_f64, max, 1.0);
    let logsumexp = max + math::ln(total);

    // The largest logits, largest first; a later id enters only when strictly larger, so
    // ties keep the lower id.
    let mut best: Vec<(f64, u32)> = Vec::with_capacity(MODEL_TOP + 1);
    for (id, l) in logits.iter().enumerate() {
        let l = l.to_f64();
        if best.len() == MODEL_TOP && best[MODEL_TOP - 1].0 >= l {
            continue;
        }
        let at = best.partition_point(|b| b.0 >= l);
        best.insert(at, (l, id as u32));
        best.truncate(MODEL_TOP);
    }
    let logprob = logits[token as usize].to_f64() - logsumexp;
    Ok(ModelView {
        prob: math::exp(logprob),
        logprob,
        top: best
            .into_iter()
            .map(|(logit, id)| TokenProb {
                id,
                logit,
                prob: math::exp(logit - logsumexp),
            })
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// softmax([3, 2, 1]) by hand: e^k / (e^3 + e^2 + e^1).
    #[test]
    fn the_view_is_the_softmax_at_temperature_one() {
        let view = model_view(&[1.0f32, 3.0, 2.0], 0).unwrap();
        let z = 1f64.exp() + 3f64.exp() + 2f64.exp();
        assert!((view.prob - 1f64.exp() / z).abs() < 1e-15);
        assert!((view.logprob - (1.0 - z.ln())).abs() < 1e-15);
        let ids: Vec<u32> = view.top.iter().map(|t| t.id).collect();
        assert_eq!(ids, [1, 2, 0]);
        assert!((view.top[0].prob - 3f64.exp() / z).abs() < 1e-15);
        assert_eq!(view.top[1].logit, 2.0);
    }

    #[test]
    fn ties_keep_the_lower_id_and_only_five_are_kept() {
        let logits = [0.5f32, 2.0, 2.0, 1.0, 2.0, 2.0, 2.0, 2.0];
        let view = model_view(&logits, 7).unwrap();
        let ids: Vec<u32> = view.top.iter().map(|t| t.id).collect();
        assert_eq!(ids, [1, 2, 4, 5, 6]);
    }

    #[test]
    fn a_far_token_keeps_its_log_probability_when_its_probability_underflows() {
        let view = model_view(&[0.0f32, -2000.0], 1).unwrap();
        assert_eq!(view.prob, 0.0);
        assert_eq!(view.logprob, -2000.0);
    }

    #[test]
    fn bad_logits_and_tokens_are_named() {
        let err = model_view(&[0.0f32, f32::NAN], 0).unwrap_err();
        assert!(
            matches!(err, PolicyError::NonFiniteLogit { index: 1, .. }),
            "{err}"
        );
        let err = model_view(&[0.0f32; 3], 3).unwrap_err();
        assert!(err.to_string().contains('3'), "{err}");
        assert!(model_view::<f32>(&[], 0).is_err());
    }
}
