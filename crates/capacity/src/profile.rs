//! What is served and on what: accelerator and model profiles, their presets, and the
//! lab's KV-cache estimate `2 · L · B · S · H_kv · d_head · q` bytes.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::{at_least_one, in_range, non_negative, positive, CapacityError};

/// One accelerator: datasheet peaks, how much of them a serving engine achieves, and price.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HardwareProfile {
    pub name: String,
    /// Device memory, bytes.
    pub memory_bytes: f64,
    /// Peak memory bandwidth, bytes per second.
    pub bandwidth_bytes_per_s: f64,
    /// Peak dense FLOP/s at the weights' compute precision.
    pub peak_flops: f64,
    /// Share of `peak_flops` a prefill achieves (model FLOPs utilisation), in (0, 1].
    pub flops_efficiency: f64,
    /// Share of the bandwidth a decode step achieves, in (0, 1].
    pub bandwidth_efficiency: f64,
    /// Fixed cost of one iteration (kernel launches, scheduling, sampling), seconds.
    pub iteration_overhead_s: f64,
    /// Share of memory kept free for activations and the allocator, in [0, 1).
    pub memory_reserve: f64,
    /// Price of one accelerator-hour, in the currency of the plan.
    pub cost_per_hour: f64,
}

impl HardwareProfile {
    /// FLOP/s the roofline uses.
    pub fn effective_flops(&self) -> f64 {
        self.peak_flops * self.flops_efficiency
    }

    /// Bytes per second the roofline uses.
    pub fn effective_bandwidth(&self) -> f64 {
        self.bandwidth_bytes_per_s * self.bandwidth_efficiency
    }

    pub fn validate(&self) -> Result<(), CapacityError> {
        positive("memory size (bytes)", self.memory_bytes)?;
        positive("memory bandwidth (bytes/s)", self.bandwidth_bytes_per_s)?;
        positive("peak FLOP/s", self.peak_flops)?;
        in_range(
            "FLOP/s efficiency",
            positive("FLOP/s efficiency", self.flops_efficiency)?,
            0.0,
            1.0,
        )?;
        in_range(
            "bandwidth efficiency",
            positive("bandwidth efficiency", self.bandwidth_efficiency)?,
            0.0,
            1.0,
        )?;
        non_negative("per-iteration overhead (s)", self.iteration_overhead_s)?;
        in_range("memory reserve", self.memory_reserve, 0.0, 0.99)?;
        non_negative("cost per hour", self.cost_per_hour)?;
        Ok(())
    }

    /// Well-known accelerators (datasheet dense figures; prices are illustrative on-demand
    /// rates to be edited) and the lab's own CPU, whose effective figures come from
    /// [`crate::Calibration::lab_cpu`].
    pub fn presets() -> Vec<HardwareProfile> {
        let gpu = |name: &str, gib: f64, tb_s: f64, tflops: f64, cost: f64| HardwareProfile {
            name: name.into(),
            memory_bytes: gib * GIB,
            bandwidth_bytes_per_s: tb_s * 1e12,
            peak_flops: tflops * 1e12,
            flops_efficiency: 0.5,
            bandwidth_efficiency: 0.8,
            iteration_overhead_s: 1e-3,
            memory_reserve: 0.1,
            cost_per_hour: cost,
        };
        vec![
            gpu("a100-80gb", 80.0, 2.039, 312.0, 2.0),
            gpu("h100-sxm", 80.0, 3.35, 989.0, 3.5),
            gpu("h200", 141.0, 4.8, 989.0, 4.5),
            gpu("l4", 24.0, 0.3, 121.0, 0.8),
            // 2 vCPU AMD EPYC of BENCHMARKS.md; the efficiencies are 1 because the peaks are
            // the calibrated effective figures of `Calibration::lab_cpu` (rounded).
            HardwareProfile {
                name: "lab-cpu".into(),
                memory_bytes: 24.0 * GIB,
                bandwidth_bytes_per_s: 60e9,
                peak_flops: 100e9,
                flops_efficiency: 1.0,
                bandwidth_efficiency: 1.0,
                iteration_overhead_s: 10e-6,
                memory_reserve: 0.1,
                cost_per_hour: 0.1,
            },
        ]
    }

    pub fn preset(name: &str) -> Result<HardwareProfile, CapacityError> {
        preset("hardware", name, HardwareProfile::presets(), |p| &p.name)
    }
}

pub(crate) const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// The preset of `kind` named `name` among `all`, or an error that lists the known names.
pub(crate) fn preset<T>(
    kind: &str,
    name: &str,
    all: Vec<T>,
    name_of: fn(&T) -> &String,
) -> Result<T, CapacityError> {
    let known = all
        .iter()
        .map(|p| name_of(p).as_str())
        .collect::<Vec<_>>()
        .join(", ");
    all.into_iter()
        .find(|p| name_of(p) == name)
        .ok_or_else(|| CapacityError::UnknownPreset {
            kind: kind.into(),
            name: name.into(),
            known,
        })
}

