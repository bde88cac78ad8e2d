//! The cost model: one iteration's time from a roofline (prefill compute-bound, decode bound
//! by the bytes of weights and KV cache read, plus a fixed overhead), and its calibration to
//! measured timings by weighted least squares.

use serde::{Deserialize, Serialize};

use crate::error::{positive, CapacityError};
use crate::profile::{HardwareProfile, ModelProfile, WeightPath};

/// The work of one iteration, summed over the sequences it runs.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct IterationWork {
    /// Query tokens run through the weights (prefill chunk tokens plus one per decode).
    pub tokens: f64,
    /// Sum over query tokens of the positions each attends to.
    pub attention_context: f64,
    /// Cached tokens read from the KV cache.
    pub kv_read: f64,
    /// Tokens written to the KV cache.
    pub kv_written: f64,
}

impl IterationWork {
    /// A prefill chunk of `chunk` tokens after `start` cached ones.
    pub fn prefill(start: f64, chunk: f64) -> IterationWork {
        IterationWork {
            tokens: chunk,
            attention_context: chunk * start + chunk * (chunk + 1.0) / 2.0,
            kv_read: start,
            kv_written: chunk,
        }
    }

    /// One decode step with `cached` tokens in the cache.
    pub fn decode(cached: f64) -> IterationWork {
        IterationWork {
            tokens: 1.0,
            attention_context: cached + 1.0,
            kv_read: cached,
            kv_written: 1.0,
        }
    }

    pub fn add(&mut self, other: IterationWork) {
        self.tokens += other.tokens;
        self.attention_context += other.attention_context;
        self.kv_read += other.kv_read;
        self.kv_written += other.kv_written;
    }
}

/// One iteration's time split the way the bottleneck report splits it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct IterationCost {
    /// FLOPs over the effective FLOP/s.
    pub compute_s: f64,
    /// Bytes moved over the effective bandwidth.
    pub memory_s: f64,
    pub overhead_s: f64,
}

impl IterationCost {
    /// The roofline: the slower of compute and memory traffic, plus the overhead.
    pub fn time_s(&self) -> f64 {
        self.compute_s.max(self.memory_s) + self.overhead_s
    }
}

/// How attention's memory traffic is priced.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Attention {
    /// FlashAttention's fused kernel: the score matrix never reaches memory; each
    /// sequence's cached K and V are read once per iteration and its new tokens' written
    /// once. That is FlashAttention's traffic for a chunk within one query block (every
    /// decode step, and prompt chunks up to its 128 queries); a longer chunk re-reads K
    /// and V once per further block, which is not counted (such a chunk is compute-bound).
    #[default]
    Fused,
    /// Attention as three kernels: the scores S = QKᵀ written, read by the softmax, its P
    /// written, read by PV (four passes of 2-byte scores per query, position, head and
    /// layer), and the chunk's own K and V read back from memory.
    Naive,
}

impl Attention {
    pub const EXPECTED: &'static str = "fused or naive";

    pub fn name(self) -> &'static str {
        match self {
            Attention::Fused => "fused",
            Attention::Naive => "naive",
        }
    }
}

impl std::str::FromStr for Attention {
    type Err = CapacityError;

    fn from_str(s: &str) -> Result<Attention, CapacityError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "fused" => Ok(Attention::Fused),
            "naive" => Ok(Attention::Naive),
            _ => Err(CapacityError::UnknownName {
                kind: "attention".into(),
                name: s.into(),
                expected: Attention::EXPECTED.into(),
            }),
        }
    }
}

/// Bytes of one attention score (fp16), and the passes over the score matrix of naive
/// attention (S written and read, P written and read).
const SCORE_BYTES: f64 = 2.0;
const SCORE_PASSES: f64 = 4.0;

/// The roofline of one model on one accelerator with one weight path.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Roofline {
    pub flops_per_s: f64,
    pub bytes_per_s: f64,
    pub overhead_s: f64,
    /// FLOPs per token through the weights: 2 · parameters.
    pub flops_per_token: f64,
    pub attention_flops_per_context: f64,
    pub weight_bytes: f64,
    pub kv_bytes_per_token: f64,
    pub attention: Attention,
    /// Naive attention's score traffic per query and attended position: passes × bytes ×
    /// layers × heads.
    pub score_bytes_per_context: f64,
}

