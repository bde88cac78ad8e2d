//! The n-gram draft as a `policy::LanguageModel`, so that the statistical baseline is
//! decoded by the same generation loop and the same policy as the transformer: its logits
//! are the natural logarithms of the n-gram's next-token probabilities (all above 0, so all
//! finite), and softmax of them gives those probabilities back.

use ngram::{NgramError, NgramModel};
use policy::{ArtifactId, LanguageModel};

pub struct NgramLm<'a> {
    model: &'a NgramModel,
    id: ArtifactId,
    context_len: usize,
    history: Vec<u32>,
    probabilities: Vec<f64>,
    logits: Vec<f32>,
}

impl<'a> NgramLm<'a> {
    /// `id` names the draft file (a content hash of it); `context_len` is the transformer's,
    /// so that both take the same prompts.
    pub fn new(model: &'a NgramModel, id: ArtifactId, context_len: usize) -> NgramLm<'a> {
        NgramLm {
            model,
            id,
            context_len,
            history: Vec::new(),
            probabilities: Vec::new(),
            logits: Vec::new(),
        }
    }

    fn next(&mut self) -> Result<&[f32], NgramError> {
        // Only the last order − 1 tokens condition an n-gram.
        let keep = self.history.len().saturating_sub(self.model.order() - 1);
        self.model
            .next_distribution(&self.history[keep..], &mut self.probabilities)?;
        self.logits.clear();
        self.logits
            .extend(self.probabilities.iter().map(|&p| p.ln() as f32));
        Ok(&self.logits)
    }
}

impl LanguageModel for NgramLm<'_> {
    type Error = NgramError;

    fn id(&self) -> ArtifactId {
        self.id.clone()
    }

    fn vocab_size(&self) -> usize {
        self.model.vocab() as usize
    }

    fn context_len(&self) -> usize {
        self.context_len
    }

    fn prefill(&mut self, prompt: &[u32]) -> Result<&[f32], NgramError> {
        self.history.clear();
        self.history.extend_from_slice(prompt);
        self.next()
    }

    fn decode_step(&mut self, token: u32) -> Result<&[f32], NgramError> {
        self.history.push(token);
        self.next()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ngram::{train, Discounts, TrainConfig};

    #[test]
    fn softmax_of_the_logits_is_the_ngram_distribution() {
        let text = [0u32, 1, 2, 0, 1, 3, 0, 1, 2, 2, 1, 0];
        let config = TrainConfig {
            order: 3,
            vocab: 5,
            tokenizer_sha256: "0".repeat(64),
            discounts: Discounts::Fixed(0.75),
        };
        let model = train(&[&text], &config).unwrap();
        let id = ArtifactId {
            name: "ngram-3".into(),
            hash: "0".repeat(64),
        };
        let mut lm = NgramLm::new(&model, id, 16);
        let logits = lm.prefill(&[2, 2, 0]).unwrap().to_vec();
        let logits_after = lm.decode_step(1).unwrap().to_vec();
        for (logits, context) in [(logits, [2u32, 0]), (logits_after, [0, 1])] {
            let z: f64 = logits.iter().map(|&l| f64::from(l).exp()).sum();
            for (w, &l) in logits.iter().enumerate() {
                let p = model.prob(&context, w as u32).unwrap();
                assert!((f64::from(l).exp() / z - p).abs() < 1e-6, "token {w}");
            }
        }
    }
}
