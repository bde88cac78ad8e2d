// The MLP's activation of a prefill block, SwiGLU: act[t][j] = silu(gate) * up, from the
// stacked projection's [n][gate | up] (2 d_ff per position).

struct Step { start: u32, n: u32 }
struct Params { cols: u32, pad0: u32, pad1: u32, pad2: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> gate_up: array<f32>;
@group(0) @binding(3) var<storage, read_write> act: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i >= step.n * p.cols) { return; }
    let at = (i / p.cols) * 2u * p.cols + i % p.cols;
    let g = gate_up[at];
    act[i] = g / (1.0 + exp(-g)) * gate_up[at + p.cols];
}
