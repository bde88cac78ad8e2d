//! The released model in `models/decode-lab-tiny-v1` is consistent: every file matches the
//! SHA-256 its config records, the int8 file is exactly the project's quantisation of the
//! f32 file, the tokenizer loads with the config's vocabulary, and the candle graph and the
//! reference forward pass agree on the trained weights for real prompts.

use std::path::PathBuf;

use candle_core::Tensor;
use model::{ModelConfig, Transformer, Weights};
use trainer::Net;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models/decode-lab-tiny-v1")
}

fn read(config: &ModelConfig, role: &str) -> Vec<u8> {
    let file = config.file(role).unwrap();
    let bytes = std::fs::read(dir().join(&file.path)).unwrap();
    config.verify(role, &bytes).unwrap();
    bytes
}

#[test]
fn released_files_are_consistent() {
    let config_text = std::fs::read_to_string(dir().join("config.json")).unwrap();
    let config = ModelConfig::from_json(&config_text).unwrap();
    assert_eq!(config.name, "decode-lab-tiny-v1");
    let f32_bytes = read(&config, "weights-f32");
    let int8_bytes = read(&config, "weights-int8");
    let tokenizer_text = String::from_utf8(read(&config, "tokenizer")).unwrap();

    let weights = Weights::from_safetensors(&config, &f32_bytes).unwrap();
    assert_eq!(
        weights.quantized().to_safetensors().unwrap(),
        int8_bytes,
        "the int8 file is the per-row quantisation of the f32 file"
    );
    let tokenizer = tokenizer::Tokenizer::from_json(&tokenizer_text).unwrap();
    assert_eq!(tokenizer.vocab_size(), config.vocab_size);

    // Parity on the trained weights, on real text.
    let net = Net::from_weights(&config, &weights).unwrap();
    let mut reference = Transformer::from_safetensors(config.clone(), &f32_bytes).unwrap();
    let mut worst = 0.0f32;
    for prompt in [
        "The ",
        "Choose Format - Cells.",
        "To insert a new sheet, right-click the sheet tab and choose Insert Sheet.",
        "Hautatu Formatua - Gelaxkak.",
    ] {
        let ids = tokenizer.encode(prompt);
        let x = Tensor::from_vec(ids.clone(), (1, ids.len()), net.device()).unwrap();
        let ours = net
            .forward(&x)
            .unwrap()
            .squeeze(0)
            .unwrap()
            .to_vec2::<f32>()
            .unwrap();
        let theirs = reference.prefill_all(&ids).unwrap();
        for (t, row) in theirs.chunks_exact(config.vocab_size).enumerate() {
            let diff = row
                .iter()
                .zip(&ours[t])
                .map(|(a, b)| (a - b).abs())
                .fold(0.0f32, f32::max);
            assert!(diff <= 1e-4, "{prompt:?} position {t}: max |diff| {diff}");
            worst = worst.max(diff);
        }
    }
    eprintln!("trained weights: max |diff| {worst:e}");
}
