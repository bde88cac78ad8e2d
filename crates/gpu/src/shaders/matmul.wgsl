// out[t][r] (+)= sum_c xs[t][c] * W[r][c] for the block's positions t: every linear layer of
// the model and the tied projection to the logits. W is [rows][cols] row-major, as
// nn.Linear stores it. Tiled through workgroup memory: a 16x16 workgroup computes a tile of
// 16 positions x 16 rows, staging 16 columns of xs and W at a time, so each value read from
// memory serves 16 products. Shapes need not be multiples of the tile.
//
// `matmul_f32` reads f32 weights; `matmul_int8` reads int8 weights packed four to a u32
// (`row_words` words per row) and dequantises in the kernel: scale[r] * sum(q * x), as the
// CPU reference does.
//
// `matvec_f32` and `matvec_int8` (at the end) take the same bindings for a block of one
// position, which is every decode step.
//
// flags: bit 0 = accumulate (out += product, the residual stream); bit 1 = one row of xs
// whatever the block's length (the logits of the last position).

struct Step { start: u32, n: u32 }
struct Params { rows: u32, cols: u32, row_words: u32, flags: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> xs: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<storage, read> w: array<f32>;
@group(0) @binding(5) var<storage, read> wq: array<u32>;
@group(0) @binding(6) var<storage, read> scales: array<f32>;

const TILE: u32 = 16u;
var<workgroup> x_tile: array<array<f32, TILE>, TILE>;
var<workgroup> w_tile: array<array<f32, TILE>, TILE>;

fn positions() -> u32 {
    if ((p.flags & 2u) != 0u) { return 1u; }
    return step.n;
}

fn int8_at(row: u32, col: u32) -> f32 {
    let word = wq[row * p.row_words + col / 4u];
    let shift = (col % 4u) * 8u;
    return f32(bitcast<i32>(word << (24u - shift)) >> 24u);
}

fn stage_x(t: u32, c: u32, lid: vec3<u32>, n: u32) {
    var v = 0.0;
    if (t < n && c < p.cols) { v = xs[t * p.cols + c]; }
    x_tile[lid.y][lid.x] = v;
}

fn tile_product(lid: vec3<u32>) -> f32 {
    var acc = 0.0;
    for (var k = 0u; k < TILE; k++) {
        acc += x_tile[lid.y][k] * w_tile[lid.x][k];
    }
    return acc;
}

fn store(t: u32, r: u32, n: u32, value: f32) {
    if (t < n && r < p.rows) {
        let i = t * p.rows + r;
        if ((p.flags & 1u) != 0u) {
            out[i] += value;
        } else {
            out[i] = value;
        }
    }
}

@compute @workgroup_size(TILE, TILE)
fn matmul_f32(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let n = positions();
    let r = wg.x * TILE + lid.x;
    let t = wg.y * TILE + lid.y;
    let w_row = wg.x * TILE + lid.y;
    var acc = 0.0;
    for (var c0 = 0u; c0 < p.cols; c0 += TILE) {
        let c = c0 + lid.x;
        stage_x(t, c, lid, n);
        var wv = 0.0;
        if (w_row < p.rows && c < p.cols) { wv = w[w_row * p.cols + c]; }
        w_tile[lid.y][lid.x] = wv;
        workgroupBarrier();
        acc += tile_product(lid);
        workgroupBarrier();
    }
    store(t, r, n, acc);
}

@compute @workgroup_size(TILE, TILE)
fn matmul_int8(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let n = positions();
    let r = wg.x * TILE + lid.x;
    let t = wg.y * TILE + lid.y;
    let w_row = wg.x * TILE + lid.y;
    var acc = 0.0;
    for (var c0 = 0u; c0 < p.cols; c0 += TILE) {
        let c = c0 + lid.x;
        stage_x(t, c, lid, n);
        var wv = 0.0;
        if (w_row < p.rows && c < p.cols) { wv = int8_at(w_row, c); }
        w_tile[lid.y][lid.x] = wv;
        workgroupBarrier();
        acc += tile_product(lid);
        workgroupBarrier();
    }
    if (r < p.rows) { acc *= scales[r]; }
    store(t, r, n, acc);
}

// Decode (one position): one invocation per output row, the whole dot product in a loop,
// no workgroup memory. A 16-position tile would compute 16 times the work for one row of
// input; here every multiply is used.
const ROWS_PER_WG: u32 = 64u;

@compute @workgroup_size(ROWS_PER_WG)
fn matvec_f32(@builtin(global_invocation_id) gid: vec3<u32>) {
    let r = gid.x;
    if (r >= p.rows) { return; }
    var acc = 0.0;
    let base = r * p.cols;
    for (var c = 0u; c < p.cols; c++) {
        acc += xs[c] * w[base + c];
    }
    store(0u, r, 1u, acc);
}

@compute @workgroup_size(ROWS_PER_WG)
fn matvec_int8(@builtin(global_invocation_id) gid: vec3<u32>) {
    let r = gid.x;
    if (r >= p.rows) { return; }
    var acc = 0.0;
    let base = r * p.row_words;
    for (var word = 0u; word < p.row_words; word++) {
        let packed = wq[base + word];
        for (var k = 0u; k < 4u; k++) {
            let c = word * 4u + k;
            if (c < p.cols) {
                let q = f32(bitcast<i32>(packed << (24u - 8u * k)) >> 24u);
                acc += xs[c] * q;
            }
        }
    }
    store(0u, r, 1u, acc * scales[r]);
}
