// The weight format of a kernel that reads a matrix, int8: four values packed to a u32 word
// (`p.row_words` words per row, the last padded with zeros) and one f32 scale per row, as
// the CPU reference stores them: W[r][c] = scales[r] * q[r][c]. See weights_f32.wgsl.

@group(0) @binding(5) var<storage, read> wq: array<u32>;
@group(0) @binding(6) var<storage, read> scales: array<f32>;

fn byte_at(word: u32, k: u32) -> f32 {
    return f32(bitcast<i32>(word << (24u - 8u * k)) >> 24u);
}

// q[r][c]: the unscaled weight.
fn weight(r: u32, c: u32) -> f32 {
    return byte_at(wq[r * p.row_words + c / 4u], c % 4u);
}

// q[r][c..c+4] for c a multiple of 4 (the padding reads as zeros).
fn weights4(r: u32, c: u32) -> vec4<f32> {
    let word = wq[r * p.row_words + c / 4u];
    return vec4<f32>(byte_at(word, 0u), byte_at(word, 1u), byte_at(word, 2u), byte_at(word, 3u));
}

fn row_scale(r: u32) -> f32 {
    return scales[r];
}
