//! The model's tensors: read from and written to safetensors, in f32 or as int8 with one
//! f32 scale per output row.
//!
//! Names (PyTorch `nn.Linear` layout, `[out, in]`): `embed.weight` `[vocab, d]` (tied: it
//! also projects to the logits), per layer `layers.{i}.attn_norm.weight`,
//! `layers.{i}.attn.{q,k,v,o}.weight`, `layers.{i}.mlp_norm.weight`,
//! `layers.{i}.mlp.{gate,up,down}.weight`, then `norm.weight`. An int8 file stores each
//! matrix as I8 `X.weight` plus F32 `X.scale` `[out]`; norm weights stay f32.

use std::collections::HashMap;

use safetensors::tensor::{Dtype, SafeTensors, TensorView};

use crate::simd::{finish, Lanes, Portable};
use crate::{ModelConfig, ModelError};

pub use policy::Precision;

/// A `[rows, cols]` weight matrix, row-major.
#[derive(Clone, Debug, PartialEq)]
pub enum Linear {
    F32 {
        rows: usize,
        cols: usize,
        data: Vec<f32>,
    },
    Int8 {
        rows: usize,
        cols: usize,
        data: Vec<i8>,
        scales: Vec<f32>,
    },
}

impl Linear {
    pub fn rows(&self) -> usize {
        match self {
            Linear::F32 { rows, .. } | Linear::Int8 { rows, .. } => *rows,
        }
    }

    pub fn cols(&self) -> usize {
        match self {
            Linear::F32 { cols, .. } | Linear::Int8 { cols, .. } => *cols,
        }
    }

    /// How this matrix is stored.
    pub fn precision(&self) -> Precision {
        match self {
            Linear::F32 { .. } => Precision::F32,
            Linear::Int8 { .. } => Precision::Int8,
        }
    }

    /// `out[r] = row_r · x` for every row: [`matmul`](Self::matmul) of one position.
    pub fn matvec(&self, x: &[f32], out: &mut [f32]) {
        self.matmul(x, out);
    }

    /// `out[t][r] = row_r · xs[t]` for a block of positions (`xs` is `[n][cols]`, `out`
    /// `[n][rows]`). Tiles of four positions by two rows share their loads; every sum is
    /// formed in the same order as [`row_dot`](Self::row_dot) whatever the tile, so a
    /// position gets the same bits in a block of any size (prefill) as alone (decode).
    pub fn matmul(&self, xs: &[f32], out: &mut [f32]) {
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx") {
            // SAFETY: the CPU has AVX, checked just above.
            return unsafe { self.matmul_avx(xs, out) };
        }
        self.matmul_portable(xs, out);
    }

    /// `matmul` over AVX lanes: the same operations in the same order (no FMA), so the
    /// results are bit-identical to the portable path, twice as wide as SSE2.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx")]
    unsafe fn matmul_avx(&self, xs: &[f32], out: &mut [f32]) {
        self.matmul_with::<Portable>(xs, out);
    }

    fn matmul_portable(&self, xs: &[f32], out: &mut [f32]) {
        self.matmul_with::<Portable>(xs, out);
    }

    #[inline(always)]
    fn matmul_with<V: Lanes>(&self, xs: &[f32], out: &mut [f32]) {
        match self {
            Linear::F32 { rows, cols, data } => gemm::<V, f32>(data, None, *rows, *cols, xs, out),
            Linear::Int8 {
                rows,
                cols,
                data,
                scales,
            } => gemm::<V, i8>(data, Some(scales), *rows, *cols, xs, out),
        }
    }

    /// One row of the matrix times `x`.
    #[inline(always)]
    pub fn row_dot(&self, r: usize, x: &[f32]) -> f32 {
        match self {
            Linear::F32 { cols, data, .. } => dot(&data[r * cols..(r + 1) * cols], x),
            Linear::Int8 {
                cols, data, scales, ..
            } => scales[r] * dot_i8(&data[r * cols..(r + 1) * cols], x),
        }
    }

    /// Row `r` as f32 values (an embedding lookup).
    pub fn row(&self, r: usize, out: &mut [f32]) {
        match self {
            Linear::F32 { cols, data, .. } => out.copy_from_slice(&data[r * cols..(r + 1) * cols]),
            Linear::Int8 {
                cols, data, scales, ..
            } => {
                for (o, &q) in out.iter_mut().zip(&data[r * cols..(r + 1) * cols]) {
                    *o = scales[r] * f32::from(q);
                }
            }
        }
    }

    /// The symmetric per-row int8 copy of an f32 matrix (an int8 matrix is returned as is).
    pub fn quantized(&self) -> Linear {
        match self {
            Linear::F32 { rows, cols, data } => {
                let mut q = Vec::with_capacity(data.len());
                let mut scales = Vec::with_capacity(*rows);
                for row in data.chunks_exact(*cols) {
                    let max = row.iter().fold(0.0f32, |m, &w| m.max(w.abs()));
                    // A row too small for its scale to be a positive f32 is stored as zeros
                    // with scale 1, like an all-zero row: a loader rejects scales <= 0.
                    let scale = max / 127.0;
                    let scale = if scale > 0.0 { scale } else { 1.0 };
                    scales.push(scale);
                    q.extend(
                        row.iter()
                            .map(|&w| (w / scale).round().clamp(-127.0, 127.0) as i8),
                    );
                }
                Linear::Int8 {
                    rows: *rows,
                    cols: *cols,
                    data: q,
                    scales,
                }
            }
            int8 => int8.clone(),
        }
    }
}

