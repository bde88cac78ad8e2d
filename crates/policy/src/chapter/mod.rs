//! The chapter's `decode.py`, reproduced exactly: `choose(logits, temperature, top_k, seed)`.
//!
//! ```python
//! scaled = np.asarray(logits) / temperature
//! keep = np.argpartition(scaled, -top_k)[-top_k:]
//! kept = scaled[keep]
//! probs = np.exp(kept - kept.max())
//! probs /= probs.sum()
//! rng = np.random.default_rng(seed)
//! return int(rng.choice(keep, p=probs)), probs
//! ```
//!
//! Parity means the same token, the same kept indices *in the order `argpartition` leaves
//! them*, and the same probabilities. So this module ports NumPy's own selection code and
//! its pairwise summation instead of using our own. NumPy has more than one argpartition:
//! its portable introselect (`npysort/selection.cpp`), and x86-simd-sort on x86-64 CPUs with
//! AVX2; they keep the same indices in different orders, so a seed can pick a different
//! token. [`Argpartition`] names the path; the chapter's printed output came from an x86 CPU.
//!
//! ```
//! use policy::chapter::{choose, Argpartition};
//!
//! let choice = choose(&[1.2, 0.1, 2.4, 1.7], 0.7, 3, 7, Argpartition::X86Avx2).unwrap();
//! assert_eq!(choice.kept, [0, 3, 2]);
//! assert_eq!(choice.to_string(), "2 [0.116 0.238 0.646]");
//!
//! // NumPy on an ARM laptop keeps the same three tokens in another order.
//! let choice = choose(&[1.2, 0.1, 2.4, 1.7], 0.7, 3, 7, Argpartition::Portable).unwrap();
//! assert_eq!(choice.kept, [0, 2, 3]);
//! assert_eq!(choice.to_string(), "2 [0.116 0.646 0.238]");
//! ```

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::rng::{choice_index, NumpyRng};
use crate::PolicyError;

mod x86_avx2;

/// Which of NumPy's `argpartition` implementations to reproduce. They agree on which
/// indices are kept but not on their order, and the order decides which token a draw picks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Argpartition {
    /// x86-simd-sort's AVX2 argselect, which NumPy uses on x86-64 CPUs with AVX2 (pinned
    /// with `NPY_DISABLE_CPU_FEATURES` set to the AVX-512 family). The chapter's printed
    /// output comes from this path, so it is the default.
    #[serde(rename = "x86-avx2")]
    #[default]
    X86Avx2,
    /// NumPy's portable introselect: CPUs without AVX2 (ARM, older x86) or
    /// `NPY_DISABLE_CPU_FEATURES` set to every dispatch target.
    #[serde(rename = "portable")]
    Portable,
}

impl Argpartition {
    /// The name used on the command line, in URLs and in fixture files.
    pub fn name(self) -> &'static str {
        match self {
            Argpartition::X86Avx2 => "x86-avx2",
            Argpartition::Portable => "portable",
        }
    }
}

/// What `choose()` returns, plus the uniform draw that picked the token.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChapterChoice {
    pub token: usize,
    /// Indices kept by top-k, in `np.argpartition` order.
    pub kept: Vec<usize>,
    /// Probabilities of `kept`, in the same order.
    pub probs: Vec<f64>,
    pub draw: f64,
}

