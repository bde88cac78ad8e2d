// Rotary position embedding, "rotate half": in each head the pair (i, i + head_dim/2) of
// position start + t turns by the angle whose cos and sin the tables hold
// ([context][head_dim/2], computed once on the CPU exactly as the reference does).
// In place over a [n][heads][head_dim] block: the queries, then the keys.

struct Step { start: u32, n: u32 }
struct Params { heads: u32, head_dim: u32, pad0: u32, pad1: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> cos_table: array<f32>;
@group(0) @binding(3) var<storage, read> sin_table: array<f32>;
@group(0) @binding(4) var<storage, read_write> v: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let half = p.head_dim / 2u;
    let idx = gid.x;
    if (idx >= step.n * p.heads * half) { return; }
    let i = idx % half;
    let th = idx / half;
    let h = th % p.heads;
    let t = th / p.heads;
    let base = (t * p.heads + h) * p.head_dim;
    let at = (step.start + t) * half + i;
    let c = cos_table[at];
    let s = sin_table[at];
    let a = v[base + i];
    let b = v[base + i + half];
    v[base + i] = a * c - b * s;
    v[base + i + half] = a * s + b * c;
}