/// A weight type the kernels read eight at a time.
trait Weight: Copy {
    /// # Safety
    /// Eight values must be readable at `p`.
    unsafe fn lanes<V: Lanes>(p: *const Self) -> V;
    fn widen(self) -> f32;
}

impl Weight for f32 {
    #[inline(always)]
    unsafe fn lanes<V: Lanes>(p: *const f32) -> V {
        // SAFETY: forwarded from the caller.
        unsafe { V::load_ptr(p) }
    }
    #[inline(always)]
    fn widen(self) -> f32 {
        self
    }
}

impl Weight for i8 {
    #[inline(always)]
    unsafe fn lanes<V: Lanes>(p: *const i8) -> V {
        // SAFETY: forwarded from the caller.
        unsafe { V::load_i8_ptr(p) }
    }
    #[inline(always)]
    fn widen(self) -> f32 {
        f32::from(self)
    }
}

/// `out[t][r] = scale[r] · (row_r · xs[t])` (no scale for f32 weights), tile by tile.
#[inline(always)]
fn gemm<V: Lanes, W: Weight>(
    w: &[W],
    scales: Option<&[f32]>,
    rows: usize,
    cols: usize,
    xs: &[f32],
    out: &mut [f32],
) {
    let n = xs.len() / cols;
    assert!(w.len() >= rows * cols && out.len() >= n * rows);
    let mut put = |t: usize, r: usize, v: f32| {
        out[t * rows + r] = match scales {
            Some(s) => s[r] * v,
            None => v,
        };
    };
    let mut t = 0;
    while t + 4 <= n {
        let mut r = 0;
        while r + 2 <= rows {
            let sums = tile::<V, W, 4, 2>(w, cols, r, xs, t);
            for (p, row) in sums.iter().enumerate() {
                for (i, &v) in row.iter().enumerate() {
                    put(t + p, r + i, v);
                }
            }
            r += 2;
        }
        if r < rows {
            let sums = tile::<V, W, 4, 1>(w, cols, r, xs, t);
            for (p, row) in sums.iter().enumerate() {
                put(t + p, r, row[0]);
            }
        }
        t += 4;
    }
    while t < n {
        let mut r = 0;
        while r + 4 <= rows {
            let [sums] = tile::<V, W, 1, 4>(w, cols, r, xs, t);
            for (i, &v) in sums.iter().enumerate() {
                put(t, r + i, v);
            }
            r += 4;
        }
        while r < rows {
            put(t, r, tile::<V, W, 1, 1>(w, cols, r, xs, t)[0][0]);
            r += 1;
        }
        t += 1;
    }
}

/// The dot products of rows `r..r + R` with positions `t..t + P`, each summed as
/// [`dot_with`] does: eight lane accumulators over the chunks of eight, their lanes summed
/// left to right, then the scalar tail.
#[inline(always)]
fn tile<V: Lanes, W: Weight, const P: usize, const R: usize>(
    w: &[W],
    cols: usize,
    r: usize,
    xs: &[f32],
    t: usize,
) -> [[f32; R]; P] {
    let body = cols - cols % 8;
    assert!((r + R) * cols <= w.len() && (t + P) * cols <= xs.len());
    let (wp, xp) = (w.as_ptr(), xs.as_ptr());
    let mut acc = [[V::zero(); R]; P];
    let mut c = 0;
    while c < body {
        // SAFETY: c + 8 <= cols, and the rows and positions are in bounds (asserted).
        let mut wv = [V::zero(); R];
        for (i, wv) in wv.iter_mut().enumerate() {
            *wv = unsafe { W::lanes(wp.add((r + i) * cols + c)) };
        }
        for (p, acc) in acc.iter_mut().enumerate() {
            // SAFETY: as above.
            let x = unsafe { V::load_ptr(xp.add((t + p) * cols + c)) };
            for (a, wv) in acc.iter_mut().zip(&wv) {
                *a = a.add(wv.mul(x));
            }
        }
        c += 8;
    }
    let mut sums = [[0.0; R]; P];
    for (p, (sums, acc)) in sums.iter_mut().zip(&acc).enumerate() {
        for (i, (sum, lanes)) in sums.iter_mut().zip(acc).enumerate() {
            let tail = if body < cols {
                tail_dot(
                    &w[(r + i) * cols + body..(r + i + 1) * cols],
                    &xs[(t + p) * cols + body..(t + p + 1) * cols],
                )
            } else {
                0.0
            };
            *sum = finish(lanes.to_array(), tail);
        }
    }
    sums
}

