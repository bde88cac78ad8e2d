//! Exact versions and run ids: what joins a run to its telemetry and its outcome.
//!
//! A run's `version_id` names everything that, held fixed, makes runs comparable
//! ([`VersionKey`]): the app and policy versions, the model's and the tokenizer's hashes,
//! the prompt template's hash, every sampling parameter with the token limit and the stop
//! configuration, the weights' precision and the backend's kind. Two runs share a version
//! exactly when every field of their keys is equal; the prompt and the seed are the run's
//! own. A `run_id` is the first 16 hex digits of the record's content digest
//! ([`crate::RunRecord::content_digest`]): two records share one only when they are the
//! same run (the same inputs, seed and tokens, the same tags).
//!
//! Both are written into a record when it is made and checked against its content when it
//! is read; a record written before they existed gets them on load.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use thiserror::Error;

use crate::record::{hash_canonical, hex, sha256_hex, RunRecord, StopConfig};
use crate::{BackendKind, Excerpt, Policy, Precision};

/// Hex digits of a run id (64 bits of the content digest).
pub const RUN_ID_DIGITS: usize = 16;
/// Hex digits of a version id (48 bits: a collision is unlikely below millions of versions).
pub const VERSION_ID_DIGITS: usize = 12;

const VERSION_DOMAIN: &[u8] = b"decode-lab version key, v1\n";

/// Most tags on one run, and the longest key or value: metadata, not a payload.
pub const MAX_TAGS: usize = 32;
pub const MAX_TAG_LEN: usize = 128;

/// Everything a version fixes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VersionKey {
    pub app_version: String,
    pub policy_version: String,
    pub model_hash: String,
    pub tokenizer_hash: String,
    /// The hex SHA-256 of the prompt template's UTF-8 bytes.
    pub prompt_template_hash: String,
    pub policy: Policy,
    pub max_tokens: usize,
    pub stop: StopConfig,
    /// Absent in records written before the precision was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precision: Option<Precision>,
    pub backend: BackendKind,
}

impl VersionKey {
    /// The key of `record`'s run.
    #[inline]
    pub fn of(record: &RunRecord) -> VersionKey {
        let config = &record.config;
        VersionKey {
            app_version: record.app_version.clone(),
            policy_version: record.policy_version.clone(),
            model_hash: record.model.hash.clone(),
            tokenizer_hash: record.tokenizer.hash.clone(),
            prompt_template_hash: sha256_hex(config.prompt_template.as_bytes()),
            policy: config.policy.clone(),
            max_tokens: config.max_tokens,
            stop: config.stop.clone(),
            precision: record.precision,
            backend: record.backend.name,
        }
    }

    /// The version's id: the first [`VERSION_ID_DIGITS`] hex digits of the SHA-256 of the
    /// key in the canonical form the content digest uses (floats by their bits, keys
    /// sorted, absent fields left out).
    #[inline]
    pub fn id(&self) -> String {
        let mut hasher = Sha256::new();
        hasher.update(VERSION_DOMAIN);
        hash_canonical(&mut hasher, self);
        let mut id = hex(&hasher.finalize());
        id.truncate(VERSION_ID_DIGITS);
        id
    }
}

/// A tag that cannot be attached.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum TagError {
    #[error("tag {:?} is not key=value", Excerpt(.0))]
    NotKeyValue(String),
    #[error("tag {:?} has an empty key", Excerpt(.0))]
    EmptyKey(String),
    #[error("tag key {:?} is given twice", Excerpt(.key))]
    Repeated { key: String },
    #[error("tag {:?} is longer than {MAX_TAG_LEN} bytes on one side of the `=`", Excerpt(.tag))]
    TooLong { tag: String },
    #[error("{count} tags are more than the {MAX_TAGS} a run takes")]
    TooMany { count: usize },
}

