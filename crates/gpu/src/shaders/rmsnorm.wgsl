// RMSNorm of each row: out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * weight.
// One workgroup per row; the sum of squares is a workgroup tree reduction.
// With `last_only` set, one workgroup reads the block's last row and writes row 0 (the
// final norm before the logits, which only the last position needs).

struct Step { start: u32, n: u32 }
struct Params { cols: u32, last_only: u32, eps: f32, pad: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> weight: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;

const WG: u32 = 64u;
var<workgroup> partial: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let row_out = wg.x;
    var row_in = wg.x;
    if (p.last_only == 1u) { row_in = step.n - 1u; }
    let base_in = row_in * p.cols;
    var s = 0.0;
    for (var c = lid.x; c < p.cols; c += WG) {
        let v = x[base_in + c];
        s += v * v;
    }
    partial[lid.x] = s;
    workgroupBarrier();
    for (var half = WG / 2u; half > 0u; half /= 2u) {
        if (lid.x < half) { partial[lid.x] += partial[lid.x + half]; }
        workgroupBarrier();
    }
    let scale = 1.0 / sqrt(partial[0] / f32(p.cols) + p.eps);
    let base_out = row_out * p.cols;
    for (var c = lid.x; c < p.cols; c += WG) {
        out[base_out + c] = x[base_in + c] * scale * weight[c];
    }
}
