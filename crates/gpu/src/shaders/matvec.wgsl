// One position's projections, each fused with what surrounds it so that a decode step is
// few dispatches: the workgroup stages its input row in workgroup memory (RMSNorm-ed first
// where the model norms it), then each invocation takes the dot products of its output
// and applies the epilogue. The weight format comes from the prelude (weights_f32.wgsl or
// weights_int8.wgsl), and reduce.wgsl's reductions come before both.
//
// - `matvec`: out[r] (+)= W[r] · xs, the attention's output and the MLP's down projection
//   (flags bit 0: accumulate onto the residual stream).
// - `logits`: RMSNorm of the block's last row, then the tied projection to the logits.
// - `qkv`: RMSNorm, then the stacked [Wq; Wk; Wv] (rows d + 2 kv); each query and key pair
//   (i, i + head_dim/2) is rotated by RoPE at position `start`, the queries go to `out`
//   ([heads][head_dim]) and the key and value straight into the KV cache at `start`.
// - `gate_up`: RMSNorm, then the stacked [W_gate; W_up] (rows 2 d_ff) and SwiGLU:
//   out[j] = silu(gate_j) * up_j.

struct Step { start: u32, n: u32 }
struct Params {
    rows: u32, cols: u32, row_words: u32, flags: u32,
    eps: f32, layer: u32, heads: u32, kv_heads: u32,
    head_dim: u32, context: u32, pad0: u32, pad1: u32,
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> xs: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(7) var<storage, read> norm: array<f32>;
// RoPE's tables, [context][head_dim/2] cos then the same of sin (one buffer: an int8 `qkv`
// binds 8 storage buffers, WebGPU's least limit).
@group(0) @binding(8) var<storage, read> rope: array<f32>;
@group(0) @binding(9) var<storage, read_write> k_cache: array<f32>;
@group(0) @binding(10) var<storage, read_write> v_cache: array<f32>;

const WG: u32 = 64u;
// The runtime refuses models whose rows are longer (workgroup memory is 16 KiB).
const MAX_COLS: u32 = 2048u;
var<workgroup> row_in: array<f32, MAX_COLS>;

// Stages xs's row `row` in `row_in`, zero-padded to a multiple of 4.
fn stage(lid: u32, row: u32) {
    let base = row * p.cols;
    for (var c = lid; c < p.cols; c += WG) { row_in[c] = xs[base + c]; }
    for (var c = p.cols + lid; c < (p.cols + 3u) / 4u * 4u; c += WG) { row_in[c] = 0.0; }
    workgroupBarrier();
}

// Stages xs's row `row` RMSNorm-ed: x / sqrt(mean(x^2) + eps) * norm, as rmsnorm.wgsl.
fn stage_normed(lid: u32, row: u32) {
    let base = row * p.cols;
    var s = 0.0;
    for (var c = lid; c < p.cols; c += WG) {
        let v = xs[base + c];
        s += v * v;
    }
    let scale = 1.0 / sqrt(reduce_sum(lid, s) / f32(p.cols) + p.eps);
    for (var c = lid; c < p.cols; c += WG) { row_in[c] = xs[base + c] * scale * norm[c]; }
    for (var c = p.cols + lid; c < (p.cols + 3u) / 4u * 4u; c += WG) { row_in[c] = 0.0; }
    workgroupBarrier();
}

// W[r] · row_in, scaled for the weight format.
fn dot_row(r: u32) -> f32 {
    var acc = vec4<f32>(0.0);
    for (var c = 0u; c < p.cols; c += 4u) {
        acc += weights4(r, c) * vec4<f32>(row_in[c], row_in[c + 1u], row_in[c + 2u], row_in[c + 3u]);
    }
    return (acc.x + acc.y + acc.z + acc.w) * row_scale(r);
}

@compute @workgroup_size(WG)
fn matvec(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    stage(lid.x, 0u);
    let r = gid.x;
    if (r >= p.rows) { return; }
    let value = dot_row(r);
    if ((p.flags & 1u) != 0u) {
        out[r] += value;
    } else {
        out[r] = value;
    }
}

@compute @workgroup_size(WG)
fn logits(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    stage_normed(lid.x, step.n - 1u);
    let r = gid.x;
    if (r >= p.rows) { return; }
    out[r] = dot_row(r);
}

// Rows (r, r + half) of the stacked projection, turned by RoPE's angle for pair i.
fn rotated(r: u32, i: u32) -> vec2<f32> {
    let half = p.head_dim / 2u;
    let at = step.start * half + i;
    let c = rope[at];
    let s = rope[p.context * half + at];
    let a = dot_row(r);
    let b = dot_row(r + half);
    return vec2<f32>(a * c - b * s, a * s + b * c);
}

// Where head h's value i at position `start` lives in a cache of layout
// [layer][kv_head][position][head_dim].
fn cache_at(h: u32, i: u32) -> u32 {
    return ((p.layer * p.kv_heads + h) * p.context + step.start) * p.head_dim + i;
}

@compute @workgroup_size(WG)
fn qkv(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    stage_normed(lid.x, 0u);
    let half = p.head_dim / 2u;
    let q_rows = p.heads * p.head_dim;
    let kv = p.kv_heads * p.head_dim;
    let q_pairs = p.heads * half;
    let k_pairs = p.kv_heads * half;
    let j = gid.x;
    if (j < q_pairs) {
        let r = (j / half) * p.head_dim + j % half;
        let turned = rotated(r, j % half);
        out[r] = turned.x;
        out[r + half] = turned.y;
    } else if (j < q_pairs + k_pairs) {
        let pair = j - q_pairs;
        let h = pair / half;
        let i = pair % half;
        let turned = rotated(q_rows + h * p.head_dim + i, i);
        k_cache[cache_at(h, i)] = turned.x;
        k_cache[cache_at(h, i + half)] = turned.y;
    } else if (j < q_pairs + k_pairs + kv) {
        let e = j - q_pairs - k_pairs;
        v_cache[cache_at(e / p.head_dim, e % p.head_dim)] = dot_row(q_rows + kv + e);
    }
}

@compute @workgroup_size(WG)
fn gate_up(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    stage_normed(lid.x, 0u);
    let ff = p.rows / 2u;
    let j = gid.x;
    if (j >= ff) { return; }
    let g = dot_row(j);
    out[j] = g / (1.0 + exp(-g)) * dot_row(ff + j);
}