/// The scalar tail of a dot product (fewer than eight terms), summed left to right.
#[inline(never)]
fn tail_dot<W: Weight>(w: &[W], x: &[f32]) -> f32 {
    let mut s = 0.0;
    for (&w, x) in w.iter().zip(x) {
        s += w.widen() * x;
    }
    s
}

/// A dot product with eight lane accumulators (the order every kernel here keeps).
pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    dot_with(a, b)
}

fn dot_i8(a: &[i8], b: &[f32]) -> f32 {
    dot_with(a, b)
}

#[inline(always)]
fn dot_with<W: Weight>(a: &[W], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let (a8, b8) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail = tail_dot(a8.remainder(), b8.remainder());
    for (x, y) in a8.zip(b8) {
        for j in 0..8 {
            acc[j] += x[j].widen() * y[j];
        }
    }
    finish(acc, tail)
}

/// One decoder layer's tensors.
#[derive(Clone, Debug, PartialEq)]
pub struct Layer {
    pub attn_norm: Vec<f32>,
    pub q: Linear,
    pub k: Linear,
    pub v: Linear,
    pub o: Linear,
    pub mlp_norm: Vec<f32>,
    pub gate: Linear,
    pub up: Linear,
    pub down: Linear,
}

impl Layer {
    /// The layer's matrices with their names under `layers.{i}.`, in file order.
    pub fn matrices(&self) -> [(&'static str, &Linear); 7] {
        [
            ("attn.q", &self.q),
            ("attn.k", &self.k),
            ("attn.v", &self.v),
            ("attn.o", &self.o),
            ("mlp.gate", &self.gate),
            ("mlp.up", &self.up),
            ("mlp.down", &self.down),
        ]
    }
}

/// All the model's tensors.
#[derive(Clone, Debug, PartialEq)]
pub struct Weights {
    pub embed: Linear,
    pub layers: Vec<Layer>,
    pub norm: Vec<f32>,
}

/// Reads tensors by name and checks shapes and dtypes against the config.
struct Reader<'a> {
    tensors: SafeTensors<'a>,
}

impl Reader<'_> {
    fn view(&self, name: &str, shape: &[usize]) -> Result<TensorView<'_>, ModelError> {
        let view = self
            .tensors
            .tensor(name)
            .map_err(|_| ModelError::MissingTensor(name.to_string()))?;
        if view.shape() != shape {
            return Err(ModelError::Shape {
                name: name.to_string(),
                expected: shape.to_vec(),
                got: view.shape().to_vec(),
            });
        }
        Ok(view)
    }

    fn f32s(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>, ModelError> {
        let view = self.view(name, shape)?;
        if view.dtype() != Dtype::F32 {
            return Err(ModelError::Dtype {
                name: name.to_string(),
                expected: "F32",
                got: format!("{:?}", view.dtype()),
            });
        }
        let values: Vec<f32> = view
            .data()
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        if let Some((index, &value)) = values.iter().enumerate().find(|(_, v)| !v.is_finite()) {
            return Err(ModelError::NonFiniteWeight {
                name: name.to_string(),
                index,
                value,
            });
        }
        Ok(values)
    }

    /// A matrix stored as `precision` (every matrix of a file is stored alike, so that the
    /// precision a run record names is that of all of them).
    fn linear(
        &self,
        name: &str,
        rows: usize,
        cols: usize,
        precision: Precision,
    ) -> Result<Linear, ModelError> {
        let weight = format!("{name}.weight");
        let view = self.view(&weight, &[rows, cols])?;
        match (view.dtype(), precision) {
            (Dtype::F32, Precision::F32) => Ok(Linear::F32 {
                rows,
                cols,
                data: self.f32s(&weight, &[rows, cols])?,
            }),
            (Dtype::I8, Precision::Int8) => {
                let data: Vec<i8> = view.data().iter().map(|&b| b as i8).collect();
                // The quantiser is symmetric: -128 has no positive twin, and never comes
                // out of it.
                if let Some(index) = data.iter().position(|&q| q == i8::MIN) {
                    return Err(ModelError::Int8OutOfRange {
                        name: weight,
                        index,
                    });
                }
                let scale = format!("{name}.scale");
                let scales = self.f32s(&scale, &[rows])?;
                if let Some((index, &value)) = scales.iter().enumerate().find(|(_, &s)| s <= 0.0) {
                    return Err(ModelError::NonPositiveScale {
                        name: scale,
                        index,
                        value,
                    });
                }
                Ok(Linear::Int8 {
                    rows,
                    cols,
                    data,
                    scales,
                })
            }
            (other, _) => Err(ModelError::Dtype {
                name: weight,
                expected: match precision {
                    Precision::F32 => "F32, as embed.weight is",
                    Precision::Int8 => "I8, as embed.weight is",
                },
                got: format!("{other:?}"),
            }),
        }
    }
}