/// `choose(logits, temperature, top_k, seed)` from the chapter, computed in f64 as NumPy does.
pub fn choose(
    logits: &[f64],
    temperature: f64,
    top_k: usize,
    seed: u64,
    path: Argpartition,
) -> Result<ChapterChoice, PolicyError> {
    if logits.is_empty() {
        return Err(PolicyError::EmptyVocabulary);
    }
    if let Some((index, &value)) = logits.iter().enumerate().find(|(_, v)| !v.is_finite()) {
        return Err(PolicyError::NonFiniteLogit { index, value });
    }
    // The chapter divides by the temperature: 0 would divide by zero, so it is refused here
    // (the general pipeline treats 0 as greedy).
    if !(temperature > 0.0 && temperature.is_finite()) {
        return Err(PolicyError::ChapterTemperature(temperature));
    }
    if top_k == 0 || top_k > logits.len() {
        return Err(PolicyError::InvalidTopK {
            top_k,
            vocab: logits.len(),
        });
    }
    let scaled: Vec<f64> = logits.iter().map(|&l| l / temperature).collect();
    // NumPy would carry the infinity into NaN probabilities and refuse them in choice().
    if let Some((index, &value)) = scaled.iter().enumerate().find(|(_, v)| !v.is_finite()) {
        return Err(PolicyError::TemperatureOverflow {
            temperature,
            index,
            logit: logits[index],
            value,
        });
    }
    let kth = scaled.len() - top_k;
    let order = match path {
        Argpartition::X86Avx2 => x86_avx2::argpartition_x86_avx2(&scaled, kth),
        Argpartition::Portable => {
            let mut order: Vec<usize> = (0..scaled.len()).collect();
            arg_introselect(&scaled, &mut order, kth);
            order
        }
    };
    let kept = order[order.len() - top_k..].to_vec();
    let kept_scaled: Vec<f64> = kept.iter().map(|&i| scaled[i]).collect();
    let max = kept_scaled
        .iter()
        .copied()
        .fold(f64::NEG_INFINITY, f64::max);
    let mut probs: Vec<f64> = kept_scaled.iter().map(|&s| (s - max).exp()).collect();
    let total = pairwise_sum(&probs);
    probs.iter_mut().for_each(|p| *p /= total);
    let draw = NumpyRng::new(seed).random();
    let token = kept[choice_index(probs.iter().copied(), draw)];
    Ok(ChapterChoice {
        token,
        kept,
        probs,
        draw,
    })
}

/// Prints like the chapter's `print(token, local_probs.round(3))`.
impl fmt::Display for ChapterChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rounded: Vec<f64> = self.probs.iter().map(|&p| round_decimals(p, 3)).collect();
        write!(f, "{} {}", self.token, format_numpy_array(&rounded))
    }
}

/// `np.round(x, decimals)`: scale, round half to even, unscale.
pub fn round_decimals(x: f64, decimals: i32) -> f64 {
    let scale = 10f64.powi(decimals);
    (x * scale).round_ties_even() / scale
}

/// NumPy's pairwise summation of float64 (`pairwise_sum_DOUBLE`), which `ndarray.sum` uses.
pub fn pairwise_sum(values: &[f64]) -> f64 {
    const BLOCK: usize = 128;
    let n = values.len();
    if n < 8 {
        values.iter().fold(-0.0, |acc, &v| acc + v)
    } else if n <= BLOCK {
        let mut r = [0.0f64; 8];
        r.copy_from_slice(&values[..8]);
        let unrolled = n - n % 8;
        for chunk in values[8..unrolled].chunks_exact(8) {
            for (acc, &v) in r.iter_mut().zip(chunk) {
                *acc += v;
            }
        }
        let mut res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for &v in &values[unrolled..] {
            res += v;
        }
        res
    } else {
        let mut half = n / 2;
        half -= half % 8;
        pairwise_sum(&values[..half]) + pairwise_sum(&values[half..])
    }
}

