// One position's projections, each fused with what surrounds it so that a decode step is
// few dispatches: the workgroup stages its input row in workgroup memory (RMSNorm-ed first
// where the model norms it), then takes the products of WG / SLICES outputs, each a group
// of four rows (two for `qkv`'s pairs), split over SLICES invocations that each sum every
// SLICES-th column: reading the weights' column-major groups (weights_f32.wgsl),
// consecutive invocations load consecutive 16-byte groups. The slices meet in workgroup
// memory, summed in slice order, and the first slice applies the epilogue. SLICES is
// declared before this file when the module is made (`Kernels::new`, as
// `const SLICES: u32 = 8u;`): a GPU hides memory latency only with many
// short dependent chains (8 slices), while an adapter that runs the shader on a CPU
// (lavapipe, SwiftShader) is fastest with one long loop per output and no split (1). The weight format comes from the prelude (weights_f32.wgsl or
// weights_int8.wgsl), and reduce.wgsl's reductions come before both.
//
// - `matvec`: out[r] (+)= W[r] · xs, the attention's output and the MLP's down projection
//   (flags bit 0: accumulate onto the residual stream).
// - `logits`: RMSNorm of the block's last row, then the tied projection to the logits.
// - `qkv`: RMSNorm, then the stacked [Wq; Wk; Wv] (rows d + 2 kv); each query and key pair
//   (i, i + head_dim/2) is rotated by RoPE at position `start`, the queries go to `out`
//   ([heads][head_dim]) and the key and value straight into the KV cache at `start`. An
//   output is four pairs or four values, so head_dim is a multiple of 8 (the runtime
//   checks).
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

// Outputs per workgroup.
fn units() -> u32 {
    return WG / SLICES;
}
// MAX_COLS, the longest input row, is declared with SLICES: the model's own, within the
// runtime's limit (workgroup memory is 16 KiB).
var<workgroup> row_in: array<f32, MAX_COLS>;
// Each invocation's slice of up to two products: [product][slice][unit].
var<workgroup> partial: array<vec4<f32>, 128>;

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

// Slice s of rows 4g..4g+4 of W · row_in: columns s, s + SLICES, ..., unscaled.
fn slice4(g: u32, s: u32) -> vec4<f32> {
    var acc = vec4<f32>(0.0);
    for (var c = s; c < p.cols; c += SLICES) {
        acc += row_in[c] * weights4(g, c);
    }
    return acc;
}

// Shares this invocation's slices `a` and `b`; after the barrier every product is whole
// (with one slice, each invocation reads back only its own, and needs none). From uniform
// control flow only.
fn share(lid: u32, a: vec4<f32>, b: vec4<f32>) {
    partial[lid] = a;
    partial[WG + lid] = b;
    if (SLICES > 1u) { workgroupBarrier(); }
}

// Product `which` (0 or 1) of unit u: its slices summed in slice order, scaled for the
// weight format of group g.
fn whole(which: u32, u: u32, g: u32) -> vec4<f32> {
    var acc = vec4<f32>(0.0);
    for (var s = 0u; s < SLICES; s++) {
        acc += partial[which * WG + s * units() + u];
    }
    return acc * row_scales4(g);
}

// Writes rows 4g..4g+4 of a product (those below p.rows).
// (Written out, not looped over a dynamic component index: a shader compiler that runs on
// the CPU, SwiftShader's, spends seconds on such code.)
fn store1(r: u32, value: f32, accumulate: bool) {
    if (r < p.rows) {
        if (accumulate) {
            out[r] += value;
        } else {
            out[r] = value;
        }
    }
}

fn store4(g: u32, value: vec4<f32>, accumulate: bool) {
    store1(4u * g, value.x, accumulate);
    store1(4u * g + 1u, value.y, accumulate);
    store1(4u * g + 2u, value.z, accumulate);
    store1(4u * g + 3u, value.w, accumulate);
}

// Four consecutive values of a buffer from `at`.
fn rope4(at: u32) -> vec4<f32> {
    return vec4<f32>(rope[at], rope[at + 1u], rope[at + 2u], rope[at + 3u]);
}

// One product per unit over W's row groups: `matvec` and `logits` after their staging.
fn project(wg: u32, lid: u32, accumulate: bool) {
    let u = lid % units();
    let s = lid / units();
    let g = wg * units() + u;
    var a = vec4<f32>(0.0);
    if (g < p.groups) { a = slice4(g, s); }
    share(lid, a, a);
    if (s == 0u && g < p.groups) { store4(g, whole(0u, u, g), accumulate); }
}

@compute @workgroup_size(WG)
fn matvec(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    stage(lid.x, 0u);
    project(wg.x, lid.x, (p.flags & 1u) != 0u);
}

@compute @workgroup_size(WG)
fn logits(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    stage_normed(lid.x, step.n - 1u);
    project(wg.x, lid.x, false);
}

