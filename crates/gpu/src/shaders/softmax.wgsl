// Numerically stable softmax of each row, scaled by 1/temperature:
// probs[r][i] = exp(s_i - max) / sum_j exp(s_j - max) with s = logits * inv_temperature.
// One workgroup per row: the max, then the sum of exponentials, each a workgroup tree
// reduction (reduce.wgsl) over strided partial results.

struct Params { cols: u32, rows: u32, inv_temperature: f32, pad: u32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read_write> probs: array<f32>;

const WG: u32 = 256u;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let base = wg.x * p.cols;
    var local_max = LOWEST;
    for (var i = lid.x; i < p.cols; i += WG) {
        local_max = max(local_max, logits[base + i] * p.inv_temperature);
    }
    let m = reduce_max(lid.x, local_max);

    var local_sum = 0.0;
    for (var i = lid.x; i < p.cols; i += WG) {
        let e = exp(logits[base + i] * p.inv_temperature - m);
        probs[base + i] = e;
        local_sum += e;
    }
    let total = reduce_sum(lid.x, local_sum);
    for (var i = lid.x; i < p.cols; i += WG) {
        probs[base + i] = probs[base + i] / total;
    }
}
