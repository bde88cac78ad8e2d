// Causal attention over the KV cache, prefill and decode alike: one workgroup per (block
// position t, query head h). Position start + t sees cache positions 0..=start + t; query
// head h reads KV head h / (heads / kv_heads) (grouped-query attention; MHA and MQA are the
// same code). Keys are stored transposed ([head_dim][position] within a head), values not.
// Scores live in workgroup memory; the max and the sum of exponentials are workgroup tree
// reductions (reduce.wgsl), so the softmax is stable.

struct Step { start: u32, n: u32 }
struct Params { layer: u32, heads: u32, kv_heads: u32, head_dim: u32, context: u32, scale: f32, pad0: u32, pad1: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> q: array<f32>;
@group(0) @binding(3) var<storage, read> k_cache: array<f32>;
@group(0) @binding(4) var<storage, read> v_cache: array<f32>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;

const WG: u32 = 32u;
// MAX_CONTEXT and MAX_HEAD_DIM are declared before this file when the module is made
// (`Kernels::new`): the model's own context and head size, within the runtime's limits.
var<workgroup> scores: array<f32, MAX_CONTEXT>;
var<workgroup> q_row: array<f32, MAX_HEAD_DIM>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let t = wg.x;
    let h = wg.y;
    let visible = step.start + t + 1u;
    let kv_head = h / (p.heads / p.kv_heads);
    let q_base = (t * p.heads + h) * p.head_dim;
    let cache_base = (p.layer * p.kv_heads + kv_head) * p.context * p.head_dim;

    for (var i = lid.x; i < p.head_dim; i += WG) { q_row[i] = q[q_base + i]; }
    workgroupBarrier();

    var local_max = LOWEST;
    for (var pos = lid.x; pos < visible; pos += WG) {
        // Keys are stored transposed: consecutive invocations read consecutive positions.
        var s = 0.0;
        for (var i = 0u; i < p.head_dim; i++) { s += q_row[i] * k_cache[cache_base + i * p.context + pos]; }
        s *= p.scale;
        scores[pos] = s;
        local_max = max(local_max, s);
    }
    let m = reduce_max(lid.x, local_max);

    var local_sum = 0.0;
    for (var pos = lid.x; pos < visible; pos += WG) {
        let e = exp(scores[pos] - m);
        scores[pos] = e;
        local_sum += e;
    }
    let total = reduce_sum(lid.x, local_sum);

    // The weights' sum divides once per output, not once per term.
    let inv_total = 1.0 / total;
    for (var i = lid.x; i < p.head_dim; i += WG) {
        var acc = 0.0;
        for (var pos = 0u; pos < visible; pos++) {
            acc += scores[pos] * v_cache[cache_base + pos * p.head_dim + i];
        }
        out[q_base + i] = acc * inv_total;
    }
}