// Where head h's value i at position `start` lives: values [layer][kv_head][position]
// [head_dim], keys transposed, [layer][kv_head][head_dim][position] (rope_store.wgsl).
fn cache_at(h: u32, i: u32) -> u32 {
    return ((p.layer * p.kv_heads + h) * p.context + step.start) * p.head_dim + i;
}

fn key_at(h: u32, i: u32) -> u32 {
    return ((p.layer * p.kv_heads + h) * p.head_dim + i) * p.context + step.start;
}

// The pairs (a_k, b_k) = rows (i, i + half), i = 4m..4m+4 of a head, turned by RoPE's
// angles at position `start`: the first halves, then the second.
fn rotated(a: vec4<f32>, b: vec4<f32>, m: u32) -> array<vec4<f32>, 2> {
    let half = p.head_dim / 2u;
    let at = step.start * half + 4u * m;
    let c = rope4(at);
    let s = rope4(p.context * half + at);
    return array<vec4<f32>, 2>(a * c - b * s, a * s + b * c);
}

// Writes four values of a cache at positions `at`, `at + stride`, ... (keys: stride
// `context`; values: stride 1).
fn cache4(keys: bool, at: u32, stride: u32, v: vec4<f32>) {
    if (keys) {
        k_cache[at] = v.x;
        k_cache[at + stride] = v.y;
        k_cache[at + 2u * stride] = v.z;
        k_cache[at + 3u * stride] = v.w;
    } else {
        v_cache[at] = v.x;
        v_cache[at + stride] = v.y;
        v_cache[at + 2u * stride] = v.z;
        v_cache[at + 3u * stride] = v.w;
    }
}

fn out4(at: u32, v: vec4<f32>) {
    out[at] = v.x;
    out[at + 1u] = v.y;
    out[at + 2u] = v.z;
    out[at + 3u] = v.w;
}

@compute @workgroup_size(WG)
fn qkv(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    stage_normed(lid.x, 0u);
    let half = p.head_dim / 2u;
    let per_head = half / 4u;
    let q_units = p.heads * per_head;
    let k_units = p.kv_heads * per_head;
    let total = q_units + k_units + p.kv_heads * p.head_dim / 4u;
    let q_groups = p.heads * p.head_dim / 4u;
    let u = lid.x % units();
    let s = lid.x / units();
    let j = wg.x * units() + u;
    // The unit's row groups: a query or key unit's first and second halves (head group
    // plus m, and half / 4 further), or a value unit's group.
    var first = 0u;
    var m = 0u;
    if (j < q_units) {
        m = j % per_head;
        first = (j / per_head) * p.head_dim / 4u + m;
    } else if (j < q_units + k_units) {
        m = (j - q_units) % per_head;
        first = q_groups + ((j - q_units) / per_head) * p.head_dim / 4u + m;
    } else {
        first = q_groups + p.kv_heads * p.head_dim / 4u + (j - q_units - k_units);
    }
    let second = first + half / 4u;
    let paired = j < q_units + k_units;
    // One call site per helper: a CPU-side shader compiler inlines every call.
    var products = array<vec4<f32>, 2>(vec4<f32>(0.0), vec4<f32>(0.0));
    let count = select(1u, 2u, paired);
    for (var which = 0u; j < total && which < count; which++) {
        products[which] = slice4(select(first, second, which == 1u), s);
    }
    share(lid.x, products[0], products[1]);
    if (s != 0u || j >= total) { return; }
    let x = whole(0u, u, first);
    if (!paired) {
        // Four values of one head (head_dim is a multiple of 4), consecutive in the cache.
        let idx = 4u * (j - q_units - k_units);
        cache4(false, cache_at(idx / p.head_dim, idx % p.head_dim), 1u, x);
        return;
    }
    let turned = rotated(x, whole(1u, u, second), m);
    if (j < q_units) {
        let i = (j / per_head) * p.head_dim + 4u * m;
        out4(i, turned[0]);
        out4(i + half, turned[1]);
    } else {
        let h = (j - q_units) / per_head;
        cache4(true, key_at(h, 4u * m), p.context, turned[0]);
        cache4(true, key_at(h, 4u * m + half), p.context, turned[1]);
    }
}

@compute @workgroup_size(WG)
fn gate_up(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    stage_normed(lid.x, 0u);
    let ff_groups = p.groups / 2u;
    let u = lid.x % units();
    let s = lid.x / units();
    let g = wg.x * units() + u;
    var products = array<vec4<f32>, 2>(vec4<f32>(0.0), vec4<f32>(0.0));
    for (var which = 0u; g < ff_groups && which < 2u; which++) {
        products[which] = slice4(which * ff_groups + g, s);
    }
    share(lid.x, products[0], products[1]);
    if (s != 0u || g >= ff_groups) { return; }
    let gate_sum = whole(0u, u, g);
    store4(g, gate_sum / (1.0 + exp(-gate_sum)) * whole(1u, u, ff_groups + g), false);
}