impl Weights {
    /// Weights of `config`'s shapes with every matrix made by `matrix(rows, cols)`, in file
    /// order (the embedding, then each layer's q, k, v, o, gate, up and down), and every norm
    /// 1: how tests build models of any size without a file.
    pub fn from_fn(
        config: &ModelConfig,
        mut matrix: impl FnMut(usize, usize) -> Linear,
    ) -> Weights {
        let (d, kv, ff) = (config.d_model, config.kv_dim(), config.d_ff);
        Weights {
            embed: matrix(config.vocab_size, d),
            layers: (0..config.n_layers)
                .map(|_| Layer {
                    attn_norm: vec![1.0; d],
                    q: matrix(d, d),
                    k: matrix(kv, d),
                    v: matrix(kv, d),
                    o: matrix(d, d),
                    mlp_norm: vec![1.0; d],
                    gate: matrix(ff, d),
                    up: matrix(ff, d),
                    down: matrix(d, ff),
                })
                .collect(),
            norm: vec![1.0; d],
        }
    }

    /// Reads a safetensors file (f32 or int8) and checks it against `config`.
    pub fn from_safetensors(config: &ModelConfig, bytes: &[u8]) -> Result<Weights, ModelError> {
        config.validate()?;
        let tensors =
            SafeTensors::deserialize(bytes).map_err(|e| ModelError::Safetensors(e.to_string()))?;
        let read = Reader { tensors };
        let (d, kv, ff) = (config.d_model, config.kv_dim(), config.d_ff);
        // The embedding's dtype decides the file's precision.
        let precision = match read.view("embed.weight", &[config.vocab_size, d])?.dtype() {
            Dtype::F32 => Precision::F32,
            Dtype::I8 => Precision::Int8,
            other => {
                return Err(ModelError::Dtype {
                    name: "embed.weight".to_string(),
                    expected: "F32 or I8",
                    got: format!("{other:?}"),
                })
            }
        };
        let embed = read.linear("embed", config.vocab_size, d, precision)?;
        let layers = (0..config.n_layers)
            .map(|i| {
                let p = format!("layers.{i}");
                Ok(Layer {
                    attn_norm: read.f32s(&format!("{p}.attn_norm.weight"), &[d])?,
                    q: read.linear(&format!("{p}.attn.q"), d, d, precision)?,
                    k: read.linear(&format!("{p}.attn.k"), kv, d, precision)?,
                    v: read.linear(&format!("{p}.attn.v"), kv, d, precision)?,
                    o: read.linear(&format!("{p}.attn.o"), d, d, precision)?,
                    mlp_norm: read.f32s(&format!("{p}.mlp_norm.weight"), &[d])?,
                    gate: read.linear(&format!("{p}.mlp.gate"), ff, d, precision)?,
                    up: read.linear(&format!("{p}.mlp.up"), ff, d, precision)?,
                    down: read.linear(&format!("{p}.mlp.down"), d, ff, precision)?,
                })
            })
            .collect::<Result<Vec<Layer>, ModelError>>()?;
        let weights = Weights {
            embed,
            layers,
            norm: read.f32s("norm.weight", &[d])?,
        };
        // Every tensor was read; one more is a file for another model (or a damaged name).
        let expected = weights.tensor_names();
        let mut names = read.tensors.names();
        names.sort_unstable();
        if let Some(extra) = names.iter().find(|n| !expected.iter().any(|e| e == *n)) {
            return Err(ModelError::UnexpectedTensor(extra.to_string()));
        }
        Ok(weights)
    }

