// Embedding gather: x[t] = embed[tokens[t]] for the block's positions, dequantised by the
// weight format's prelude (weights_f32.wgsl or weights_int8.wgsl).

struct Step { start: u32, n: u32 }
struct Params { rows: u32, cols: u32, groups: u32, flags: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> tokens: array<u32>;
@group(0) @binding(3) var<storage, read_write> x: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i >= step.n * p.cols) { return; }
    let row = tokens[i / p.cols];
    x[i] = row_scale(row) * weight(row, i % p.cols);
}
