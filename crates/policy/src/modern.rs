//! The modern samplers: locally typical sampling, ε- and η-cutoff, top-nσ, top-H and XTC,
//! each a stage of a [`chain`](crate::chain) that marks which candidates it keeps; DRY,
//! which lowers the logits of tokens that would extend a repetition; and dynamic
//! temperature, which sets the temperature stage's value from the candidates' entropy.
//!
//! The rules follow the peers' code, quoted in `docs/modern-samplers.md`: Hugging Face
//! `generation/logits_process.py` (`TypicalLogitsWarper`, `EpsilonLogitsWarper`,
//! `EtaLogitsWarper`; `TopHLogitsWarper` is quoted in `docs/engine-semantics.md` §2.2) at
//! 00857b6c, and llama.cpp `src/llama-sampling.cpp`
//! (`llama_sampler_typical_apply`, `llama_sampler_top_n_sigma_apply`,
//! `llama_sample_xtc_apply`, `llama_sampler_dry_apply`) at c392e509. Where the two differ (typical), the lab follows
//! Hugging Face, whose rule keeps ties, and the llama.cpp engine follows llama.cpp.
//!
//! Each takes the candidates (unscaled logit, id) in ascending id order, their
//! probabilities under the temperature in force (`probs`, summing to 1) and returns one
//! mark per candidate. None renormalises: the step renormalises the survivors, as the
//! engines' final softmax does.

use crate::math;
use crate::Engine;

/// Shannon entropy of `probs`, in nats (0 · ln 0 counts as 0).
fn entropy(probs: &[f64]) -> f64 {
    0.0 - probs
        .iter()
        .filter(|&&p| p > 0.0)
        .map(|&p| p * math::ln(p))
        .sum::<f64>()
}

/// Candidate indices ordered by `key` ascending, ties to the lower id (candidates are in id
/// order, and the sort is stable).
fn ascending_by(key: &[f64]) -> Vec<usize> {
    let negated: Vec<f64> = key.iter().map(|k| -k).collect();
    crate::pipeline::descending(&negated)
}

