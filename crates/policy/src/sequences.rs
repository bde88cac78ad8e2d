//! Multi-token constraints with Hugging Face's semantics: bad words
//! (`NoBadWordsLogitsProcessor`) and sequence bias (`SequenceBiasLogitsProcessor`),
//! `generation/logits_process.py` at aa5108b4 (`docs/engine-semantics.md`, §2.8).
//!
//! A sequence of one token applies at every step. A longer one applies to its last token
//! when the context (prompt included, as `input_ids` is) ends with the rest of it: a bad
//! word's last token is then removed, a biased sequence's last token gets the bias.
//!
//! vLLM v1's bad words are the same rule over the generated tokens alone: its sampler calls
//! `apply_bad_words(logits, bad_words_token_ids, output_token_ids)`, and
//! `vllm/v1/sample/ops/bad_words.py` (at 17daac6) skips a word longer than the output plus
//! one and bans its last token when the output ends with the rest ([`bad_words_context`]).
//!
//! The syntax, shared by `decode-lab --bad-words` and `--sequence-bias`: sequences
//! separated by `;`, token ids by `,` (`1,2;5`), a bias after `:` (`1,2:-3.5;7:1.0`).

use crate::{Engine, PolicyError, StepContext};

/// Whether a sequence applies now: it is one token long, or `context` ends with all of it
/// but its last token.
pub(crate) fn applies(sequence: &[u32], context: &[u32]) -> bool {
    match sequence.split_last() {
        Some((_, prefix)) => context.ends_with(prefix),
        None => false,
    }
}

/// The tokens a bad word's prefix is matched against under `engine`: vLLM's generated
/// tokens alone, every other engine's whole context.
pub(crate) fn bad_words_context<'a>(engine: Engine, context: StepContext<'a>) -> &'a [u32] {
    match engine {
        Engine::Vllm => context.generated(),
        _ => context.tokens,
    }
}

/// The tokens the bad words remove at this step.
pub(crate) fn banned(bad_words: &[Vec<u32>], context: &[u32]) -> Vec<u32> {
    bad_words
        .iter()
        .filter(|w| applies(w, context))
        .filter_map(|w| w.last().copied())
        .collect()
}

/// The biases the sequences add at this step, as (token, bias).
pub(crate) fn biased(sequence_bias: &[(Vec<u32>, f64)], context: &[u32]) -> Vec<(u32, f64)> {
    sequence_bias
        .iter()
        .filter(|(s, _)| applies(s, context))
        .filter_map(|(s, bias)| s.last().map(|&id| (id, *bias)))
        .collect()
}

/// Reads `1,2;5` as bad words: each entry a sequence of token ids.
///
/// ```
/// assert_eq!(policy::parse_bad_words("1,2; 5")?, vec![vec![1, 2], vec![5]]);
/// # Ok::<(), policy::PolicyError>(())
/// ```
pub fn parse_bad_words(text: &str) -> Result<Vec<Vec<u32>>, PolicyError> {
    entries(text).map(|entry| ids(entry, entry)).collect()
}

/// Reads `1,2:-3.5;7:1.0` as sequence biases: each entry ids, `:`, and a finite bias.
///
/// ```
/// assert_eq!(
///     policy::parse_sequence_bias("1,2:-3.5; 7:1")?,
///     vec![(vec![1, 2], -3.5), (vec![7], 1.0)]
/// );
/// # Ok::<(), policy::PolicyError>(())
/// ```
pub fn parse_sequence_bias(text: &str) -> Result<Vec<(Vec<u32>, f64)>, PolicyError> {
    entries(text)
        .map(|entry| {
            let (sequence, bias) = entry
                .split_once(':')
                .ok_or_else(|| PolicyError::SequenceEntry(entry.to_string()))?;
            let bias: f64 = bias
                .trim()
                .parse()
                .ok()
                .filter(|b: &f64| b.is_finite())
                .ok_or_else(|| PolicyError::SequenceEntry(entry.to_string()))?;
            Ok((ids(sequence, entry)?, bias))
        })
        .collect()
}

fn entries(text: &str) -> impl Iterator<Item = &str> {
    text.split(';').map(str::trim).filter(|e| !e.is_empty())
}

fn ids(list: &str, entry: &str) -> Result<Vec<u32>, PolicyError> {
    let ids = list
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<u32>())
        .collect::<Result<Vec<u32>, _>>()
        .map_err(|_| PolicyError::SequenceEntry(entry.to_string()))?;
    if ids.is_empty() {
        return Err(PolicyError::SequenceEntry(entry.to_string()));
    }
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sequence_applies_when_the_context_ends_with_its_prefix() {
        assert!(applies(&[5], &[]));
        assert!(applies(&[1, 2], &[7, 1]));
        assert!(!applies(&[1, 2], &[1, 7]));
        assert!(!applies(&[1, 2, 3], &[2]));
        assert_eq!(banned(&[vec![1, 2], vec![5]], &[3, 1]), [2, 5]);
        assert_eq!(
            biased(&[(vec![1, 2], -3.5), (vec![4, 4], 1.0)], &[1]),
            [(2, -3.5)]
        );
    }

    /// vLLM's `_apply_bad_words_single_batch` (`vllm/v1/sample/ops/bad_words.py` at
    /// 17daac6), line by line: the last tokens it sets to -inf, given the output so far.
    fn vllm_reference(bad_words: &[Vec<u32>], past: &[u32]) -> Vec<u32> {
        let mut banned = Vec::new();
        for word in bad_words {
            if word.len() > past.len() + 1 {
                continue;
            }
            let prefix_length = word.len() - 1;
            let last = word[word.len() - 1];
            let actual = if prefix_length > 0 {
                &past[past.len() - prefix_length..]
            } else {
                &[][..]
            };
            if actual == &word[..prefix_length] {
                banned.push(last);
            }
        }
        banned
    }

    proptest::proptest! {
        /// Under vLLM the prompt never completes a bad word; the output alone does, as in
        /// vLLM's own code. Small ids, so that prefixes match often.
        #[test]
        fn vllm_bad_words_match_the_output_alone_as_vllm_does(
            words in proptest::collection::vec(proptest::collection::vec(0u32..3, 1..4), 0..4),
            tokens in proptest::collection::vec(0u32..3, 0..8),
            prompt_len in 0usize..8,
        ) {
            let context = StepContext::new(&tokens, prompt_len);
            let ours = banned(&words, bad_words_context(Engine::Vllm, context));
            proptest::prop_assert_eq!(ours, vllm_reference(&words, context.generated()));
            // Every other engine reads the prompt too.
            let hf = banned(&words, bad_words_context(Engine::Hf, context));
            proptest::prop_assert_eq!(hf, banned(&words, &tokens));
        }
    }

    #[test]
    fn bad_entries_are_named() {
        for (text, entry) in [
            ("1,x;5", "1,x"),
            (" ; ,", ","),
            ("2:", "2:"),
            ("2:inf", "2:inf"),
        ] {
            let err = if text.contains(':') {
                parse_sequence_bias(text).unwrap_err()
            } else {
                parse_bad_words(text).unwrap_err()
            };
            assert_eq!(err, PolicyError::SequenceEntry(entry.to_string()), "{text}");
        }
        assert_eq!(
            parse_sequence_bias("1,2").unwrap_err().to_string(),
            "sequence \"1,2\" is not token ids separated by commas (with :bias for a sequence \
             bias), for example 1,2:-3.5"
        );
    }
}
