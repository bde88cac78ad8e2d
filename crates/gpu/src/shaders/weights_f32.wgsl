// The weight format of a kernel that reads a matrix, f32: `Kernels::new` puts this file (or
// weights_int8.wgsl) before each such kernel, so the kernel is written once and compiled
// once per format. The kernel declares `p` with `groups`.
//
// The layout is column-major in groups of four rows: element [c][g] holds W[4g..4g+4][c]
// (`p.groups` = rows / 4, rounded up; the padding rows are zeros). Consecutive invocations
// that each take four rows then read consecutive memory, one 16-byte load per column.

@group(0) @binding(4) var<storage, read> w: array<vec4<f32>>;

// W[4g..4g+4][c], unscaled.
fn weights4(g: u32, c: u32) -> vec4<f32> {
    return w[c * p.groups + g];
}

// W[r][c], unscaled.
fn weight(r: u32, c: u32) -> f32 {
    return w[c * p.groups + r / 4u][r % 4u];
}

// What the products with rows 4g..4g+4 are multiplied by: nothing to undo for f32.
fn row_scales4(g: u32) -> vec4<f32> {
    return vec4<f32>(1.0);
}

fn row_scale(r: u32) -> f32 {
    return 1.0;
}
