//! A released model directory: `config.json`, the f32 and int8 weights and `tokenizer.json`,
//! each file checked against the SHA-256 the config records before it is used; and beside
//! them the speculative draft `draft.ngram`, which records the SHA-256 of its tokenizer, and
//! the language identifier `langid.bin`. A batch command's run of a loaded model is
//! [`generate`].

use std::path::{Path, PathBuf};
use std::time::Instant;

use model::{ModelConfig, Precision, Transformer};
use policy::generate::{GenerateError, Unobserved};
use policy::{Clock, LanguageModel, Policy, RunConfig, RunRecord, SeedSource, StopConfig};
use tokenizer::Tokenizer;

use crate::error::CliError;
use crate::named::Named;

/// The model that ships with the lab.
pub const DEFAULT_MODEL: &str = "models/decode-lab-tiny-v1";
/// The n-gram draft's file in a model directory (not in `config.json`'s files: the lab does
/// not load it).
pub const DRAFT_FILE: &str = "draft.ngram";
/// The language identifier's file in a model directory (not in `config.json`'s files either:
/// it is trained on the corpus, not tied to the tokenizer or the weights, and records the
/// SHA-256 of its training texts and of itself).
pub const LANGID_FILE: &str = "langid.bin";

/// A loaded model and its tokenizer.
pub struct Loaded {
    pub model: Transformer,
    pub tokenizer: Tokenizer,
}

/// A run of `model` on `prompt` set in `template` under `policy`, with the caller's seed (a
/// user's, to the record), no stop strings, timed by the wall clock and observed by no one:
/// how the batch commands (eval, lengths, traffic, alternatives) generate.
pub fn generate<M: LanguageModel>(
    model: &mut M,
    tokenizer: &Tokenizer,
    template: &str,
    prompt: String,
    policy: Policy,
    seed: u64,
    max_tokens: usize,
) -> Result<RunRecord, GenerateError> {
    let config = RunConfig {
        app_version: env!("CARGO_PKG_VERSION").into(),
        prompt_template: template.into(),
        prompt,
        policy,
        seed,
        seed_source: SeedSource::User,
        max_tokens,
        stop: StopConfig::default(),
    };
    policy::generate(
        model,
        tokenizer,
        &config,
        &mut WallClock::new(),
        &mut Unobserved,
    )
}

/// `DEFAULT_MODEL` under the current directory, or else under this workspace.
pub fn default_dir() -> PathBuf {
    let here = PathBuf::from(DEFAULT_MODEL);
    if here.join("config.json").exists() {
        here
    } else {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(DEFAULT_MODEL)
    }
}

/// The files a command that loads the model reads: `config.json` and every file it lists
/// (the weights of each precision and the tokenizer), each named `--model`, for the write
/// rule of [`crate::files`]. A config that cannot be read adds no more: loading it says why.
pub fn inputs(dir: &Path) -> Vec<Named> {
    let mut files = vec![Named::new("--model", dir.join("config.json"))];
    if let Ok(config) = config(dir) {
        files.extend(
            config
                .files
                .iter()
                .map(|f| Named::new("--model", dir.join(&f.path))),
        );
    }
    files
}

fn read(path: &Path) -> Result<Vec<u8>, CliError> {
    std::fs::read(path).map_err(CliError::read(path))
}

pub fn config(dir: &Path) -> Result<ModelConfig, CliError> {
    let path = dir.join("config.json");
    let text =
        String::from_utf8(read(&path)?).map_err(|_| CliError::NotUtf8 { path: path.clone() })?;
    ModelConfig::from_json(&text).map_err(|e| CliError::in_file(path, e))
}

/// Loads the model in `precision` with its tokenizer.
pub fn load(dir: &Path, precision: Precision) -> Result<Loaded, CliError> {
    let config = config(dir)?;
    load_role(dir, config, precision.role())
}

