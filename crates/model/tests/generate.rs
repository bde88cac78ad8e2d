//! The transformer under the policy crate's generation loop: a full context stops the run.

use model::{Layer, Linear, ModelConfig, Transformer, Weights};
use policy::generate::Unobserved;
use policy::{
    generate, ArtifactId, Clock, Policy, RunConfig, SeedSource, StopConfig, StopReason, Vocabulary,
};

/// One letter per token id.
struct Letters;

const ALPHABET: &[u8; 26] = b"abcdefghijklmnopqrstuvwxyz";

impl Vocabulary for Letters {
    fn id(&self) -> ArtifactId {
        ArtifactId {
            name: "letters".into(),
            hash: "26".into(),
        }
    }
    fn encode(&self, text: &str) -> Vec<u32> {
        text.bytes()
            .filter_map(|b| ALPHABET.iter().position(|&a| a == b).map(|p| p as u32))
            .collect()
    }
    fn token_bytes(&self, id: u32) -> &[u8] {
        &ALPHABET[id as usize..id as usize + 1]
    }
}

struct Frozen;

impl Clock for Frozen {
    fn now_us(&mut self) -> f64 {
        0.0
    }
}

#[test]
fn generation_stops_when_the_context_is_full() {
    let c = ModelConfig {
        name: "letters-tiny".into(),
        vocab_size: 26,
        d_model: 16,
        n_layers: 1,
        n_heads: 2,
        n_kv_heads: 1,
        d_ff: 24,
        context_len: 12,
        rope_theta: 10_000.0,
        norm_eps: 1e-5,
        files: Vec::new(),
    };
    let mut state = 11u64;
    let mut next = |n: usize| -> Vec<f32> {
        (0..n)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((state >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.5
            })
            .collect()
    };
    let mut linear = |rows: usize, cols: usize| Linear::F32 {
        rows,
        cols,
        data: next(rows * cols),
    };
    let layer = Layer {
        attn_norm: vec![1.0; 16],
        q: linear(16, 16),
        k: linear(8, 16),
        v: linear(8, 16),
        o: linear(16, 16),
        mlp_norm: vec![1.0; 16],
        gate: linear(24, 16),
        up: linear(24, 16),
        down: linear(16, 24),
    };
    let weights = Weights {
        embed: linear(26, 16),
        layers: vec![layer],
        norm: vec![1.0; 16],
    };
    let mut model = Transformer::new(c, weights, "abc".into());
    let config = RunConfig {
        app_version: "test".into(),
        prompt_template: "{prompt}".into(),
        prompt: "hello".into(),
        policy: Policy {
            temperature: 0.7,
            top_k: 5,
            ..Policy::default()
        },
        seed: 1,
        seed_source: SeedSource::User,
        max_tokens: 50,
        stop: StopConfig::default(),
    };
    let record = generate(&mut model, &Letters, &config, &mut Frozen, &mut Unobserved).unwrap();
    assert_eq!(record.stop_reason, StopReason::ContextFull);
    assert_eq!(record.prompt_tokens.len() + record.steps.len(), 12);
    assert_eq!(
        record.model,
        ArtifactId {
            name: "letters-tiny".into(),
            hash: "abc".into()
        }
    );
    assert_eq!(record.output_text.len(), 7);
}
