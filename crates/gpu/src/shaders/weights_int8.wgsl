// The weight format of a kernel that reads a matrix, int8, as the CPU reference stores it:
// W[r][c] = scales[r] * q[r][c]. The layout is that of weights_f32.wgsl, each group of four
// rows' values in one u32 word (row 4g + k in byte k); `scales` is padded with zeros to
// whole groups.

@group(0) @binding(5) var<storage, read> wq: array<u32>;
@group(0) @binding(6) var<storage, read> scales: array<vec4<f32>>;

fn byte_at(word: u32, k: u32) -> f32 {
    return f32(bitcast<i32>(word << (24u - 8u * k)) >> 24u);
}

// q[4g..4g+4][c].
fn weights4(g: u32, c: u32) -> vec4<f32> {
    let word = wq[c * p.groups + g];
    return vec4<f32>(byte_at(word, 0u), byte_at(word, 1u), byte_at(word, 2u), byte_at(word, 3u));
}

// q[r][c].
fn weight(r: u32, c: u32) -> f32 {
    return byte_at(wq[c * p.groups + r / 4u], r % 4u);
}

fn row_scales4(g: u32) -> vec4<f32> {
    return scales[g];
}

fn row_scale(r: u32) -> f32 {
    return scales[r / 4u][r % 4u];
}
