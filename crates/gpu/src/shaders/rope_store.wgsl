// A prefill block's queries, keys and values from the stacked projection
// ([n][q | k | v], rows d + 2 kv per position): RoPE, "rotate half", turns each query and
// key pair (i, i + head_dim/2) of position start + t by the angle whose cos and sin the
// tables hold (`rope`: [context][head_dim/2] cos, then the same of sin, computed once on
// the CPU exactly as the reference does); the queries go to `q` ([n][heads][head_dim]), the keys and values into the
// resident KV cache at positions start..start+n, values laid out
// [layer][kv_head][position][head_dim] and keys transposed, [layer][kv_head][head_dim][position],
// as the CPU reference keeps them. One invocation per query pair, key pair and value.

struct Step { start: u32, n: u32 }
struct Params { layer: u32, heads: u32, kv_heads: u32, head_dim: u32, context: u32, pad0: u32, pad1: u32, pad2: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> qkv: array<f32>;
@group(0) @binding(3) var<storage, read_write> q: array<f32>;
@group(0) @binding(4) var<storage, read> rope: array<f32>;
@group(0) @binding(5) var<storage, read_write> k_cache: array<f32>;
@group(0) @binding(6) var<storage, read_write> v_cache: array<f32>;

fn turn(a: f32, b: f32, at: u32) -> vec2<f32> {
    let c = rope[at];
    let s = rope[p.context * (p.head_dim / 2u) + at];
    return vec2<f32>(a * c - b * s, a * s + b * c);
}

fn cache_at(h: u32, position: u32, i: u32) -> u32 {
    return ((p.layer * p.kv_heads + h) * p.context + position) * p.head_dim + i;
}

fn key_at(h: u32, position: u32, i: u32) -> u32 {
    return ((p.layer * p.kv_heads + h) * p.head_dim + i) * p.context + position;
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let half = p.head_dim / 2u;
    let q_rows = p.heads * p.head_dim;
    let kv = p.kv_heads * p.head_dim;
    let q_pairs = p.heads * half;
    let k_pairs = p.kv_heads * half;
    let per_position = q_pairs + k_pairs + kv;
    if (gid.x >= step.n * per_position) { return; }
    let t = gid.x / per_position;
    let j = gid.x % per_position;
    let position = step.start + t;
    let row = t * (q_rows + 2u * kv);
    if (j < q_pairs) {
        let i = j % half;
        let r = (j / half) * p.head_dim + i;
        let turned = turn(qkv[row + r], qkv[row + r + half], position * half + i);
        q[t * q_rows + r] = turned.x;
        q[t * q_rows + r + half] = turned.y;
    } else if (j < q_pairs + k_pairs) {
        let pair = j - q_pairs;
        let h = pair / half;
        let i = pair % half;
        let r = row + q_rows + h * p.head_dim + i;
        let turned = turn(qkv[r], qkv[r + half], position * half + i);
        k_cache[key_at(h, position, i)] = turned.x;
        k_cache[key_at(h, position, i + half)] = turned.y;
    } else {
        let e = j - q_pairs - k_pairs;
        v_cache[cache_at(e / p.head_dim, position, e % p.head_dim)] = qkv[row + q_rows + kv + e];
    }
}