/// The precision of whichever weights file has the SHA-256 `hash` (a run record names its
/// weights so).
pub fn precision_by_hash(dir: &Path, hash: &str) -> Result<Precision, CliError> {
    let config = config(dir)?;
    let file = config
        .files
        .iter()
        .find(|f| f.sha256 == hash && f.role.starts_with("weights-"))
        .ok_or_else(|| CliError::NoWeightsWithHash {
            dir: dir.to_path_buf(),
            hash: hash.to_string(),
        })?;
    Precision::ALL
        .into_iter()
        .find(|p| p.role() == file.role)
        .ok_or_else(|| CliError::UnknownWeightsRole {
            dir: dir.to_path_buf(),
            role: file.role.clone(),
        })
}

/// The f32 weights alone: the `cpu-reference` baseline a GPU run falls back to when it
/// asked for other weights.
pub fn load_baseline(dir: &Path) -> Result<Transformer, CliError> {
    let config = config(dir)?;
    load_weights(dir, &config, Precision::F32.role())
}

fn verified(dir: &Path, config: &ModelConfig, role: &str) -> Result<Vec<u8>, CliError> {
    let file = config.file(role)?;
    let bytes = read(&dir.join(&file.path))?;
    config.verify(role, &bytes)?;
    Ok(bytes)
}

fn load_weights(
    dir: &Path,
    config: &ModelConfig,
    role: &'static str,
) -> Result<Transformer, CliError> {
    let weights = verified(dir, config, role)?;
    let path = dir.join(&config.file(role)?.path);
    Transformer::from_safetensors(config.clone(), &weights).map_err(|source| CliError::Weights {
        path,
        role,
        source: Box::new(source),
    })
}

/// The tokenizer first: it is small, and a tokenizer of another vocabulary than the model's
/// is refused before the weights are read.
fn load_role(dir: &Path, config: ModelConfig, role: &'static str) -> Result<Loaded, CliError> {
    let tokenizer = checked_tokenizer(dir, &config)?;
    let model = load_weights(dir, &config, role)?;
    Ok(Loaded { model, tokenizer })
}

/// Messages name the tokenizer by this name, wherever the config puts it.
const TOKENIZER_NAME: &str = "tokenizer.json";

fn checked_tokenizer(dir: &Path, config: &ModelConfig) -> Result<Tokenizer, CliError> {
    let tokenizer_bytes = verified(dir, config, "tokenizer")?;
    let json = String::from_utf8(tokenizer_bytes).map_err(|_| CliError::NotUtf8 {
        path: TOKENIZER_NAME.into(),
    })?;
    let tokenizer =
        Tokenizer::from_json(&json).map_err(|e| CliError::in_file(TOKENIZER_NAME, e))?;
    config
        .check_vocabulary(tokenizer.vocab_size())
        .map_err(|e| CliError::in_file(TOKENIZER_NAME, e))?;
    Ok(tokenizer)
}

/// The checked tokenizer alone, with the SHA-256 its file has.
pub fn load_tokenizer(dir: &Path) -> Result<(Tokenizer, String), CliError> {
    let config = config(dir)?;
    let tokenizer = checked_tokenizer(dir, &config)?;
    let hash = config.file("tokenizer")?.sha256.clone();
    Ok((tokenizer, hash))
}

/// The n-gram draft at `path`, which must have been trained with this directory's tokenizer.
pub fn load_draft(dir: &Path, path: &Path) -> Result<ngram::NgramModel, CliError> {
    let config = config(dir)?;
    let hash = &config.file("tokenizer")?.sha256;
    let bytes = read(path)?;
    ngram::NgramModel::from_bytes(&bytes, hash).map_err(|source| CliError::Draft {
        path: path.to_path_buf(),
        source,
    })
}

/// Microseconds since the run started.
pub struct WallClock(Instant);

impl WallClock {
    pub fn new() -> WallClock {
        WallClock(Instant::now())
    }
}

impl Clock for WallClock {
    fn now_us(&mut self) -> f64 {
        self.0.elapsed().as_secs_f64() * 1e6
    }
}