impl Roofline {
    pub fn new(hardware: &HardwareProfile, model: &ModelProfile, weights: WeightPath) -> Roofline {
        Roofline {
            flops_per_s: hardware.effective_flops(),
            bytes_per_s: hardware.effective_bandwidth(),
            overhead_s: hardware.iteration_overhead_s,
            ..Roofline::at_unit_rates(model, weights)
        }
    }

    /// The roofline at 1 FLOP/s and 1 byte/s and no overhead: its times are its FLOPs and
    /// bytes, the calibration's regressors. Attention fused.
    fn at_unit_rates(model: &ModelProfile, weights: WeightPath) -> Roofline {
        Roofline {
            flops_per_s: 1.0,
            bytes_per_s: 1.0,
            overhead_s: 0.0,
            flops_per_token: 2.0 * model.parameters,
            attention_flops_per_context: model.attention_flops_per_context(),
            weight_bytes: model.weight_bytes(weights),
            kv_bytes_per_token: model.kv_bytes_per_token(),
            attention: Attention::Fused,
            score_bytes_per_context: SCORE_PASSES
                * SCORE_BYTES
                * model.layers as f64
                * model.heads as f64,
        }
    }

    /// The same roofline with attention priced as `attention`.
    pub fn with_attention(self, attention: Attention) -> Roofline {
        Roofline { attention, ..self }
    }

    pub fn flops(&self, work: &IterationWork) -> f64 {
        self.flops_per_token * work.tokens
            + self.attention_flops_per_context * work.attention_context
    }

    /// Every weight once per iteration, plus the KV cache read and written, plus (naive
    /// attention) the score matrix's passes and the chunk's K and V read back.
    pub fn bytes(&self, work: &IterationWork) -> f64 {
        let kv = self.weight_bytes + self.kv_bytes_per_token * (work.kv_read + work.kv_written);
        match self.attention {
            Attention::Fused => kv,
            Attention::Naive => {
                kv + self.kv_bytes_per_token * work.kv_written
                    + self.score_bytes_per_context * work.attention_context
            }
        }
    }

    pub fn cost(&self, work: &IterationWork) -> IterationCost {
        IterationCost {
            compute_s: self.flops(work) / self.flops_per_s,
            memory_s: self.bytes(work) / self.bytes_per_s,
            overhead_s: self.overhead_s,
        }
    }
}

/// What was timed.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Phase {
    /// A prefill of `tokens` prompt tokens into an empty cache.
    Prefill { tokens: u32 },
    /// One decode step at `position` (that many tokens already cached).
    Decode { position: u32 },
}

impl Phase {
    fn work(self) -> IterationWork {
        match self {
            Phase::Prefill { tokens } => IterationWork::prefill(0.0, tokens as f64),
            Phase::Decode { position } => IterationWork::decode(position as f64),
        }
    }
}

/// One measured timing: a forward pass of one sequence.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MeasuredPoint {
    pub phase: Phase,
    pub weights: WeightPath,
    pub seconds: f64,
}

/// Measured timings of one model on one machine.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// Where the figures come from.
    pub source: String,
    pub points: Vec<MeasuredPoint>,
}

/// One point of the fit and how far the fitted roofline misses it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Residual {
    pub phase: Phase,
    pub weights: WeightPath,
    pub measured_s: f64,
    pub predicted_s: f64,
    /// (predicted - measured) / measured.
    pub relative_error: f64,
    /// "compute" or "memory": which roof the fit puts the point under.
    pub bound: String,
}

/// The fitted effective FLOP/s, bandwidth and per-iteration overhead of one weight path,
/// and its residuals.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PathFit {
    pub weights: WeightPath,
    pub flops_per_s: f64,
    pub bytes_per_s: f64,
    pub overhead_s: f64,
    pub residuals: Vec<Residual>,
    /// Root mean square of the relative errors.
    pub rms_relative_error: f64,
}

