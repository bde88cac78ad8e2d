//! The trainer: learns byte-level BPE merges from texts.
//!
//! The texts are split around `<|endoftext|>`, then into pieces by the GPT-2 pattern (the
//! same split [`crate::Tokenizer::encode`] uses), and identical pieces are counted once with
//! their frequency. Starting from the 256 byte tokens, each step merges the most frequent
//! adjacent pair of tokens inside pieces; **ties go to the lexicographically smallest pair of
//! ids** `(left, right)`. A merge whose bytes already form a token reuses that token's id (as
//! the `tokenizers` trainer does), so such a merge adds a rule but no id. Training stops when
//! the vocabulary (with `<|endoftext|>`) has `vocab_size` ids, or when no pair occurs at least
//! [`MIN_PAIR_COUNT`] times.
//!
//! Pair counts are kept incrementally: each pair knows the pieces it occurs in, a merge
//! re-counts only those pieces, and a max-heap of `(count, pair)` entries, checked against the
//! live count when popped, finds the next pair. The result depends only on the input.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use crate::bpe::{AddedToken, Tokenizer, END_OF_TEXT};
use crate::json::Parts;
use crate::pretokenize;

/// A pair must occur at least this often (weighted by piece frequency) to be merged.
pub const MIN_PAIR_COUNT: u64 = 2;

type Pair = (u32, u32);

/// Trains a tokenizer with at most `vocab_size` ids: the 256 bytes, learned tokens, and
/// `<|endoftext|>` (a `vocab_size` below 257 still gives those 257). Deterministic.
pub fn train(texts: &[&str], vocab_size: usize) -> Tokenizer {
    // Unique pieces and their frequencies, in byte order.
    let mut piece_counts: HashMap<&str, u64> = HashMap::new();
    for text in texts {
        for segment in text.split(END_OF_TEXT) {
            for range in pretokenize::split(segment) {
                *piece_counts.entry(&segment[range]).or_insert(0) += 1;
            }
        }
    }
    let mut pieces: Vec<(&str, u64)> = piece_counts.into_iter().collect();
    pieces.sort_unstable();
    let counts: Vec<i64> = pieces.iter().map(|p| p.1 as i64).collect();
    let mut words: Vec<Vec<u32>> = pieces
        .iter()
        .map(|(s, _)| s.bytes().map(u32::from).collect())
        .collect();
    drop(pieces);

    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    let mut token_ids: HashMap<Vec<u8>, u32> = tokens
        .iter()
        .enumerate()
        .map(|(i, t)| (t.clone(), i as u32))
        .collect();
    let mut merges: Vec<(u32, u32, u32)> = Vec::new();

    let mut pair_counts: HashMap<Pair, i64> = HashMap::new();
    let mut occurs_in: HashMap<Pair, Vec<u32>> = HashMap::new();
    for (w, word) in words.iter().enumerate() {
        for p in word.windows(2) {
            let pair = (p[0], p[1]);
            *pair_counts.entry(pair).or_insert(0) += counts[w];
            occurs_in.entry(pair).or_default().push(w as u32);
        }
    }
    let mut heap: BinaryHeap<(i64, Reverse<Pair>)> = pair_counts
        .iter()
        .map(|(&pair, &count)| (count, Reverse(pair)))
        .collect();

    let target = vocab_size.max(257) - 1; // ids before <|endoftext|>
    let mut delta: HashMap<Pair, i64> = HashMap::new();
    while tokens.len() < target {
        // The most frequent pair, smallest ids first among equals; stale entries skipped.
        let Some((count, Reverse(pair))) = heap.pop() else {
            break;
        };
        if pair_counts.get(&pair) != Some(&count) {
            continue;
        }
        if (count as u64) < MIN_PAIR_COUNT {
            break;
        }
        let (a, b) = pair;
        let mut bytes = tokens[a as usize].clone();
        bytes.extend_from_slice(&tokens[b as usize]);
        let z = match token_ids.get(&bytes) {
            Some(&id) => id,
            None => {
                let id = tokens.len() as u32;
                token_ids.insert(bytes.clone(), id);
                tokens.push(bytes);
                id
            }
        };
        merges.push((a, b, z));

        let mut where_ = occurs_in.remove(&pair).unwrap_or_default();
        where_.sort_unstable();
        where_.dedup();
        delta.clear();
        for w in where_ {
            let word = &mut words[w as usize];
            if !word.windows(2).any(|p| p[0] == a && p[1] == b) {
                continue;
            }
            let c = counts[w as usize];
            for p in word.windows(2) {
                *delta.entry((p[0], p[1])).or_insert(0) -= c;
            }
            let (mut read, mut write) = (0, 0);
            while read < word.len() {
                if read + 1 < word.len() && word[read] == a && word[read + 1] == b {
                    word[write] = z;
                    read += 2;
                } else {
                    word[write] = word[read];
                    read += 1;
                }
                write += 1;
            }
            word.truncate(write);
            for p in word.windows(2) {
                let q = (p[0], p[1]);
                *delta.entry(q).or_insert(0) += c;
                if q.0 == z || q.1 == z {
                    occurs_in.entry(q).or_default().push(w);
                }
            }
        }
        for (&q, &d) in &delta {
            if d == 0 {
                continue;
            }
            let entry = pair_counts.entry(q).or_insert(0);
            *entry += d;
            let now = *entry;
            if now > 0 {
                heap.push((now, Reverse(q)));
            } else {
                pair_counts.remove(&q);
            }
        }
    }

    let eot = tokens.len() as u32;
    tokens.push(END_OF_TEXT.as_bytes().to_vec());
    let n = tokens.len();
    let parts = Parts {
        tokens,
        in_model: vec![true; n],
        merges,
        added: vec![AddedToken {
            id: eot,
            content: END_OF_TEXT.to_string(),
            special: true,
            normalized: false,
        }],
        ignore_merges: false,
    };
    // The parts are complete by construction (all 256 bytes, <|endoftext|>).
    match Tokenizer::from_parts(parts, None) {
        Ok(t) => t,
        Err(e) => unreachable!("a trained tokenizer is always complete: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn learns_the_most_frequent_pair_first_and_breaks_ties_by_id() {
        // (b,a) and (a,b) both occur twice, (c,d) three times.
        let t = train(&["ba", "ba", "ab", "ab", "cd", "cd", "cd"], 260);
        let (a, b, c, d) = (b'a' as u32, b'b' as u32, b'c' as u32, b'd' as u32);
        assert_eq!(t.merges, vec![(c, d), (a, b), (b, a)]);
        assert_eq!(t.vocab_size(), 260);
        assert_eq!(t.end_of_text(), 259);
        assert_eq!(t.encode("ab ba<|endoftext|>"), vec![257, 32, 258, 259]);
    }

    #[test]
    fn stops_when_no_pair_repeats() {
        let t = train(&["abc"], 1000);
        assert_eq!(t.vocab_size(), 257);
        assert!(t.merges.is_empty());
    }
}
