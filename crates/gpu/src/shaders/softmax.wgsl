// Numerically stable softmax of each row, scaled by 1/temperature:
// probs[r][i] = exp(s_i - max) / sum_j exp(s_j - max) with s = logits * inv_temperature.
// One workgroup per row: the max, then the sum of exponentials, each a workgroup tree
// reduction over strided partial results.

struct Params { cols: u32, rows: u32, inv_temperature: f32, pad: u32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read_write> probs: array<f32>;

const WG: u32 = 256u;
// Below any value these kernels meet (see attention.wgsl for why not -3.4028235e38).
const LOWEST: f32 = -3.402823e38;
var<workgroup> red: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let base = wg.x * p.cols;
    var local_max = LOWEST;
    for (var i = lid.x; i < p.cols; i += WG) {
        local_max = max(local_max, logits[base + i] * p.inv_temperature);
    }
    red[lid.x] = local_max;
    workgroupBarrier();
    for (var half = WG / 2u; half > 0u; half /= 2u) {
        if (lid.x < half) { red[lid.x] = max(red[lid.x], red[lid.x + half]); }
        workgroupBarrier();
    }
    let m = red[0];
    workgroupBarrier();

    var local_sum = 0.0;
    for (var i = lid.x; i < p.cols; i += WG) {
        let e = exp(logits[base + i] * p.inv_temperature - m);
        probs[base + i] = e;
        local_sum += e;
    }
    red[lid.x] = local_sum;
    workgroupBarrier();
    for (var half = WG / 2u; half > 0u; half /= 2u) {
        if (lid.x < half) { red[lid.x] += red[lid.x + half]; }
        workgroupBarrier();
    }
    let total = red[0];
    for (var i = lid.x; i < p.cols; i += WG) {
        probs[base + i] = probs[base + i] / total;
    }
}