/// Which copy of the weights is served.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WeightPath {
    /// The model's full-precision weights (`ModelProfile::full_precision`: f16, or f32 for
    /// the lab's tiny model).
    Full,
    /// Int8 weights with one scale per output row.
    Int8,
}

impl WeightPath {
    /// The names [`WeightPath::from_str`] reads, for messages.
    pub const EXPECTED: &'static str = "full or int8";

    /// `full` or `int8`: the name the report prints and a user types.
    pub fn name(self) -> &'static str {
        match self {
            WeightPath::Full => "full",
            WeightPath::Int8 => "int8",
        }
    }
}

impl fmt::Display for WeightPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for WeightPath {
    type Err = CapacityError;

    fn from_str(text: &str) -> Result<WeightPath, CapacityError> {
        [WeightPath::Full, WeightPath::Int8]
            .into_iter()
            .find(|w| w.name() == text)
            .ok_or_else(|| CapacityError::UnknownName {
                kind: "weight path".into(),
                name: text.into(),
                expected: WeightPath::EXPECTED.into(),
            })
    }
}

/// A decoder-only transformer's shapes, as the roofline and the KV cache need them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelProfile {
    pub name: String,
    /// Parameters, all of them (embeddings included).
    pub parameters: f64,
    pub layers: u32,
    pub heads: u32,
    pub kv_heads: u32,
    pub head_dim: u32,
    /// Longest sequence (prompt + output), tokens.
    pub context_len: u32,
    /// Name of the full-precision path as the quality profile spells it ("f16", "f32").
    pub full_precision: String,
    /// Bytes per weight of the full-precision path.
    pub full_bytes_per_weight: f64,
    /// Bytes per weight of the int8 path (1 plus the share of the row scales).
    pub int8_bytes_per_weight: f64,
    /// Bytes per cached key or value scalar (q of the estimate).
    pub kv_bytes_per_scalar: f64,
}

impl ModelProfile {
    pub fn validate(&self) -> Result<(), CapacityError> {
        positive("parameters", self.parameters)?;
        at_least_one("layers", self.layers as u64)?;
        at_least_one("heads", self.heads as u64)?;
        at_least_one("KV heads", self.kv_heads as u64)?;
        at_least_one("head dimension", self.head_dim as u64)?;
        at_least_one("context length", self.context_len as u64)?;
        if self.kv_heads > self.heads || !self.heads.is_multiple_of(self.kv_heads) {
            return Err(CapacityError::OutOfRange {
                what: format!("KV heads (a divisor of the {} query heads)", self.heads),
                value: self.kv_heads as f64,
                min: 1.0,
                max: self.heads as f64,
            });
        }
        positive(
            "full-precision bytes per weight",
            self.full_bytes_per_weight,
        )?;
        positive("int8 bytes per weight", self.int8_bytes_per_weight)?;
        positive("KV bytes per scalar", self.kv_bytes_per_scalar)?;
        Ok(())
    }

    /// A weight path as the quality profile names it: the full-precision path's own name
    /// (`f16`, `f32`) or `int8`.
    pub fn precision(&self, weights: WeightPath) -> &str {
        match weights {
            WeightPath::Full => &self.full_precision,
            WeightPath::Int8 => "int8",
        }
    }

    pub fn bytes_per_weight(&self, weights: WeightPath) -> f64 {
        match weights {
            WeightPath::Full => self.full_bytes_per_weight,
            WeightPath::Int8 => self.int8_bytes_per_weight,
        }
    }

    /// Bytes of the weights on the given path.
    pub fn weight_bytes(&self, weights: WeightPath) -> f64 {
        self.parameters * self.bytes_per_weight(weights)
    }

    /// KV-cache bytes of one cached token: `2 · L · H_kv · d_head · q`.
    pub fn kv_bytes_per_token(&self) -> f64 {
        2.0 * self.layers as f64
            * self.kv_heads as f64
            * self.head_dim as f64
            * self.kv_bytes_per_scalar
    }

    /// The lab's KV-cache estimate: `2 · L · B · S · H_kv · d_head · q` bytes for `batch`
    /// sequences of `tokens` cached tokens each.
    pub fn kv_cache_bytes(&self, batch: u64, tokens: u64) -> f64 {
        batch as f64 * tokens as f64 * self.kv_bytes_per_token()
    }

