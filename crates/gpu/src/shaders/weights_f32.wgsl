// The weight format of a kernel that reads a matrix, f32: `Kernels::new` puts this file (or
// weights_int8.wgsl) before each such kernel, so the kernel is written once and compiled
// once per format. The kernel declares `p` with `cols` (and `row_words`, unused here).
// W is [rows][cols] row-major, as nn.Linear stores it.

@group(0) @binding(4) var<storage, read> w: array<f32>;

// W[r][c]: the unscaled weight.
fn weight(r: u32, c: u32) -> f32 {
    return w[r * p.cols + c];
}

// W[r][c..c+4], zeros past the last column.
fn weights4(r: u32, c: u32) -> vec4<f32> {
    let base = r * p.cols + c;
    if (c + 3u < p.cols) {
        return vec4<f32>(w[base], w[base + 1u], w[base + 2u], w[base + 3u]);
    }
    var v = vec4<f32>(0.0);
    for (var k = 0u; c + k < p.cols; k++) { v[k] = w[base + k]; }
    return v;
}

// What every product with row r is multiplied by: nothing to undo for f32.
fn row_scale(r: u32) -> f32 {
    return 1.0;
}
