// out[t][r] (+)= sum_c xs[t][c] * W[r][c] for the block's positions t: the linear layers of
// a prefill (a block of one position takes matvec.wgsl). The weight format comes from the
// prelude (weights_f32.wgsl or weights_int8.wgsl); an int8 row's scale multiplies its sums.
//
// Register-blocked: an 8 x 8 workgroup computes a tile of 32 positions x 32 rows, each
// invocation a 4 x 4 block of it held in registers. Per step of KC columns the workgroup
// stages the tile's slices of xs and W in workgroup memory; each invocation then reads 4 +
// 4 values of them per column for 16 products (a 16 x 16 tile of one output per invocation
// reads 2 per product). Shapes need not be multiples of the tile.
//
// flags: bit 0 = accumulate (out += product, the residual stream).

struct Step { start: u32, n: u32 }
struct Params { rows: u32, cols: u32, row_words: u32, flags: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> xs: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

const SIDE: u32 = 8u;   // invocations per side of the workgroup
const BLOCK: u32 = 4u;  // outputs per side of an invocation's block
const TILE: u32 = 32u;  // SIDE * BLOCK
const KC: u32 = 16u;    // columns staged per step
var<workgroup> x_tile: array<f32, 512>; // [TILE positions][KC]
var<workgroup> w_tile: array<f32, 512>; // [TILE rows][KC]

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

@compute @workgroup_size(SIDE, SIDE)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_id) lid: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let row0 = wg.x * TILE;
    let pos0 = wg.y * TILE;
    // acc_i holds position lid.y + i * SIDE against rows lid.x + j * SIDE, j = 0..4.
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
            var wv = 0.0;
            if (row0 + a < p.rows && c < p.cols) { wv = weight(row0 + a, c); }
            w_tile[e] = wv;
        }
        workgroupBarrier();
        for (var k = 0u; k < KC; k++) {
            let wv = vec4<f32>(
                w_tile[lid.x * KC + k],
                w_tile[(lid.x + SIDE) * KC + k],
                w_tile[(lid.x + 2u * SIDE) * KC + k],
                w_tile[(lid.x + 3u * SIDE) * KC + k],
            );
            acc0 += x_tile[lid.y * KC + k] * wv;
            acc1 += x_tile[(lid.y + SIDE) * KC + k] * wv;
            acc2 += x_tile[(lid.y + 2u * SIDE) * KC + k] * wv;
            acc3 += x_tile[(lid.y + 3u * SIDE) * KC + k] * wv;
        }
        workgroupBarrier();
    }
    var accs = array<vec4<f32>, 4>(acc0, acc1, acc2, acc3);
    for (var i = 0u; i < BLOCK; i++) {
        let t = pos0 + lid.y + i * SIDE;
        for (var j = 0u; j < BLOCK; j++) {
            let r = row0 + lid.x + j * SIDE;
            if (r < p.rows) { store(t, r, accs[i][j] * row_scale(r)); }
        }
    }
}