/// One fit per weight path measured: the int8 path runs different kernels (on the lab CPU
/// its dequantisation costs compute), so it gets its own effective rates.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CalibrationFit {
    pub source: String,
    pub paths: Vec<PathFit>,
}

impl Calibration {
    /// The calibration measured for `model` on `hardware`, if there is one: the lab CPU's
    /// own timings of the tiny model ([`Calibration::lab_cpu`]) for that pair, none for any
    /// other (those timings say nothing of another machine or model). The lab's default
    /// plan, the CLI and the lab's panel all take it from here.
    pub fn measured_for(hardware: &HardwareProfile, model: &ModelProfile) -> Option<Calibration> {
        (hardware.name == "lab-cpu" && model.name == ModelProfile::tiny().name)
            .then(Calibration::lab_cpu)
    }

    /// The lab's own forward-pass timings of decode-lab-tiny-v1 on its 2-vCPU EPYC
    /// (BENCHMARKS.md, "The tiny model's forward pass on the CPU", criterion medians).
    pub fn lab_cpu() -> Calibration {
        let prefill = |tokens| Phase::Prefill { tokens };
        let decode = |position| Phase::Decode { position };
        let phases = [
            prefill(16),
            prefill(64),
            prefill(256),
            decode(1),
            decode(128),
            decode(255),
        ];
        // The medians in seconds, one per phase above, of each weight path.
        let full = [0.300e-3, 1.02e-3, 4.24e-3, 59.7e-6, 90.2e-6, 113e-6];
        let int8 = [0.390e-3, 1.26e-3, 5.23e-3, 69.3e-6, 93.0e-6, 109e-6];
        let points = |weights, medians: [f64; 6]| {
            phases
                .into_iter()
                .zip(medians)
                .map(move |(phase, seconds)| MeasuredPoint {
                    phase,
                    weights,
                    seconds,
                })
        };
        Calibration {
            source: "BENCHMARKS.md: the tiny model's forward pass on the lab CPU (2 vCPU AMD EPYC)"
                .into(),
            points: points(WeightPath::Full, full)
                .chain(points(WeightPath::Int8, int8))
                .collect(),
        }
    }

    /// Fits `t = overhead + max(FLOPs / F, bytes / B)` to the points, minimising the sum
    /// of squared relative errors. Each point lies under one roof; every split of the
    /// points between the two roofs is solved as a linear least-squares problem in
    /// (1/F, 1/B, overhead), and the best split that is consistent (each point really
    /// under the roof it was given) wins: the global optimum, for up to 16 points.
    pub fn fit(&self, model: &ModelProfile) -> Result<CalibrationFit, CapacityError> {
        let mut paths = Vec::new();
        for weights in [WeightPath::Full, WeightPath::Int8] {
            let points: Vec<&MeasuredPoint> = self
                .points
                .iter()
                .filter(|p| p.weights == weights)
                .collect();
            if !points.is_empty() {
                paths.push(fit_path(model, weights, &points)?);
            }
        }
        if paths.is_empty() {
            return Err(CapacityError::Calibration {
                reason: "no measured points".into(),
            });
        }
        Ok(CalibrationFit {
            source: self.source.clone(),
            paths,
        })
    }
}