    /// The names of the tensors that store these weights.
    fn tensor_names(&self) -> Vec<String> {
        let mut names = Vec::new();
        let matrix = |names: &mut Vec<String>, name: &str, m: &Linear| {
            names.push(format!("{name}.weight"));
            if let Linear::Int8 { .. } = m {
                names.push(format!("{name}.scale"));
            }
        };
        matrix(&mut names, "embed", &self.embed);
        for (i, layer) in self.layers.iter().enumerate() {
            names.push(format!("layers.{i}.attn_norm.weight"));
            names.push(format!("layers.{i}.mlp_norm.weight"));
            for (name, m) in layer.matrices() {
                matrix(&mut names, &format!("layers.{i}.{name}"), m);
            }
        }
        names.push("norm.weight".to_string());
        names
    }

    pub fn precision(&self) -> Precision {
        self.embed.precision()
    }

    /// The int8 copy: every matrix quantised per output row; norms stay f32.
    pub fn quantized(&self) -> Weights {
        Weights {
            embed: self.embed.quantized(),
            layers: self
                .layers
                .iter()
                .map(|l| Layer {
                    attn_norm: l.attn_norm.clone(),
                    q: l.q.quantized(),
                    k: l.k.quantized(),
                    v: l.v.quantized(),
                    o: l.o.quantized(),
                    mlp_norm: l.mlp_norm.clone(),
                    gate: l.gate.quantized(),
                    up: l.up.quantized(),
                    down: l.down.quantized(),
                })
                .collect(),
            norm: self.norm.clone(),
        }
    }

    /// The weights as a safetensors file.
    pub fn to_safetensors(&self) -> Result<Vec<u8>, ModelError> {
        let mut tensors: Vec<(String, Dtype, Vec<usize>, Vec<u8>)> = Vec::new();
        let vector = |name: String, values: &[f32]| {
            let bytes = values.iter().flat_map(|v| v.to_le_bytes()).collect();
            (name, Dtype::F32, vec![values.len()], bytes)
        };
        let matrix = |tensors: &mut Vec<_>, name: &str, m: &Linear| match m {
            Linear::F32 { rows, cols, data } => tensors.push((
                format!("{name}.weight"),
                Dtype::F32,
                vec![*rows, *cols],
                data.iter().flat_map(|v| v.to_le_bytes()).collect(),
            )),
            Linear::Int8 {
                rows,
                cols,
                data,
                scales,
            } => {
                tensors.push((
                    format!("{name}.weight"),
                    Dtype::I8,
                    vec![*rows, *cols],
                    data.iter().map(|&q| q as u8).collect(),
                ));
                tensors.push((
                    format!("{name}.scale"),
                    Dtype::F32,
                    vec![*rows],
                    scales.iter().flat_map(|v| v.to_le_bytes()).collect(),
                ));
            }
        };
        matrix(&mut tensors, "embed", &self.embed);
        for (i, layer) in self.layers.iter().enumerate() {
            tensors.push(vector(
                format!("layers.{i}.attn_norm.weight"),
                &layer.attn_norm,
            ));
            tensors.push(vector(
                format!("layers.{i}.mlp_norm.weight"),
                &layer.mlp_norm,
            ));
            for (name, m) in layer.matrices() {
                matrix(&mut tensors, &format!("layers.{i}.{name}"), m);
            }
        }
        tensors.push(vector("norm.weight".to_string(), &self.norm));
        let views = tensors
            .iter()
            .map(|(name, dtype, shape, bytes)| {
                TensorView::new(*dtype, shape.clone(), bytes)
                    .map(|view| (name.clone(), view))
                    .map_err(|e| ModelError::Safetensors(e.to_string()))
            })
            .collect::<Result<HashMap<String, TensorView<'_>>, ModelError>>()?;
        safetensors::serialize(views, None).map_err(|e| ModelError::Safetensors(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel_checks::bit_identical;

    /// Whatever the CPU, the dispatched kernels give exactly the portable sums, so a run
    /// replays bit for bit on any machine; and a position gets the same bits in a block
    /// (prefill) as alone (decode) as from `row_dot`.
    #[test]
    fn dispatched_kernels_equal_the_portable_ones_bit_for_bit() {
        bit_identical(
            Linear::clone,
            Linear::matmul,
            Linear::matmul_portable,
            Linear::matvec,
            |m, x, alone| {
                let dots: Vec<f32> = (0..m.rows()).map(|r| m.row_dot(r, x)).collect();
                assert_eq!(dots, alone);
            },
        );
    }
}