/// `np.argpartition` for one `kth` on float64: NumPy's introselect, arg variant.
///
/// `order` holds indices into `v`; after the call `order[kth]` indexes the kth smallest
/// value, with smaller-or-equal values before it and larger-or-equal after, arranged
/// exactly as NumPy's portable (non-SIMD) path leaves them.
pub fn arg_introselect(v: &[f64], order: &mut [usize], kth: usize) {
    let num = order.len();
    let mut low = 0usize;
    let mut high = num - 1;
    if kth - low < 3 {
        dumb_select(v, &mut order[low..=high], kth - low);
        return;
    }
    if kth == num - 1 {
        // NumPy's NaN-check shortcut: the last maximum moves to the end.
        let mut max_index = low;
        let mut max_value = v[order[low]];
        for k in low + 1..num {
            if v[order[k]] >= max_value {
                max_index = k;
                max_value = v[order[k]];
            }
        }
        order.swap(kth, max_index);
        return;
    }
    let mut depth_limit = 2 * most_significant_bit(num) as i64;
    while low + 1 < high {
        let mut ll = low + 1;
        let mut hh = high;
        if depth_limit > 0 || hh - ll < 5 {
            let mid = low + (high - low) / 2;
            median3_swap(v, order, low, mid, high);
        } else {
            let mid = ll + median_of_median5(v, &mut order[ll..hh]);
            order.swap(mid, low);
            ll -= 1;
            hh += 1;
        }
        depth_limit -= 1;
        // Unguarded partition around the pivot now at `low`; the values are finite, so
        // `>=` is NumPy's `!less`.
        let pivot = v[order[low]];
        loop {
            loop {
                ll += 1;
                if v[order[ll]] >= pivot {
                    break;
                }
            }
            loop {
                hh -= 1;
                if pivot >= v[order[hh]] {
                    break;
                }
            }
            if hh < ll {
                break;
            }
            order.swap(ll, hh);
        }
        order.swap(low, hh);
        if hh >= kth {
            high = hh - 1;
        }
        if hh <= kth {
            low = ll;
        }
    }
    if high == low + 1 && v[order[high]] < v[order[low]] {
        order.swap(high, low);
    }
}

fn most_significant_bit(n: usize) -> u32 {
    usize::BITS - 1 - n.leading_zeros()
}

fn dumb_select(v: &[f64], order: &mut [usize], kth: usize) {
    for i in 0..=kth {
        let mut min_index = i;
        let mut min_value = v[order[i]];
        for k in i + 1..order.len() {
            if v[order[k]] < min_value {
                min_index = k;
                min_value = v[order[k]];
            }
        }
        order.swap(i, min_index);
    }
}

fn median3_swap(v: &[f64], order: &mut [usize], low: usize, mid: usize, high: usize) {
    if v[order[high]] < v[order[mid]] {
        order.swap(high, mid);
    }
    if v[order[high]] < v[order[low]] {
        order.swap(high, low);
    }
    if v[order[low]] < v[order[mid]] {
        order.swap(low, mid);
    }
    order.swap(mid, low + 1);
}

fn median5(v: &[f64], o: &mut [usize]) -> usize {
    let less = |o: &[usize], a: usize, b: usize| v[o[a]] < v[o[b]];
    if less(o, 1, 0) {
        o.swap(1, 0);
    }
    if less(o, 4, 3) {
        o.swap(4, 3);
    }
    if less(o, 3, 0) {
        o.swap(3, 0);
    }
    if less(o, 4, 1) {
        o.swap(4, 1);
    }
    if less(o, 2, 1) {
        o.swap(2, 1);
    }
    if less(o, 3, 2) {
        if less(o, 3, 1) {
            1
        } else {
            3
        }
    } else {
        2
    }
}

fn median_of_median5(v: &[f64], order: &mut [usize]) -> usize {
    let nmed = order.len() / 5;
    for i in 0..nmed {
        let sub = 5 * i;
        let m = median5(v, &mut order[sub..sub + 5]);
        order.swap(sub + m, i);
    }
    if nmed > 2 {
        arg_introselect(v, &mut order[..nmed], nmed / 2);
    }
    nmed / 2
}