/// Fits one weight path's points (see [`Calibration::fit`]).
fn fit_path(
    model: &ModelProfile,
    weights: WeightPath,
    points: &[&MeasuredPoint],
) -> Result<PathFit, CapacityError> {
    let n = points.len();
    if !(3..=16).contains(&n) {
        return Err(CapacityError::Calibration {
            reason: format!(
                "needs 3 to 16 measured points per weight path, got {n} for {}",
                weights.name()
            ),
        });
    }
    let mut rows = Vec::with_capacity(n);
    for p in points {
        positive("measured time (s)", p.seconds)?;
        let unit = Roofline::at_unit_rates(model, p.weights);
        let work = p.phase.work();
        rows.push((unit.flops(&work), unit.bytes(&work), p.seconds));
    }
    let mut best: Option<(f64, [f64; 3], u32)> = None;
    for split in 1u32..(1u32 << n) - 1 {
        let compute = |i: usize| split & (1 << i) != 0;
        // Weighted by 1 / t², so the error is relative.
        let design = |i: usize| {
            let (f, b, t) = rows[i];
            let x = if compute(i) {
                [f, 0.0, 1.0]
            } else {
                [0.0, b, 1.0]
            };
            (x.map(|v| v / t), 1.0)
        };
        let mut solution = None;
        for with_overhead in [true, false] {
            let dims = if with_overhead { 3 } else { 2 };
            if let Some(s) = least_squares(n, dims, &design) {
                if s[0] > 0.0 && s[1] > 0.0 && s[2] >= 0.0 {
                    solution = Some(s);
                    break;
                }
            }
        }
        let Some(s) = solution else { continue };
        let consistent = (0..n).all(|i| {
            let (f, b, _) = rows[i];
            (s[0] * f >= s[1] * b) == compute(i)
        });
        if !consistent {
            continue;
        }
        let sse: f64 = rows
            .iter()
            .map(|&(f, b, t)| ((s[2] + (s[0] * f).max(s[1] * b)) / t - 1.0).powi(2))
            .sum();
        if best.is_none_or(|(e, _, _)| sse < e) {
            best = Some((sse, s, split));
        }
    }
    let Some((sse, s, split)) = best else {
        return Err(CapacityError::Calibration {
                reason: "no split of the points between the compute and memory roofs fits with positive rates; time prefills and decode steps of several lengths".into(),
            });
    };
    let residuals = points
        .iter()
        .zip(&rows)
        .enumerate()
        .map(|(i, (p, &(f, b, t)))| {
            let predicted = s[2] + (s[0] * f).max(s[1] * b);
            Residual {
                phase: p.phase,
                weights: p.weights,
                measured_s: t,
                predicted_s: predicted,
                relative_error: predicted / t - 1.0,
                bound: if split & (1 << i) != 0 {
                    "compute"
                } else {
                    "memory"
                }
                .into(),
            }
        })
        .collect();
    Ok(PathFit {
        weights,
        flops_per_s: 1.0 / s[0],
        bytes_per_s: 1.0 / s[1],
        overhead_s: s[2],
        residuals,
        rms_relative_error: (sse / n as f64).sqrt(),
    })
}

impl CalibrationFit {
    /// The hardware with its effective figures replaced by the fit of `weights` (or of the
    /// other path, when only one was measured: the rates are the machine's, the bytes per
    /// weight stay the path's own).
    pub fn apply(&self, hardware: &HardwareProfile, weights: WeightPath) -> HardwareProfile {
        let fit = self
            .paths
            .iter()
            .find(|p| p.weights == weights)
            .unwrap_or(&self.paths[0]);
        HardwareProfile {
            name: format!("{} (calibrated)", hardware.name),
            peak_flops: fit.flops_per_s,
            flops_efficiency: 1.0,
            bandwidth_bytes_per_s: fit.bytes_per_s,
            bandwidth_efficiency: 1.0,
            iteration_overhead_s: fit.overhead_s,
            ..hardware.clone()
        }
    }
}

