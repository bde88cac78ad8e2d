// RMSNorm of each row of a prefill block: out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * weight.
// One workgroup per row; the sum of squares is reduce.wgsl's tree reduction. (The
// one-position kernels and the logits norm their row themselves: matvec.wgsl.)

struct Params { cols: u32, pad0: u32, eps: f32, pad1: u32 }

@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> weight: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;

const WG: u32 = 64u;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let base = wg.x * p.cols;
    var s = 0.0;
    for (var c = lid.x; c < p.cols; c += WG) {
        let v = x[base + c];
        s += v * v;
    }
    let scale = 1.0 / sqrt(reduce_sum(lid.x, s) / f32(p.cols) + p.eps);
    for (var c = lid.x; c < p.cols; c += WG) {
        out[base + c] = x[base + c] * scale * weight[c];
    }
}
