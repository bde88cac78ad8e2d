// Writes the block's keys and values into the resident KV cache at positions start..start+n.
// Block layout [n][kv_heads][head_dim]; cache layout [layer][kv_head][position][head_dim],
// the same as the CPU reference's.

struct Step { start: u32, n: u32 }
struct Params { layer: u32, kv_heads: u32, head_dim: u32, context: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read_write> k_cache: array<f32>;
@group(0) @binding(5) var<storage, read_write> v_cache: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let idx = gid.x;
    let kv = p.kv_heads * p.head_dim;
    if (idx >= step.n * kv) { return; }
    let t = idx / kv;
    let h = (idx % kv) / p.head_dim;
    let i = idx % p.head_dim;
    let at = ((p.layer * p.kv_heads + h) * p.context + step.start + t) * p.head_dim + i;
    k_cache[at] = k[idx];
    v_cache[at] = v[idx];
}
