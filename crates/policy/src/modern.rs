//! The modern samplers: locally typical sampling, ε- and η-cutoff, top-nσ and XTC, each a
//! stage of a [`chain`](crate::chain) that marks which candidates it keeps.
//!
//! The rules follow the peers' code, quoted in `docs/modern-samplers.md`: Hugging Face
//! `generation/logits_process.py` (`TypicalLogitsWarper`, `EpsilonLogitsWarper`,
//! `EtaLogitsWarper`) at 00857b6c, and llama.cpp `src/llama-sampling.cpp`
//! (`llama_sampler_typical_apply`, `llama_sampler_top_n_sigma_apply`,
//! `llama_sample_xtc_apply`) at c392e509. Where the two differ (typical), the lab follows
//! Hugging Face, whose rule keeps ties, and the llama.cpp engine follows llama.cpp.
//!
//! Each takes the candidates (unscaled logit, id) in ascending id order, their
//! probabilities under the temperature in force (`probs`, summing to 1) and returns one
//! mark per candidate. None renormalises: the step renormalises the survivors, as the
//! engines' final softmax does.

use crate::Engine;

/// Shannon entropy of `probs`, in nats (0 · ln 0 counts as 0).
fn entropy(probs: &[f64]) -> f64 {
    0.0 - probs
        .iter()
        .filter(|&&p| p > 0.0)
        .map(|&p| p * p.ln())
        .sum::<f64>()
}

/// Candidate indices ordered by `key` ascending, ties to the lower id (candidates are in id
/// order, and the sort is stable).
fn ascending_by(key: &[f64]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..key.len()).collect();
    order.sort_by(|&a, &b| key[a].total_cmp(&key[b]));
    order
}

/// Locally typical sampling (Meister et al. 2023). Each token's shifted score is
/// |−ln p − H|; tokens are taken in ascending score until their mass reaches `mass`.
///
/// - Lab and Hugging Face: the cut is the first position whose cumulative mass is not below
///   `mass` (`last_ind = (cumulative_probs < mass).sum()`), and every token whose score is
///   not above the cut's score is kept, ties included.
/// - llama.cpp: the prefix up to the first position whose cumulative mass is strictly above
///   `p` (`cum_sum > ctx->p`), with no tie kept past it.
pub(crate) fn typical(engine: Engine, probs: &[f64], mass: f64) -> Vec<bool> {
    let h = entropy(probs);
    let scores: Vec<f64> = probs.iter().map(|&p| (-p.ln() - h).abs()).collect();
    let order = ascending_by(&scores);
    let mut keep = vec![false; probs.len()];
    let mut cum = 0.0;
    match engine {
        Engine::LlamaCpp => {
            for &i in &order {
                keep[i] = true;
                cum += probs[i];
                if cum > mass {
                    break;
                }
            }
        }
        _ => {
            let mut last = 0;
            for &i in &order {
                cum += probs[i];
                if cum < mass {
                    last += 1;
                }
            }
            let cut = scores[order[last.min(order.len() - 1)]];
            for (k, &s) in keep.iter_mut().zip(&scores) {
                *k = s <= cut;
            }
        }
    }
    keep
}

/// ε-cutoff (Hewitt et al. 2022; `EpsilonLogitsWarper`): keep tokens with probability at
/// least ε (`probabilities < epsilon` is removed), and always the most probable.
pub(crate) fn epsilon(probs: &[f64], epsilon: f64) -> Vec<bool> {
    cutoff(probs, epsilon)
}

/// η-cutoff (Hewitt et al. 2022; `EtaLogitsWarper`): ε-cutoff at η = min(ε, √ε · e^−H), as
/// the code computes it (its docstring's √(ε · e^−H) is not what it does).
pub(crate) fn eta(probs: &[f64], epsilon: f64) -> Vec<bool> {
    let eta = epsilon.min(epsilon.sqrt() * (-entropy(probs)).exp());
    cutoff(probs, eta)
}

