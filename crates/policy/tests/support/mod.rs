//! The test support shared by the generation, record and mutation tests: a small
//! deterministic model, a byte vocabulary, a ticking clock and a run configuration.

#![allow(dead_code)] // each test file uses its own part of it

use std::convert::Infallible;

use policy::generate::Unobserved;
use policy::{
    generate, ArtifactId, Clock, LanguageModel, Policy, RunConfig, RunRecord, SeedSource,
    StopConfig, Vocabulary,
};

/// Byte tokens, including the two halves of "é" so that text can split a character.
pub const TOKENS: [&[u8]; 8] = [b"", b"a", b"b", b"c", b" ", b"\xc3", b"\xa9", b"."];
pub const EOS: u32 = 0;

/// Logits are a fixed function of the position and the previous token.
pub struct Toy {
    context_len: usize,
    position: usize,
    logits: Vec<f32>,
    pub bias: Option<(u32, f32)>,
}

impl Toy {
    pub fn new(context_len: usize) -> Toy {
        Toy {
            context_len,
            position: 0,
            logits: vec![0.0; TOKENS.len()],
            bias: None,
        }
    }

    fn fill(&mut self, last: u32) {
        for (i, l) in self.logits.iter_mut().enumerate() {
            let h = (last as usize * 31 + i * 17 + self.position * 7) % 13;
            *l = h as f32 / 3.0;
        }
        if let Some((id, bias)) = self.bias {
            self.logits[id as usize] += bias;
        }
    }
}

impl LanguageModel for Toy {
    type Error = Infallible;

    fn id(&self) -> ArtifactId {
        ArtifactId {
            name: "toy".into(),
            hash: "0".into(),
        }
    }
    fn vocab_size(&self) -> usize {
        TOKENS.len()
    }
    fn context_len(&self) -> usize {
        self.context_len
    }
    fn prefill(&mut self, prompt: &[u32]) -> Result<&[f32], Infallible> {
        self.position = prompt.len();
        self.fill(*prompt.last().unwrap());
        Ok(&self.logits)
    }
    fn decode_step(&mut self, token: u32) -> Result<&[f32], Infallible> {
        self.position += 1;
        self.fill(token);
        Ok(&self.logits)
    }
}

/// The part of [`LanguageModel`] that a model wrapping the toy (in its field `toy`) passes on
/// unchanged: the toy's id, vocabulary size and context length.
#[allow(unused_macros)] // only the generation tests wrap the toy
macro_rules! toy_identity {
    () => {
        fn id(&self) -> policy::ArtifactId {
            self.toy.id()
        }
        fn vocab_size(&self) -> usize {
            self.toy.vocab_size()
        }
        fn context_len(&self) -> usize {
            self.toy.context_len()
        }
    };
}
#[allow(unused_imports)]
pub(crate) use toy_identity;

pub struct Bytes;

impl Vocabulary for Bytes {
    fn id(&self) -> ArtifactId {
        ArtifactId {
            name: "bytes".into(),
            hash: "1".into(),
        }
    }
    fn encode(&self, text: &str) -> Vec<u32> {
        text.bytes()
            .filter_map(|b| TOKENS.iter().position(|t| t == &[b]).map(|p| p as u32))
            .collect()
    }
    fn token_bytes(&self, id: u32) -> &[u8] {
        TOKENS[id as usize]
    }
}

/// Advances 10 µs per reading.
pub struct Ticks(pub f64);

impl Clock for Ticks {
    fn now_us(&mut self) -> f64 {
        self.0 += 10.0;
        self.0
    }
}

pub fn config(policy: Policy, max_tokens: usize, stop: StopConfig) -> RunConfig {
    RunConfig {
        app_version: "test".into(),
        prompt_template: "a {prompt}".into(),
        prompt: "b".into(),
        policy,
        seed: 7,
        seed_source: SeedSource::User,
        max_tokens,
        stop,
    }
}

pub fn sampled() -> Policy {
    Policy {
        temperature: 0.9,
        top_k: 6,
        eos_token: Some(EOS),
        min_new_tokens: 1,
        ..Policy::default()
    }
}

pub fn run(model: &mut Toy, config: &RunConfig) -> RunRecord {
    generate(model, &Bytes, config, &mut Ticks(0.0), &mut Unobserved).unwrap()
}