/// Reads `key=value` tags (the first `=` splits; the value may be empty) into a map: keys
/// unique and not empty, both sides at most [`MAX_TAG_LEN`] bytes, at most [`MAX_TAGS`].
pub fn parse_tags<S: AsRef<str>>(tags: &[S]) -> Result<BTreeMap<String, String>, TagError> {
    if tags.len() > MAX_TAGS {
        return Err(TagError::TooMany { count: tags.len() });
    }
    let mut map = BTreeMap::new();
    for tag in tags {
        let tag = tag.as_ref();
        let (key, value) = tag
            .split_once('=')
            .ok_or_else(|| TagError::NotKeyValue(tag.to_string()))?;
        let key = key.trim();
        if key.is_empty() {
            return Err(TagError::EmptyKey(tag.to_string()));
        }
        if key.len() > MAX_TAG_LEN || value.len() > MAX_TAG_LEN {
            return Err(TagError::TooLong {
                tag: tag.to_string(),
            });
        }
        if map.insert(key.to_string(), value.to_string()).is_some() {
            return Err(TagError::Repeated {
                key: key.to_string(),
            });
        }
    }
    Ok(map)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::StopConfig;

    fn key() -> VersionKey {
        VersionKey {
            app_version: "0.1.0".into(),
            policy_version: "policy-1".into(),
            model_hash: "aa".into(),
            tokenizer_hash: "bb".into(),
            prompt_template_hash: "cc".into(),
            policy: Policy {
                temperature: 0.7,
                eos_token: Some(767),
                forbidden: vec![3],
                logit_bias: vec![(4, -1.0)],
                ..Policy::default()
            },
            max_tokens: 64,
            stop: StopConfig {
                strings: vec!["\n\n".into()],
                tokens: vec![9],
            },
            precision: Some(Precision::F32),
            backend: BackendKind::CpuReference,
        }
    }

    /// Every leaf of `value` (in its JSON form), changed one at a time.
    fn each_leaf_changed(value: &serde_json::Value, out: &mut Vec<serde_json::Value>) {
        use serde_json::Value;
        match value {
            Value::Object(map) => {
                for (k, v) in map {
                    let mut changed = Vec::new();
                    each_leaf_changed(v, &mut changed);
                    for c in changed {
                        let mut m = map.clone();
                        m.insert(k.clone(), c);
                        out.push(Value::Object(m));
                    }
                }
            }
            Value::Array(items) => {
                for (i, v) in items.iter().enumerate() {
                    let mut changed = Vec::new();
                    each_leaf_changed(v, &mut changed);
                    for c in changed {
                        let mut a = items.clone();
                        a[i] = c;
                        out.push(Value::Array(a));
                    }
                }
            }
            Value::Bool(b) => out.push(Value::Bool(!b)),
            Value::Number(n) => out.push(match (n.as_u64(), n.as_f64()) {
                (Some(u), _) => Value::from(u + 1),
                (None, Some(x)) => Value::from(x + 0.5),
                (None, None) => unreachable!("a JSON number is an integer or a float"),
            }),
            Value::String(s) => out.push(Value::String(format!("{s}x"))),
            Value::Null => {}
        }
    }

    /// The version depends on every field of its key: change any one (every sampling
    /// parameter, every stop setting, each hash, the precision, the backend) and the id
    /// changes; read back unchanged, it stays.
    #[test]
    fn every_field_of_the_key_moves_the_version() {
        let base = key();
        let id = base.id();
        assert_eq!(id.len(), VERSION_ID_DIGITS);
        let json = serde_json::to_value(&base).unwrap();
        let back: VersionKey = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(back.id(), id);
        let mut variants = Vec::new();
        each_leaf_changed(&json, &mut variants);
        let mut changed = 0;
        for variant in variants {
            // A change the key's own type refuses (a backend or precision name that does
            // not exist) is not a version.
            let Ok(other) = serde_json::from_value::<VersionKey>(variant.clone()) else {
                continue;
            };
            assert_ne!(other.id(), id, "{variant}");
            changed += 1;
        }
        // Every leaf but the two enum names: the policy's fields, stop, hashes, versions.
        let policy_fields = serde_json::to_value(&base.policy).unwrap();
        assert!(
            changed > policy_fields.as_object().unwrap().len(),
            "{changed}"
        );
        for other in [
            VersionKey {
                precision: Some(Precision::Int8),
                ..key()
            },
            VersionKey {
                precision: None,
                ..key()
            },
            VersionKey {
                backend: BackendKind::WebGpu,
                ..key()
            },
        ] {
            assert_ne!(other.id(), id);
        }
    }

    #[test]
    fn tags_read_as_key_value_and_bad_ones_are_named() {
        let tags = parse_tags(&["slice=eu", "note=a=b", "empty="]).unwrap();
        assert_eq!(tags["slice"], "eu");
        assert_eq!(tags["note"], "a=b");
        assert_eq!(tags["empty"], "");
        for (bad, says) in [
            (vec!["slice"], "tag \"slice\" is not key=value"),
            (vec!["=eu"], "tag \"=eu\" has an empty key"),
            (vec!["a=1", "a=2"], "tag key \"a\" is given twice"),
        ] {
            assert_eq!(parse_tags(&bad).unwrap_err().to_string(), says);
        }
        let long = format!("k={}", "v".repeat(MAX_TAG_LEN + 1));
        assert!(matches!(parse_tags(&[long]), Err(TagError::TooLong { .. })));
        let many: Vec<String> = (0..=MAX_TAGS).map(|i| format!("k{i}=v")).collect();
        assert_eq!(
            parse_tags(&many).unwrap_err().to_string(),
            format!(
                "{} tags are more than the {MAX_TAGS} a run takes",
                MAX_TAGS + 1
            )
        );
    }
}