/// `str(ndarray)` for a 1-D float64 array whose values need no exponent (NumPy's default
/// print options: 'maxprec' float mode, line width 75, summarised above 1000 elements).
pub fn format_numpy_array(values: &[f64]) -> String {
    const LINE_WIDTH: usize = 75;
    const THRESHOLD: usize = 1000;
    const EDGE_ITEMS: usize = 3;
    let summarise = values.len() > THRESHOLD;
    let shown: Vec<f64> = if summarise {
        values[..EDGE_ITEMS]
            .iter()
            .chain(&values[values.len() - EDGE_ITEMS..])
            .copied()
            .collect()
    } else {
        values.to_vec()
    };
    let parts: Vec<(String, String)> = shown
        .iter()
        .map(|&x| {
            let text = format!("{x}");
            match text.split_once('.') {
                Some((int, frac)) => (int.to_string(), frac.to_string()),
                None => (text, String::new()),
            }
        })
        .collect();
    let pad_left = parts.iter().map(|(i, _)| i.len()).max().unwrap_or(0);
    let pad_right = parts.iter().map(|(_, f)| f.len()).max().unwrap_or(0);
    let words: Vec<String> = parts
        .iter()
        .map(|(int, frac)| format!("{int:>pad_left$}.{frac:<pad_right$}"))
        .collect();

    // `_formatArray` for one axis: the hanging indent is one space, elements wrap at 74.
    let elem_width = LINE_WIDTH - 1;
    let mut out = String::new();
    let mut line = String::from(" ");
    let extend = |out: &mut String, line: &mut String, word: &str, width: usize| {
        if line.len() + word.len() > width && line.len() > 1 {
            out.push_str(line.trim_end());
            out.push('\n');
            *line = String::from(" ");
        }
        line.push_str(word);
    };
    let (leading, trailing) = if summarise {
        (&words[..EDGE_ITEMS], &words[EDGE_ITEMS..])
    } else {
        (&words[..0], &words[..])
    };
    for word in leading {
        extend(&mut out, &mut line, word, elem_width);
        line.push(' ');
    }
    if summarise {
        extend(&mut out, &mut line, "...", elem_width);
        line.push(' ');
    }
    if let Some((last, rest)) = trailing.split_last() {
        for word in rest {
            extend(&mut out, &mut line, word, elem_width);
            line.push(' ');
        }
        extend(&mut out, &mut line, last, elem_width);
    }
    out.push_str(&line);
    format!("[{}]", &out[1..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chapter_example_prints_like_the_chapter() {
        let choice = choose(&[1.2, 0.1, 2.4, 1.7], 0.7, 3, 7, Argpartition::default()).unwrap();
        assert_eq!(choice.to_string(), "2 [0.116 0.238 0.646]");
        assert_eq!(choice.kept, [0, 3, 2]);
    }

    #[test]
    fn arrays_pad_like_numpy() {
        assert_eq!(
            format_numpy_array(&[0.1, 0.25, 0.646]),
            "[0.1   0.25  0.646]"
        );
        assert_eq!(format_numpy_array(&[1.0, 0.0]), "[1. 0.]");
        assert_eq!(format_numpy_array(&[]), "[]");
    }

    const P: Argpartition = Argpartition::Portable;

    #[test]
    fn bad_input_is_refused_with_the_value() {
        assert_eq!(choose(&[], 0.7, 1, 7, P), Err(PolicyError::EmptyVocabulary));
        assert_eq!(
            choose(&[1.0, 2.0], 0.0, 1, 7, P),
            Err(PolicyError::ChapterTemperature(0.0))
        );
        assert_eq!(
            choose(&[1.0, 2.0], 0.0, 1, 7, P).unwrap_err().to_string(),
            "temperature 0 is invalid for the chapter's choose: it must be a finite number \
             greater than 0, because decode.py divides the logits by it (it has no greedy \
             temperature 0)"
        );
        assert_eq!(
            choose(&[1e308, 1.0], 0.5, 1, 7, P).unwrap_err().to_string(),
            "temperature 0.5 scales logit 0 (1e308) to inf, beyond the range of a float: \
             every scaled logit must stay a finite number, so raise the temperature or lower \
             the logits"
        );
        assert_eq!(
            choose(&[1.0, 2.0], 0.7, 3, 7, P),
            Err(PolicyError::InvalidTopK { top_k: 3, vocab: 2 })
        );
        assert_eq!(
            choose(&[1.0, f64::NAN], 0.7, 1, 7, P)
                .unwrap_err()
                .to_string(),
            "logit 1 is NaN, but every logit must be a finite number"
        );
    }
}