fn cutoff(probs: &[f64], threshold: f64) -> Vec<bool> {
    let max = probs.iter().copied().fold(0.0, f64::max);
    probs.iter().map(|&p| p >= threshold || p == max).collect()
}

/// Top-nσ (Tang et al. 2024; `llama_sampler_top_n_sigma_apply`): on the logits at the
/// temperature in force, keep every token within n population standard deviations of the
/// largest (`logit < max - n * std` is removed).
pub(crate) fn top_n_sigma(logits: &[f64], n: f64) -> Vec<bool> {
    let count = logits.len() as f64;
    let max = logits.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mean = logits.iter().sum::<f64>() / count;
    let var = logits.iter().map(|l| (l - mean) * (l - mean)).sum::<f64>() / count;
    let floor = max - n * var.sqrt();
    logits.iter().map(|&l| l >= floor).collect()
}

/// XTC, "exclude top choices" (`llama_sample_xtc_apply`): with probability `probability`
/// (the uniform `chance` at most it), every token at least as probable as `threshold` is
/// removed except the least probable of them; nothing changes when fewer than two reach
/// the threshold. Ties in probability are ordered by id, lower first, as the engine's own
/// sort leaves them unspecified.
pub(crate) fn xtc(probs: &[f64], probability: f64, threshold: f64, chance: f64) -> Vec<bool> {
    let mut keep = vec![true; probs.len()];
    if chance > probability {
        return keep;
    }
    let mut order: Vec<usize> = (0..probs.len()).collect();
    order.sort_by(|&a, &b| probs[b].total_cmp(&probs[a]));
    let above = order.iter().take_while(|&&i| probs[i] >= threshold).count();
    if above >= 2 {
        for &i in &order[..above - 1] {
            keep[i] = false;
        }
    }
    keep
}

/// Whether XTC can fire at all, so draws a uniform: llama.cpp returns before the draw when
/// the probability is 0, the threshold above 0.5 (two tokens cannot both reach it) or
/// fewer than two candidates are left.
pub(crate) fn xtc_draws(probability: f64, threshold: f64, candidates: usize) -> bool {
    probability > 0.0 && threshold <= 0.5 && candidates >= 2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typical_keeps_ties_in_the_lab_and_cuts_them_in_llama_cpp() {
        // p = [0.4, 0.2, 0.2, 0.2]: H = 1.278; the 0.2s score 0.331, the 0.4 score 0.362.
        let probs = [0.4, 0.2, 0.2, 0.2];
        assert_eq!(typical(Engine::Lab, &probs, 0.5), [false, true, true, true]);
        // llama.cpp: 0.2 + 0.2 = 0.4, then 0.6 > 0.5 stops at the third.
        assert_eq!(
            typical(Engine::LlamaCpp, &probs, 0.5),
            [false, true, true, true]
        );
        assert_eq!(
            typical(Engine::LlamaCpp, &probs, 0.3),
            [false, true, true, false]
        );
        assert_eq!(typical(Engine::Lab, &probs, 0.3), [false, true, true, true]);
    }

    #[test]
    fn xtc_removes_all_top_choices_but_the_least_probable() {
        let probs = [0.1, 0.4, 0.3, 0.2];
        assert_eq!(xtc(&probs, 1.0, 0.15, 0.5), [true, false, false, true]);
        // Did not fire.
        assert_eq!(xtc(&probs, 0.4, 0.15, 0.5), [true; 4]);
        // One token at the threshold: nothing to exclude.
        assert_eq!(xtc(&probs, 1.0, 0.35, 0.0), [true; 4]);
        assert!(!xtc_draws(0.5, 0.6, 4) && !xtc_draws(0.0, 0.1, 4) && !xtc_draws(0.5, 0.1, 1));
    }

    #[test]
    fn top_n_sigma_is_relative_to_the_population_deviation() {
        // Logits 0..4: mean 1.5, σ = √1.25 = 1.118; n = 1 keeps logits ≥ 1.882.
        assert_eq!(
            top_n_sigma(&[0.0, 1.0, 2.0, 3.0], 1.0),
            [false, false, true, true]
        );
    }
}
