//! The released directory: the trained weights in f32 and in the model crate's per-row int8,
//! the tokenizer, and `config.json`, which records each file's SHA-256 and is read back as
//! the lab reads it before the run goes on.

use std::path::Path;

use model::{sha256_hex, ModelConfig, ModelFile, Weights};

use crate::{Net, TrainError};

/// The trained weights, in memory and as the bytes of their safetensors files.
pub struct Release {
    pub weights: Weights,
    /// The model crate's per-row int8 copy of `weights`.
    pub int8: Weights,
    pub f32_bytes: Vec<u8>,
    pub int8_bytes: Vec<u8>,
}

impl Release {
    /// Exports the trained `net` and quantises it.
    pub fn of(net: &Net) -> Result<Release, TrainError> {
        let weights = net.to_weights()?;
        let int8 = weights.quantized();
        let f32_bytes = weights.to_safetensors()?;
        let int8_bytes = int8.to_safetensors()?;
        Ok(Release {
            weights,
            int8,
            f32_bytes,
            int8_bytes,
        })
    }

    /// Writes the weight files, `tokenizer_json` and `config.json` (`config` with the three
    /// files' roles, paths and hashes) into `dir`, creating it, then reads the config back and
    /// checks the f32 file against it.
    pub fn write(
        &self,
        dir: &Path,
        config: &ModelConfig,
        tokenizer_json: &str,
    ) -> Result<(), TrainError> {
        std::fs::create_dir_all(dir).map_err(|e| TrainError::io("create", dir, e))?;
        let files = [
            ("weights-f32", "model.f32.safetensors", &self.f32_bytes[..]),
            ("weights-int8", "model.int8.safetensors", &self.int8_bytes),
            ("tokenizer", "tokenizer.json", tokenizer_json.as_bytes()),
        ];
        let mut released = config.clone();
        for (role, path, bytes) in files {
            write_file(&dir.join(path), bytes)?;
            released.files.push(ModelFile {
                role: role.to_string(),
                path: path.to_string(),
                sha256: sha256_hex(bytes),
            });
        }
        let config_json = serde_json::to_string_pretty(&released)
            .map_err(|e| TrainError::State(format!("config JSON: {e}")))?
            + "\n";
        write_file(&dir.join("config.json"), config_json.as_bytes())?;
        let reread = ModelConfig::from_json(&config_json)?;
        reread.verify("weights-f32", &self.f32_bytes)?;
        Ok(())
    }
}

/// Writes `bytes` to `path`, naming the path if it fails.
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<(), TrainError> {
    std::fs::write(path, bytes).map_err(|e| TrainError::io("write", path, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Init, Rng};

    #[test]
    fn config_json_lists_every_file_with_its_hash() {
        let config = ModelConfig {
            name: "release-test".into(),
            vocab_size: 40,
            d_model: 16,
            n_layers: 1,
            n_heads: 4,
            n_kv_heads: 2,
            d_ff: 24,
            context_len: 16,
            rope_theta: 10_000.0,
            norm_eps: 1e-5,
            files: Vec::new(),
        };
        let net = Net::new(&config, &Init::testing(&config), &mut Rng::new(3)).unwrap();
        let release = Release::of(&net).unwrap();
        assert_eq!(release.int8.to_safetensors().unwrap(), release.int8_bytes);
        let dir = std::env::temp_dir().join(format!("trainer-release-{}", std::process::id()));
        release.write(&dir, &config, "{}").unwrap();

        let text = std::fs::read_to_string(dir.join("config.json")).unwrap();
        let written = ModelConfig::from_json(&text).unwrap();
        let roles: Vec<&str> = written.files.iter().map(|f| f.role.as_str()).collect();
        assert_eq!(roles, ["weights-f32", "weights-int8", "tokenizer"]);
        for file in &written.files {
            let bytes = std::fs::read(dir.join(&file.path)).unwrap();
            written.verify(&file.role, &bytes).unwrap();
        }
        assert_eq!(std::fs::read(dir.join("tokenizer.json")).unwrap(), b"{}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