/// Each token's shifted score |−ln p − H|: how far its surprise is from the entropy; lower
/// is more typical.
pub(crate) fn typical_scores(probs: &[f64]) -> Vec<f64> {
    let h = entropy(probs);
    probs.iter().map(|&p| (-math::ln(p) - h).abs()).collect()
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
    let scores = typical_scores(probs);
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
    let eta = epsilon.min(epsilon.sqrt() * math::exp(-entropy(probs)));
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

/// How many of the most probable tokens Top-H weighs at most (`TopHLogitsWarper.top_n`).
pub const TOP_H_CANDIDATES: usize = 100;

/// Top-H (Potraghloo et al., NeurIPS 2025; Hugging Face's `TopHLogitsWarper` at 00857b6c):
/// on the logits at the temperature in force, the [`TOP_H_CANDIDATES`] most probable are
/// renormalised among themselves; in descending order, each is kept while the running sum
/// of their entropy terms −p ln p is at most `top_h` times their entropy, and the most
/// probable always. Every token past the hundred is removed. The cumulative sum only
/// grows, so what is kept is a prefix; a term at p = 0 (a weight that underflows) is NaN
/// in torch, which no comparison keeps, so the prefix stops there. Ties in logit are
/// ordered by id, lower first (torch's `topk` leaves their order unspecified).
pub(crate) fn top_h(logits: &[f64], top_h: f64) -> Vec<bool> {
    let order = crate::pipeline::descending(logits);
    let top = &order[..order.len().min(TOP_H_CANDIDATES)];
    let mut keep = vec![false; logits.len()];
    let Some(&first) = top.first() else {
        return keep;
    };
    let max = logits[first];
    let weights: Vec<f64> = top.iter().map(|&i| math::exp(logits[i] - max)).collect();
    let total = math::sum(&weights);
    let probs: Vec<f64> = weights.iter().map(|w| w / total).collect();
    let tau = entropy(&probs) * top_h;
    let mut cumulative = 0.0;
    for (&i, &p) in top.iter().zip(&probs) {
        if p == 0.0 {
            break;
        }
        cumulative += -p * math::ln(p);
        keep[i] = cumulative <= tau;
    }
    keep[first] = true;
    keep
}

/// Dynamic temperature (llama.cpp's `llama_sampler_temp_ext_apply` at e19fb5f1, the
/// temperature sampler `common_sampler_init` builds from `--temp`, `--dynatemp-range` and
/// `--dynatemp-exp`): over the candidates' probabilities `probs` (at temperature 1), the
/// temperature is min + (max − min) · (H / ln N)^exponent with min = max(0, T − range) and
/// max = T + range, H their entropy and N the `size` of the array they are in (llama.cpp
/// counts the masked tokens its array still holds at probability 0). `None` where
/// llama.cpp leaves the candidates untouched: a range of at most 0 (the plain temperature
/// runs instead) or an array of at most one token. x^y is e^(y ln x), through the lab's
/// own `exp` and `ln`, so that a replay is bit for bit the same on every machine; 0^y is
/// C's `powf`'s: 0 for y > 0, 1 for y = 0, infinity below.
pub(crate) fn dynamic_temperature(
    probs: &[f64],
    size: usize,
    temperature: f64,
    range: f64,
    exponent: f64,
) -> Option<f64> {
    if range.is_nan() || range <= 0.0 || size <= 1 {
        return None;
    }
    let low = (temperature - range).max(0.0);
    let high = temperature + range;
    let normalised = entropy(probs) / math::ln(size as f64);
    let power = if normalised > 0.0 {
        math::exp(exponent * math::ln(normalised))
    } else if exponent > 0.0 {
        0.0
    } else if exponent == 0.0 {
        1.0
    } else {
        f64::INFINITY
    };
    Some(low + (high - low) * power)
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
    // One pass, no sort: the tokens at or above the threshold, and the one of them the
    // descending order puts last (the least probable, the highest index among ties).
    let mut above = 0;
    let mut last = 0;
    for (i, &p) in probs.iter().enumerate() {
        if p >= threshold {
            if above == 0 || p.total_cmp(&probs[last]).is_le() {
                last = i;
            }
            above += 1;
        }
    }
    if above >= 2 {
        for (i, (k, &p)) in keep.iter_mut().zip(probs).enumerate() {
            *k = p < threshold || i == last;
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

/// Mirostat 2.0's truncation (Basu et al. 2021; `llama_sampler_mirostat_v2_apply`): in
/// descending probability, the tokens before the first whose surprise −log₂ p exceeds μ,
/// and at least the most probable. The step then renormalises and draws, and μ moves by
/// −η · (the chosen token's surprise under the renormalised distribution − τ). Ties in
/// probability are ordered by id, lower first.
pub(crate) fn mirostat_v2(probs: &[f64], mu: f64) -> Vec<bool> {
    // Surprise grows as probability falls, so the descending prefix before the first
    // surprise above μ is every token whose surprise is at most μ: one pass, no sort.
    let mut keep: Vec<bool> = probs.iter().map(|&p| -math::log2(p) <= mu).collect();
    if !keep.contains(&true) {
        // At least the first of the descending order: the most probable, lowest index.
        let mut best = 0;
        for (i, &p) in probs.iter().enumerate() {
            if p.total_cmp(&probs[best]).is_gt() {
                best = i;
            }
        }
        if let Some(k) = keep.get_mut(best) {
            *k = true;
        }
    }
    keep
}

/// DRY, "don't repeat yourself" (`llama_sampler_dry_apply`, ported by llama.cpp from
/// koboldcpp PR 982): the penalty for each token that would extend a repetition of the
/// context's own suffix, as (token, amount to subtract from its logit), in no set order.
///
/// `window` is the last `dry_penalty_last_n` tokens of prompt and output, oldest first.
/// A repeat shorter than `allowed` is free; a longer one costs `multiplier ·
/// base^(length − allowed)`, the exponent capped so that the power stays within a float
/// (`FLOAT_MAX_LOG / ln base`). A sequence breaker (a token-id sequence) limits how far back
/// a repeat may reach (the tokens after its latest occurrence), and a token that is a
/// breaker by itself is never penalised. The repeat lengths are the capped reverse
/// Z-array of llama.cpp's step 2, computed here by its definition.
pub(crate) fn dry(
    window: &[u32],
    multiplier: f64,
    base: f64,
    allowed: usize,
    breakers: &[Vec<u32>],
) -> Vec<(u32, f64)> {
    let n = window.len();
    if multiplier == 0.0 || base < 1.0 || n <= allowed {
        return Vec::new();
    }
    // rat(i): the i-th most recent token.
    let rat = |i: usize| window[n - 1 - i];

    // Step 1: the latest breaker limits the repeat length.
    let mut rep_limit = n;
    for i in 0..n {
        let mut longest = None;
        for breaker in breakers.iter().filter(|b| b[0] == rat(i)) {
            let tail = &breaker[1..];
            if longest.is_none_or(|l| tail.len() > l)
                && tail.len() <= i
                && (0..tail.len()).all(|o| tail[o] == rat(i - o - 1))
            {
                longest = Some(tail.len());
            }
        }
        if let Some(longest) = longest {
            rep_limit = i - longest;
            break;
        }
    }
    if rep_limit < allowed {
        return Vec::new();
    }

    // Step 2: repeat[last - k] is how far the context's suffix recurs ending k tokens back.
    let last = n - 1;
    let mut repeat = vec![0; n];
    for k in 1..n {
        let mut m = 0;
        while m + k < n && rat(m) == rat(m + k) {
            m += 1;
        }
        repeat[last - k] = m.min(rep_limit);
    }

    // Step 3: the token after each long enough repeat would extend it.
    let mut longest: Vec<(u32, usize)> = Vec::new();
    for (i, &length) in repeat.iter().enumerate().take(n - 1) {
        if length >= allowed {
            let token = rat(n - 2 - i);
            match longest.iter_mut().find(|(t, _)| *t == token) {
                Some(entry) => entry.1 = entry.1.max(length),
                None => longest.push((token, length)),
            }
        }
    }

    // Step 4: the penalty, unless the token is a breaker by itself.
    const FLOAT_MAX_LOG: f64 = 88.722_839_1;
    let max_exponent = if base > 1.000_001 {
        (FLOAT_MAX_LOG / math::ln(base)) as usize
    } else {
        0
    };
    longest
        .into_iter()
        .filter(|(token, _)| !breakers.iter().any(|b| b.len() == 1 && b[0] == *token))
        .map(|(token, length)| {
            let mut exponent = length - allowed;
            if max_exponent > 0 && exponent > max_exponent {
                exponent = max_exponent;
            }
            (token, multiplier * base.powi(exponent as i32))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// XTC and mirostat by their definitions, over the descending order (the sort the
    /// one-pass versions do without).
    fn xtc_sorted(probs: &[f64], threshold: f64) -> Vec<bool> {
        let mut keep = vec![true; probs.len()];
        let order = crate::pipeline::descending(probs);
        let above = order.iter().take_while(|&&i| probs[i] >= threshold).count();
        if above >= 2 {
            for &i in &order[..above - 1] {
                keep[i] = false;
            }
        }
        keep
    }

    fn mirostat_sorted(probs: &[f64], mu: f64) -> Vec<bool> {
        let order = crate::pipeline::descending(probs);
        let kept = order
            .iter()
            .position(|&i| -math::log2(probs[i]) > mu)
            .unwrap_or(order.len())
            .max(1);
        let mut keep = vec![false; probs.len()];
        for &i in &order[..kept] {
            keep[i] = true;
        }
        keep
    }

    proptest! {
        /// Probabilities from a few levels, so that ties are common.
        #[test]
        fn the_one_pass_cuts_equal_their_sorted_definitions(
            levels in proptest::collection::vec(0u8..6, 1..40),
            threshold in 0.0f64..0.5,
            mu in 0.0f64..8.0,
        ) {
            let weights: Vec<f64> = levels.iter().map(|&l| f64::from(l) + 0.5).collect();
            let total: f64 = weights.iter().sum();
            let probs: Vec<f64> = weights.iter().map(|w| w / total).collect();
            prop_assert_eq!(xtc(&probs, 1.0, threshold, 0.0), xtc_sorted(&probs, threshold));
            prop_assert_eq!(mirostat_v2(&probs, mu), mirostat_sorted(&probs, mu));
        }
    }

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
    fn dry_follows_the_source_example() {
        // llama.cpp's comment: last tokens a b c c b c y a b c give repeat counts
        // 0 0 3 1 0 2 0 0 0 0, so c would extend a b c (3), b would extend c (1, under the
        // allowed 2) and y would extend b c (2).
        let (a, b, c, y) = (0, 1, 2, 3);
        let window = [a, b, c, c, b, c, y, a, b, c];
        let mut got = dry(&window, 1.0, 2.0, 2, &[]);
        got.sort_by_key(|&(token, _)| token);
        assert_eq!(got, [(c, 2.0), (y, 1.0)]);
        // A breaker at y limits repeats to the three tokens after it: a b c recurs, 3 long.
        assert_eq!(dry(&window, 1.0, 2.0, 2, &[vec![y]]), [(c, 2.0)]);
        // c as a single-token breaker is never penalised, and it limits repeats to 0.
        assert_eq!(dry(&window, 1.0, 2.0, 2, &[vec![c]]), []);
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
