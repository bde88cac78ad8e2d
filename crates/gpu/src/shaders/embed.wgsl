// Embedding gather: x[t] = embed[tokens[t]] for the block's positions.
// f32 weights (`gather_f32`), or int8 rows packed four to a u32 word with one f32 scale per
// row (`gather_int8`), dequantised here.

struct Step { start: u32, n: u32 }
struct Params { rows: u32, cols: u32, row_words: u32, flags: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> tokens: array<u32>;
@group(0) @binding(3) var<storage, read_write> x: array<f32>;
@group(0) @binding(4) var<storage, read> w: array<f32>;
@group(0) @binding(5) var<storage, read> wq: array<u32>;
@group(0) @binding(6) var<storage, read> scales: array<f32>;

fn int8_at(row: u32, col: u32) -> f32 {
    let word = wq[row * p.row_words + col / 4u];
    let shift = (col % 4u) * 8u;
    return f32(bitcast<i32>(word << (24u - shift)) >> 24u);
}

@compute @workgroup_size(64)
fn gather_f32(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i >= step.n * p.cols) { return; }
    let t = i / p.cols;
    let c = i % p.cols;
    x[i] = w[tokens[t] * p.cols + c];
}

@compute @workgroup_size(64)
fn gather_int8(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i >= step.n * p.cols) { return; }
    let t = i / p.cols;
    let c = i % p.cols;
    let row = tokens[t];
    x[i] = scales[row] * int8_at(row, c);
}