    /// FLOPs of attention (scores and weighted sum) for one query token against `context`
    /// cached positions: `4 · L · H · d_head · context`.
    pub fn attention_flops_per_context(&self) -> f64 {
        4.0 * self.layers as f64 * self.heads as f64 * self.head_dim as f64
    }

    /// The lab's tiny model (models/decode-lab-tiny-v1/config.json) and published shapes.
    pub fn presets() -> Vec<ModelProfile> {
        let llama = |name: &str, params: f64, layers, heads, kv_heads, ctx| ModelProfile {
            name: name.into(),
            parameters: params,
            layers,
            heads,
            kv_heads,
            head_dim: 128,
            context_len: ctx,
            full_precision: "f16".into(),
            full_bytes_per_weight: 2.0,
            int8_bytes_per_weight: 1.0,
            kv_bytes_per_scalar: 2.0,
        };
        vec![
            ModelProfile::tiny(),
            llama("llama-2-7b", 6.74e9, 32, 32, 32, 4096),
            llama("llama-2-13b", 13.0e9, 40, 40, 40, 4096),
            llama("llama-3-8b", 8.03e9, 32, 32, 8, 8192),
            llama("mistral-7b", 7.24e9, 32, 32, 8, 8192),
        ]
    }

    /// decode-lab-tiny-v1: d_model 128, 4 layers, 4 heads, 2 KV heads, d_ff 352, vocabulary
    /// 768, tied embeddings, context 256; f32 weights and an f32 KV cache (as `model` runs
    /// it); int8 rows carry one f32 scale each.
    pub fn tiny() -> ModelProfile {
        let (d, layers, ff, vocab) = (128.0, 4.0, 352.0, 768.0);
        let kv_dim = 2.0 * 32.0;
        let per_layer = 2.0 * d * d + 2.0 * d * kv_dim + 3.0 * d * ff + 2.0 * d;
        let parameters = vocab * d + layers * per_layer + d;
        ModelProfile {
            name: "decode-lab-tiny-v1".into(),
            parameters,
            layers: 4,
            heads: 4,
            kv_heads: 2,
            head_dim: 32,
            context_len: 256,
            full_precision: "f32".into(),
            full_bytes_per_weight: 4.0,
            // One f32 scale per output row of 128 inputs (or 352 for the down projection):
            // about 4 / 128 bytes per weight on top of the byte.
            int8_bytes_per_weight: 1.0 + 4.0 / d,
            kv_bytes_per_scalar: 4.0,
        }
    }

    pub fn preset(name: &str) -> Result<ModelProfile, CapacityError> {
        preset("model", name, ModelProfile::presets(), |p| &p.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiny_model_has_the_trained_parameter_count() {
        // models/decode-lab-tiny-v1/report.md: 836,736 parameters.
        assert_eq!(ModelProfile::tiny().parameters, 836_736.0);
    }

    #[test]
    fn kv_estimate_matches_a_hand_count_for_llama_2_7b() {
        // 2 (K and V) · 32 layers · 32 heads · 128 dims · 2 bytes = 512 KiB per token.
        let m = ModelProfile::preset("llama-2-7b").unwrap();
        assert_eq!(m.kv_bytes_per_token(), 524_288.0);
        assert_eq!(m.kv_cache_bytes(4, 4096), 4.0 * 4096.0 * 524_288.0);
        // Grouped-query attention: 8 KV heads, a quarter of that (128 KiB per token), so
        // 4096 tokens of Llama-3-8B or Mistral-7B in f16 are exactly 512 MiB.
        for name in ["llama-3-8b", "mistral-7b"] {
            let m = ModelProfile::preset(name).unwrap();
            assert_eq!(m.kv_bytes_per_token(), (2 * 32 * 8 * 128 * 2) as f64);
            assert_eq!(m.kv_cache_bytes(1, 4096), (512u64 << 20) as f64);
        }
    }

    #[test]
    fn presets_are_valid_and_unknown_names_say_what_is_known() {
        for h in HardwareProfile::presets() {
            h.validate().unwrap();
        }
        for m in ModelProfile::presets() {
            m.validate().unwrap();
        }
        let e = HardwareProfile::preset("tpu").unwrap_err().to_string();
        assert!(e.contains("\"tpu\"") && e.contains("a100-80gb"), "{e}");
    }

    #[test]
    fn weight_paths_read_back_what_they_print() {
        for w in [WeightPath::Full, WeightPath::Int8] {
            assert_eq!(w.to_string().parse::<WeightPath>(), Ok(w));
        }
        assert_eq!(
            "fp16".parse::<WeightPath>().unwrap_err().to_string(),
            "unknown weight path \"fp16\"; expected full or int8"
        );
        // Names are exact: the CLI and the lab trim, not the parser.
        assert!(" full".parse::<WeightPath>().is_err());
    }
}