/// Solves min Σ (x_i · s − y_i)² over the first `dims` coordinates (the rest are 0) by the
/// normal equations; `row(i)` gives (x_i, y_i). None when singular.
fn least_squares(
    n: usize,
    dims: usize,
    row: &dyn Fn(usize) -> ([f64; 3], f64),
) -> Option<[f64; 3]> {
    let mut a = [[0.0f64; 4]; 3];
    for i in 0..n {
        let (x, y) = row(i);
        for r in 0..dims {
            for c in 0..dims {
                a[r][c] += x[r] * x[c];
            }
            a[r][3] += x[r] * y;
        }
    }
    // Gaussian elimination with partial pivoting on the dims × dims system.
    for col in 0..dims {
        let pivot = (col..dims).max_by(|&p, &q| a[p][col].abs().total_cmp(&a[q][col].abs()))?;
        if a[pivot][col].abs() < 1e-300 {
            return None;
        }
        a.swap(col, pivot);
        let pivot_row = a[col];
        for (r, row) in a.iter_mut().enumerate().take(dims) {
            if r != col {
                let factor = row[col] / pivot_row[col];
                for (v, p) in row.iter_mut().zip(pivot_row).skip(col) {
                    *v -= factor * p;
                }
            }
        }
    }
    let mut s = [0.0; 3];
    for r in 0..dims {
        s[r] = a[r][3] / a[r][r];
        if !s[r].is_finite() {
            return None;
        }
    }
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_tiny_model_on_the_lab_cpu_is_calibrated() {
        let lab_cpu = HardwareProfile::preset("lab-cpu").unwrap();
        let tiny = ModelProfile::tiny();
        assert_eq!(
            Calibration::measured_for(&lab_cpu, &tiny),
            Some(Calibration::lab_cpu())
        );
        let h100 = HardwareProfile::preset("h100-sxm").unwrap();
        let llama = ModelProfile::preset("llama-2-7b").unwrap();
        assert_eq!(Calibration::measured_for(&h100, &tiny), None);
        assert_eq!(Calibration::measured_for(&lab_cpu, &llama), None);
    }

    #[test]
    fn the_fit_recovers_a_known_roofline_exactly() {
        let model = ModelProfile::preset("llama-2-7b").unwrap();
        let truth = HardwareProfile {
            peak_flops: 200e12,
            flops_efficiency: 1.0,
            bandwidth_bytes_per_s: 1.5e12,
            bandwidth_efficiency: 1.0,
            iteration_overhead_s: 2e-3,
            ..HardwareProfile::preset("a100-80gb").unwrap()
        };
        let roof = Roofline::new(&truth, &model, WeightPath::Full);
        let phases = [
            Phase::Prefill { tokens: 512 },
            Phase::Prefill { tokens: 2048 },
            Phase::Prefill { tokens: 4000 },
            Phase::Decode { position: 1 },
            Phase::Decode { position: 2000 },
            Phase::Decode { position: 4000 },
        ];
        let calibration = Calibration {
            source: "synthetic".into(),
            points: phases
                .iter()
                .map(|&phase| MeasuredPoint {
                    phase,
                    weights: WeightPath::Full,
                    seconds: roof.cost(&phase.work()).time_s(),
                })
                .collect(),
        };
        let fit = calibration.fit(&model).unwrap();
        assert_eq!(fit.paths.len(), 1);
        let fit = &fit.paths[0];
        assert!(
            (fit.flops_per_s / 200e12 - 1.0).abs() < 1e-9,
            "{}",
            fit.flops_per_s
        );
        assert!(
            (fit.bytes_per_s / 1.5e12 - 1.0).abs() < 1e-9,
            "{}",
            fit.bytes_per_s
        );
        assert!(
            (fit.overhead_s / 2e-3 - 1.0).abs() < 1e-9,
            "{}",
            fit.overhead_s
        );
        assert!(fit.rms_relative_error < 1e-9);
        assert_eq!(fit.residuals[0].bound, "compute");
        assert_eq!(fit.residuals[3].bound, "memory");
    }

    #[test]
    fn the_lab_cpu_fit_is_reported_with_its_residuals() {
        let fit = Calibration::lab_cpu().fit(&ModelProfile::tiny()).unwrap();
        assert_eq!(fit.paths.len(), 2);
        for path in &fit.paths {
            assert_eq!(path.residuals.len(), 6);
            // Long prefills are compute-bound on the CPU and decode steps memory-bound.
            assert_eq!(path.residuals[2].bound, "compute", "{path:?}");
            assert_eq!(path.residuals[3].bound, "memory", "{path:?}");
            assert!(path.rms_relative_error < 0.3, "{path:?}");
        }
    }

    #[test]
    fn too_few_points_or_a_non_positive_time_are_errors() {
        let mut c = Calibration::lab_cpu();
        c.points.truncate(2);
        assert!(matches!(
            c.fit(&ModelProfile::tiny()),
            Err(CapacityError::Calibration { .. })
        ));
        let mut c = Calibration::lab_cpu();
        c.points[1].seconds = -1.0;
        assert_eq!(
            c.fit(&ModelProfile::tiny()).unwrap_err().to_string(),
            "measured time (s) must be a finite number above zero, got -1"
        );
    }
}
