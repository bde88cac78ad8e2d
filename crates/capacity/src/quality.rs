//! Quality per language slice and weight path, read from `decode-lab eval --json`, and the
//! quality gate: no slice, the rare one included, worse than its declared floor.

use serde::{Deserialize, Serialize};

use crate::error::{in_range, positive, CapacityError};
use crate::profile::WeightPath;

/// The part of `decode-lab eval --json` the planner reads (crates/cli/src/eval.rs `Report`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EvalReport {
    pub model: String,
    pub slices: Vec<EvalSlice>,
}

/// One row of the eval: a slice (`"en: English"`) scored on one precision (`"f32"`, `"int8"`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EvalSlice {
    pub slice: String,
    pub precision: String,
    pub tokens: usize,
    pub bytes: usize,
    pub bits_per_byte: f64,
    pub top1_accuracy: f64,
}

/// Measured held-out bits per byte of each slice on each weight path (lower is better).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QualityProfile {
    /// The model the figures were measured on.
    pub model: String,
    pub slices: Vec<SliceQuality>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SliceQuality {
    /// The slice's code (`"eu"`), as traces name it.
    pub slice: String,
    /// Its long name (`"Basque (rare-language slice)"`).
    pub name: String,
    pub full_bits_per_byte: f64,
    pub int8_bits_per_byte: f64,
}

impl SliceQuality {
    pub fn bits_per_byte(&self, weights: WeightPath) -> f64 {
        match weights {
            WeightPath::Full => self.full_bits_per_byte,
            WeightPath::Int8 => self.int8_bits_per_byte,
        }
    }
}

/// A declared floor: the slice must not be worse than this many bits per byte.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QualityFloor {
    pub slice: String,
    pub max_bits_per_byte: f64,
}

/// The fewest and most bits per byte an eval row or a floor may give (8 is a uniform
/// guess over bytes; a millionth of a bit per byte is no language).
pub const MIN_BITS_PER_BYTE: f64 = 1e-6;
pub const MAX_BITS_PER_BYTE: f64 = 1000.0;

/// The tiny model's eval, committed at models/decode-lab-tiny-v1/eval.json.
pub const TINY_EVAL_JSON: &str = include_str!("../../../models/decode-lab-tiny-v1/eval.json");

impl QualityProfile {
    /// From the text `decode-lab eval --json` prints. `full_precision` names the eval's
    /// full-precision path ("f32" for the tiny model); every slice needs both paths.
    pub fn from_eval_json(
        text: &str,
        full_precision: &str,
    ) -> Result<QualityProfile, CapacityError> {
        let eval: EvalReport = serde_json::from_str(text).map_err(|e| CapacityError::Quality {
            reason: format!("not the JSON of `decode-lab eval --json`: {e}"),
        })?;
        QualityProfile::from_eval(&eval, full_precision)
    }

    pub fn from_eval(
        eval: &EvalReport,
        full_precision: &str,
    ) -> Result<QualityProfile, CapacityError> {
        let mut slices: Vec<SliceQuality> = Vec::new();
        for row in &eval.slices {
            let (code, name) = match row.slice.split_once(':') {
                Some((code, name)) => (code.trim().to_string(), name.trim().to_string()),
                None => (row.slice.trim().to_string(), row.slice.trim().to_string()),
            };
            if code.is_empty() {
                return Err(CapacityError::Quality {
                    reason: format!("the row {:?} names no slice code", row.slice),
                });
            }
            in_range(
                &format!("bits per byte of slice {code:?} ({})", row.precision),
                positive(
                    &format!("bits per byte of slice {code:?} ({})", row.precision),
                    row.bits_per_byte,
                )?,
                MIN_BITS_PER_BYTE,
                MAX_BITS_PER_BYTE,
            )?;
            let index = match slices.iter().position(|s| s.slice == code) {
                Some(i) => i,
                None => {
                    slices.push(SliceQuality {
                        slice: code.clone(),
                        name,
                        full_bits_per_byte: f64::NAN,
                        int8_bits_per_byte: f64::NAN,
                    });
                    slices.len() - 1
                }
            };
            let entry = &mut slices[index];
            let figure = if row.precision == full_precision {
                &mut entry.full_bits_per_byte
            } else if row.precision == "int8" {
                &mut entry.int8_bits_per_byte
            } else {
                // Other precisions the eval may measure are not weight paths the plan serves.
                continue;
            };
            if !figure.is_nan() {
                return Err(CapacityError::Quality {
                    reason: format!(
                        "slice {code:?} has two {} rows; which one is measured is ambiguous",
                        row.precision
                    ),
                });
            }
            *figure = row.bits_per_byte;
        }
        if slices.is_empty() {
            return Err(CapacityError::Quality {
                reason: "the eval has no slices".into(),
            });
        }
        for s in &slices {
            for (path, value) in [
                (full_precision, s.full_bits_per_byte),
                ("int8", s.int8_bits_per_byte),
            ] {
                if value.is_nan() {
                    return Err(CapacityError::Quality {
                        reason: format!("slice {:?} has no {path} row", s.slice),
                    });
                }
            }
        }
        Ok(QualityProfile {
            model: eval.model.clone(),
            slices,
        })
    }

    /// The tiny model's committed eval.
    pub fn tiny() -> QualityProfile {
        // A test pins that the committed file parses; this cannot fail at run time.
        QualityProfile::from_eval_json(TINY_EVAL_JSON, "f32").unwrap_or(QualityProfile {
            model: String::new(),
            slices: Vec::new(),
        })
    }

    pub fn slice(&self, code: &str) -> Option<&SliceQuality> {
        self.slices.iter().find(|s| s.slice == code)
    }

    /// Floors that allow each slice `tolerance` (a share, 0.01 = 1 %) above its
    /// full-precision figure.
    pub fn floors_within(&self, tolerance: f64) -> Vec<QualityFloor> {
        self.slices
            .iter()
            .map(|s| QualityFloor {
                slice: s.slice.clone(),
                max_bits_per_byte: s.full_bits_per_byte * (1.0 + tolerance),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_committed_eval_carries_both_paths_and_both_slices() {
        let q = QualityProfile::from_eval_json(TINY_EVAL_JSON, "f32").unwrap();
        assert_eq!(q.model, "decode-lab-tiny-v1");
        let en = q.slice("en").unwrap();
        let eu = q.slice("eu").unwrap();
        assert!(eu.name.contains("rare"), "{}", eu.name);
        // BENCHMARKS.md: English 1.429 and Basque 2.020 bits per byte (f32).
        assert!((en.full_bits_per_byte - 1.429).abs() < 0.001);
        assert!((eu.full_bits_per_byte - 2.020).abs() < 0.001);
        assert!(en.int8_bits_per_byte > 0.0 && eu.int8_bits_per_byte > 0.0);
        assert_eq!(QualityProfile::tiny(), q);
    }

    #[test]
    fn a_missing_path_or_garbage_is_an_error() {
        let one_path = r#"{"model":"m","slices":[{"slice":"en: English","precision":"f32","tokens":1,"bytes":1,"bits_per_byte":1.5,"top1_accuracy":0.5}],"policies":[]}"#;
        let e = QualityProfile::from_eval_json(one_path, "f32").unwrap_err();
        assert_eq!(
            e.to_string(),
            "quality profile: slice \"en\" has no int8 row"
        );
        assert!(QualityProfile::from_eval_json("[1,2]", "f32").is_err());
    }
}
