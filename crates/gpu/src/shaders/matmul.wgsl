// out[t][r] (+)= sum_c xs[t][c] * W[r][c] for the block's positions t: the linear layers of
// a prefill (a block of one position takes matvec.wgsl). The weight format comes from the
// prelude (weights_f32.wgsl or weights_int8.wgsl); an int8 row's scale multiplies its sums.
//
// Register-blocked: an 8 x 8 workgroup computes a tile of 32 positions x 32 rows, each
// invocation a block of 4 positions (lid.y + 8i) x 4 consecutive rows (4 lid.x + j) held in
// registers. Per step of KC columns the workgroup stages the tile's slices of xs and W in
// workgroup memory, W as groups of four rows per column, so that per column an invocation
// reads one vec4 of weights (consecutive invocations, consecutive groups) and four inputs
// (shared by the invocations of a row) for 16 products; a 16 x 16 tile of one output per
// invocation reads 2 values per product. Shapes need not be multiples of the tile.
//
// flags: bit 0 = accumulate (out += product, the residual stream).

struct Step { start: u32, n: u32 }
struct Params { rows: u32, cols: u32, groups: u32, flags: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> xs: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

const SIDE: u32 = 8u;   // invocations per side of the workgroup
const TILE: u32 = 32u;  // 4 * SIDE
const KC: u32 = 16u;    // columns staged per step
var<workgroup> x_tile: array<f32, 512>;       // [TILE positions][KC]
var<workgroup> w_tile: array<vec4<f32>, 128>; // [KC][TILE / 4 groups of rows]

fn store(t: u32, r: u32, value: f32) {
    if (t < step.n && r < p.rows) {
        let i = t * p.rows + r;
        if ((p.flags & 1u) != 0u) {
            out[i] += value;
        } else {
            out[i] = value;
        }
    }
}

fn store4(t: u32, r: u32, v: vec4<f32>) {
    store(t, r, v.x);
    store(t, r + 1u, v.y);
    store(t, r + 2u, v.z);
    store(t, r + 3u, v.w);
}

@compute @workgroup_size(SIDE, SIDE)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_id) lid: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let row0 = wg.x * TILE;
    let pos0 = wg.y * TILE;
    // acc_i: position lid.y + i * SIDE against rows row0 + 4 lid.x + (0..4).
    var acc0 = vec4<f32>(0.0);
    var acc1 = vec4<f32>(0.0);
    var acc2 = vec4<f32>(0.0);
    var acc3 = vec4<f32>(0.0);
    for (var c0 = 0u; c0 < p.cols; c0 += KC) {
        for (var e = li; e < TILE * KC; e += SIDE * SIDE) {
            let a = e / KC;
            let c = c0 + e % KC;
            var xv = 0.0;
            if (pos0 + a < step.n && c < p.cols) { xv = xs[(pos0 + a) * p.cols + c]; }
            x_tile[e] = xv;
        }
        // Consecutive invocations read consecutive groups of one column (the padding
        // rows read as zeros).
        for (var e = li; e < TILE / 4u * KC; e += SIDE * SIDE) {
            let g = e % (TILE / 4u);
            let c = c0 + e / (TILE / 4u);
            var wv = vec4<f32>(0.0);
            if (row0 / 4u + g < p.groups && c < p.cols) { wv = weights4(row0 / 4u + g, c); }
            w_tile[e] = wv;
        }
        workgroupBarrier();
        for (var k = 0u; k < KC; k++) {
            let wv = w_tile[k * (TILE / 4u) + lid.x];
            acc0 += x_tile[lid.y * KC + k] * wv;
            acc1 += x_tile[(lid.y + SIDE) * KC + k] * wv;
            acc2 += x_tile[(lid.y + 2u * SIDE) * KC + k] * wv;
            acc3 += x_tile[(lid.y + 3u * SIDE) * KC + k] * wv;
        }
        workgroupBarrier();
    }
    // The rows' group of four, scaled for the weight format (written out, not looped over
    // dynamic indices, which SwiftShader's compiler spends seconds on).
    let g = row0 / 4u + lid.x;
    var scale = vec4<f32>(0.0);
    if (g < p.groups) { scale = row_scales4(g); }
    store4(pos0 + lid.y, 4u * g, acc0 * scale);
    store4(pos0 + lid.y + SIDE, 4u * g, acc1 * scale);
    store4(pos0 + lid.y + 2u * SIDE, 4u * g, acc2 * scale);
    store4(pos0 + lid.y + 3u * SIDE, 4u * g, acc3 * scale);
}
