//! A rule: **repeat the most frequent continuation of the last token.** From the training
//! token streams, the table holds for every token the token that most often followed it
//! (the token bigram argmax; ties go to the smaller id; no bigram spans two streams). The
//! rule continues a prompt by looking up its last token, then the token it gave, and so on
//! until the budget is spent or a token that was never followed by anything is reached.

use crate::error::CliError;

/// The token bigram argmax table.
#[derive(Debug)]
pub struct BigramRule {
    next: Vec<Option<u32>>,
}

impl BigramRule {
    /// Counts the bigrams of `streams` (the training text) over a vocabulary of `vocab` ids;
    /// an id at or above `vocab` is named in the error.
    pub fn train(streams: &[&[u32]], vocab: usize) -> Result<BigramRule, CliError> {
        let mut counts = vec![0u32; vocab * vocab];
        for stream in streams {
            if let Some(&token) = stream.iter().find(|&&id| id as usize >= vocab) {
                return Err(CliError::TrainingToken { token, vocab });
            }
            for pair in stream.windows(2) {
                counts[pair[0] as usize * vocab + pair[1] as usize] += 1;
            }
        }
        let next = counts
            .chunks(vocab.max(1))
            .map(|row| {
                // The first of the largest counts: `max_by_key` keeps the last, so scan.
                let (best, &count) =
                    row.iter()
                        .enumerate()
                        .fold((0, &0), |b, (i, c)| if *c > *b.1 { (i, c) } else { b });
                (count > 0).then_some(best as u32)
            })
            .collect();
        Ok(BigramRule { next })
    }

    /// Up to `budget` tokens after `prompt`; nothing when the prompt is empty.
    pub fn continue_from(&self, prompt: &[u32], budget: usize) -> Vec<u32> {
        let mut out = Vec::with_capacity(budget);
        let mut last = prompt.last().copied();
        while out.len() < budget {
            match last.and_then(|t| self.next.get(t as usize).copied().flatten()) {
                Some(t) => {
                    out.push(t);
                    last = Some(t);
                }
                None => break,
            }
        }
        out
    }

    /// The table's bytes as it is stored: one `Option<u32>` per token.
    pub fn size_bytes(&self) -> usize {
        std::mem::size_of_val(self.next.as_slice())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rule_chains_the_most_frequent_follower_counted_by_hand() {
        // Followers, counted by hand within each stream: 0 → 1 ×2; 1 → 2 ×2, 4 ×1;
        // 2 → 0, 3, 4 once each (a tie: 0, the smallest); 3 → 1 ×1; 4 → nothing (both
        // streams end with it; a bigram across them would have given 4 → 2).
        let streams: [&[u32]; 2] = [&[0, 1, 2, 0, 1, 4], &[2, 3, 1, 2, 4]];
        let rule = BigramRule::train(&streams, 5).unwrap();
        assert_eq!(rule.next, [Some(1), Some(2), Some(0), Some(1), None]);
        // From 2: 0, 1, 2, 0, 1, … until the budget.
        assert_eq!(rule.continue_from(&[4, 2], 5), [0, 1, 2, 0, 1]);
        assert_eq!(rule.continue_from(&[3], 3), [1, 2, 0]);
        // 4 was never followed, so the rule gives nothing.
        assert_eq!(rule.continue_from(&[0, 4], 5), Vec::<u32>::new());
        assert_eq!(rule.continue_from(&[], 5), Vec::<u32>::new());
        assert_eq!(rule.size_bytes(), 5 * std::mem::size_of::<Option<u32>>());
        assert!(BigramRule::train(&[&[0, 7]], 5)
            .unwrap_err()
            .to_string()
            .contains("token 7"));
    }
}
