// One position's projections, each fused with what surrounds it so that a decode step is
// few dispatches: the workgroup stages its input row in workgroup memory (RMSNorm-ed first
// where the model norms it), then each invocation takes the products of a group of four
// output rows, reading the weights' column-major groups (weights_f32.wgsl) one 16-byte
// load per column, and applies the epilogue. The weight format comes from the prelude
// (weights_f32.wgsl or weights_int8.wgsl), and reduce.wgsl's reductions come before both.
//
// - `matvec`: out[r] (+)= W[r] · xs, the attention's output and the MLP's down projection
//   (flags bit 0: accumulate onto the residual stream).
// - `logits`: RMSNorm of the block's last row, then the tied projection to the logits.
// - `qkv`: RMSNorm, then the stacked [Wq; Wk; Wv] (rows d + 2 kv); each query and key pair
//   (i, i + head_dim/2) is rotated by RoPE at position `start`, the queries go to `out`
//   ([heads][head_dim]) and the key and value straight into the KV cache at `start`. An
//   invocation takes four pairs, so head_dim is a multiple of 8 (the runtime checks).
// - `gate_up`: RMSNorm, then the stacked [W_gate; W_up] (rows 2 d_ff, d_ff a multiple of
//   4) and SwiGLU: out[j] = silu(gate_j) * up_j.

struct Step { start: u32, n: u32 }
struct Params {
    rows: u32, cols: u32, groups: u32, flags: u32,
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

// Stages xs's row `row` in `row_in`.
fn stage(lid: u32, row: u32) {
    let base = row * p.cols;
    for (var c = lid; c < p.cols; c += WG) { row_in[c] = xs[base + c]; }
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
    workgroupBarrier();
}

// Rows 4g..4g+4 of W · row_in, scaled for the weight format.
fn dot4(g: u32) -> vec4<f32> {
    var acc = vec4<f32>(0.0);
    for (var c = 0u; c < p.cols; c++) {
        acc += row_in[c] * weights4(g, c);
    }
    return acc * row_scales4(g);
}

// Writes rows 4g..4g+4 of a product (those below p.rows).
fn store4(g: u32, value: vec4<f32>, accumulate: bool) {
    for (var k = 0u; k < 4u; k++) {
        let r = 4u * g + k;
        if (r < p.rows) {
            if (accumulate) {
                out[r] += value[k];
            } else {
                out[r] = value[k];
            }
        }
    }
}

@compute @workgroup_size(WG)
fn matvec(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    stage(lid.x, 0u);
    if (gid.x >= p.groups) { return; }
    store4(gid.x, dot4(gid.x), (p.flags & 1u) != 0u);
}

@compute @workgroup_size(WG)
fn logits(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    stage_normed(lid.x, step.n - 1u);
    if (gid.x >= p.groups) { return; }
    store4(gid.x, dot4(gid.x), false);
}

// Where head h's value i at position `start` lives: values [layer][kv_head][position]
// [head_dim], keys transposed, [layer][kv_head][head_dim][position] (rope_store.wgsl).
fn cache_at(h: u32, i: u32) -> u32 {
    return ((p.layer * p.kv_heads + h) * p.context + step.start) * p.head_dim + i;
}

fn key_at(h: u32, i: u32) -> u32 {
    return ((p.layer * p.kv_heads + h) * p.head_dim + i) * p.context + step.start;
}

// The pairs (i, i + half) for i = 4m..4m+4 of the head whose rows start at group `head`,
// turned by RoPE's angles at position `start`: the first halves, then the second.
fn rotated(head: u32, m: u32) -> array<vec4<f32>, 2> {
    let half = p.head_dim / 2u;
    let a = dot4(head + m);
    let b = dot4(head + half / 4u + m);
    var turned: array<vec4<f32>, 2>;
    for (var k = 0u; k < 4u; k++) {
        let at = step.start * half + 4u * m + k;
        let c = rope[at];
        let s = rope[p.context * half + at];
        turned[0][k] = a[k] * c - b[k] * s;
        turned[1][k] = a[k] * s + b[k] * c;
    }
    return turned;
}

@compute @workgroup_size(WG)
fn qkv(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    stage_normed(lid.x, 0u);
    let half = p.head_dim / 2u;
    let per_head = half / 4u;
    let q_units = p.heads * per_head;
    let k_units = p.kv_heads * per_head;
    let v_units = p.kv_heads * p.head_dim / 4u;
    let q_groups = p.heads * p.head_dim / 4u;
    let j = gid.x;
    if (j < q_units) {
        let h = j / per_head;
        let m = j % per_head;
        let turned = rotated(h * p.head_dim / 4u, m);
        for (var k = 0u; k < 4u; k++) {
            let i = h * p.head_dim + 4u * m + k;
            out[i] = turned[0][k];
            out[i + half] = turned[1][k];
        }
    } else if (j < q_units + k_units) {
        let h = (j - q_units) / per_head;
        let m = (j - q_units) % per_head;
        let turned = rotated(q_groups + h * p.head_dim / 4u, m);
        for (var k = 0u; k < 4u; k++) {
            let i = 4u * m + k;
            k_cache[key_at(h, i)] = turned[0][k];
            k_cache[key_at(h, i + half)] = turned[1][k];
        }
    } else if (j < q_units + k_units + v_units) {
        let e = j - q_units - k_units;
        let value = dot4(q_groups + p.kv_heads * p.head_dim / 4u + e);
        for (var k = 0u; k < 4u; k++) {
            let idx = 4u * e + k;
            v_cache[cache_at(idx / p.head_dim, idx % p.head_dim)] = value[k];
        }
    }
}

@compute @workgroup_size(WG)
fn gate_up(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    stage_normed(lid.x, 0u);
    let ff_groups = p.groups / 2u;
    let g = gid.x;
    if (g >= ff_groups) { return; }
    let gate = dot4(g);
    let up = dot4(ff_groups + g);
    store4(g, gate / (1.0 + exp(-gate)) * up, false);
}
