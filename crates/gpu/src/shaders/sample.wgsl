// The policy step on the device: the logit constraints of the lab's engine (logit bias, the
// repetition penalty, the frequency and presence penalties, forbidden ids) from the run's
// constraint table, then temperature, top-k, top-p and min-p in Hugging Face's order, a stable softmax over the survivors, and the lookup of the
// host's uniform draw as NumPy's `Generator.choice` does (cumulative sum in ascending id
// order, normalised by its total, the first entry above the draw); or the argmax (ties to
// the lowest id) when greedy. The host then reads back 20 words, not the logits.
//
// The filters follow the CPU policy's definitions token by token: top-k keeps a token when
// fewer than k logits are strictly greater (ties at the k-th value kept); top-p keeps it
// when the mass strictly above its weight is below p times the total; min-p keeps it when
// its weight is at least min_p times the top weight (which is 1). One workgroup; vocabularies
// up to MAX_VOCAB.
//
// It also writes the model's own distribution (the softmax of the raw logits at temperature
// 1, before any constraint or filter) at the chosen token, for the step record's `model_*`
// fields.
//
// The table (`policy::ConstraintTable`, packed by the runtime): words [0, vocab) are each
// token's bias as f32 bits; words [vocab, 2 vocab) its flags: bit 31 repeated (the
// repetition penalty applies), bit 30 removed, bits 0..30 its count of generated
// occurrences. The host step's order: bias, repetition, frequency and presence, removal.
//
// out: [0] token, [1] survivors, [2] prob, [3] entropy (nats), [4] how many top entries,
//      [5..10] top ids, [10..15] top probs, [15..20] top logits / temperature,
//      most probable first, ties to the lower id;
//      [20] the largest raw logit, [21] Σ exp(logit − largest), [22] the chosen token's raw
//      logit, [23] how many model top entries, [24..29] the model's top ids, [29..34] their
//      raw logits, largest first, ties to the lower id (floats as their bits).

struct Params {
    vocab: u32,
    top_k: u32,
    greedy: u32,
    pad: u32,
    temperature: f32,
    top_p: f32,
    min_p: f32,
    draw: f32,
    repetition: f32,
    frequency: f32,
    presence: f32,
    // 1 when the table applies (a policy with constraints), else 0.
    constrained: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;
@group(0) @binding(3) var<storage, read> table: array<u32>;

const WG: u32 = 256u;
// MAX_VOCAB is declared before this file when the module is made (`Kernels::new`): the
// model's vocabulary, within the runtime's limit.
const TOP: u32 = 5u;
var<workgroup> l: array<f32, MAX_VOCAB>;
var<workgroup> w: array<f32, MAX_VOCAB>;
var<workgroup> keep: array<u32, MAX_VOCAB>;
var<workgroup> red_id: array<u32, WG>;

// The model's own distribution, written by invocation 0 once the token is chosen: the
// raw maximum `m`, the normaliser `raw_total`, the chosen token's logit, and the five largest
// raw logits (a later id enters only when strictly larger, so ties keep the lower id).
fn write_model(m: f32, raw_total: f32, chosen: u32) {
    out[20] = bitcast<u32>(m);
    out[21] = bitcast<u32>(raw_total);
    out[22] = bitcast<u32>(logits[chosen]);
    var ids = array<u32, TOP>(0u, 0u, 0u, 0u, 0u);
    var best = array<f32, TOP>(LOWEST, LOWEST, LOWEST, LOWEST, LOWEST);
    var count = 0u;
    for (var i = 0u; i < p.vocab; i++) {
        let v = logits[i];
        if (count == TOP && v <= best[TOP - 1u]) { continue; }
        var at = min(count, TOP - 1u);
        while (at > 0u && best[at - 1u] < v) {
            best[at] = best[at - 1u];
            ids[at] = ids[at - 1u];
            at--;
        }
        best[at] = v;
        ids[at] = i;
        count = min(count + 1u, TOP);
    }
    out[23] = count;
    for (var s = 0u; s < count; s++) {
        out[24u + s] = ids[s];
        out[29u + s] = bitcast<u32>(best[s]);
    }
}

fn write_top(slot: u32, id: u32, prob: f32, logit: f32) {
    out[5u + slot] = id;
    out[10u + slot] = bitcast<u32>(prob);
    out[15u + slot] = bitcast<u32>(logit);
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) local: vec3<u32>) {
    let lid = local.x;
    let vocab = p.vocab;
    for (var i = lid; i < vocab; i += WG) {
        l[i] = logits[i];
        keep[i] = 1u;
    }
    workgroupBarrier();

    // The model's own distribution: the raw maximum and normaliser, before any filter.
    var local_max = LOWEST;
    for (var i = lid; i < vocab; i += WG) { local_max = max(local_max, l[i]); }
    let raw_max = reduce_max(lid, local_max);
    var local_raw = 0.0;
    for (var i = lid; i < vocab; i += WG) { local_raw += exp(l[i] - raw_max); }
    let raw_total = reduce_sum(lid, local_raw);

    // The constraints, then the maximum the policy's weights are taken from.
    var m = raw_max;
    if (p.constrained == 1u) {
        var local_constrained = LOWEST;
        for (var i = lid; i < vocab; i += WG) {
            let flags = table[vocab + i];
            var v = l[i] + bitcast<f32>(table[i]);
            if ((flags & 0x80000000u) != 0u) {
                v = select(v * p.repetition, v / p.repetition, v > 0.0);
            }
            let count = flags & 0x3fffffffu;
            if (count > 0u) { v = v - f32(count) * p.frequency - p.presence; }
            if ((flags & 0x40000000u) != 0u) {
                v = LOWEST;
                keep[i] = 0u;
            }
            l[i] = v;
            local_constrained = max(local_constrained, v);
        }
        m = reduce_max(lid, local_constrained);
    }

    if (p.greedy == 1u) {
        var best = LOWEST;
        var best_id = 0xffffffffu;
        for (var i = lid; i < vocab; i += WG) {
            if (l[i] > best) { best = l[i]; best_id = i; }
        }
        red[lid] = best;
        red_id[lid] = best_id;
        workgroupBarrier();
        for (var half = WG / 2u; half > 0u; half /= 2u) {
            if (lid < half) {
                let v = red[lid + half];
                let id = red_id[lid + half];
                if (v > red[lid] || (v == red[lid] && id < red_id[lid])) {
                    red[lid] = v;
                    red_id[lid] = id;
                }
            }
            workgroupBarrier();
        }
        if (lid == 0u) {
            out[0] = red_id[0];
            out[1] = 1u;
            out[2] = bitcast<u32>(1.0);
            out[3] = bitcast<u32>(0.0);
            out[4] = 1u;
            write_top(0u, red_id[0], 1.0, red[0]);
            write_model(raw_max, raw_total, red_id[0]);
        }
        return;
    }

    // Top-k: fewer than k logits strictly greater.
    if (p.top_k > 0u && p.top_k < vocab) {
        for (var i = lid; i < vocab; i += WG) {
            var greater = 0u;
            for (var j = 0u; j < vocab; j++) {
                if (l[j] > l[i]) { greater++; }
            }
            if (greater >= p.top_k) { keep[i] = 0u; }
        }
    }
    workgroupBarrier();
    for (var i = lid; i < vocab; i += WG) {
        w[i] = select(0.0, exp((l[i] - m) / p.temperature), keep[i] == 1u);
    }
    workgroupBarrier();

    // Top-p: the mass strictly above a token's weight is below p of the total.
    if (p.top_p < 1.0) {
        var local_total = 0.0;
        for (var i = lid; i < vocab; i += WG) { local_total += w[i]; }
        let nucleus = p.top_p * reduce_sum(lid, local_total);
        for (var i = lid; i < vocab; i += WG) {
            if (keep[i] == 1u) {
                var above = 0.0;
                for (var j = 0u; j < vocab; j++) {
                    if (w[j] > w[i]) { above += w[j]; }
                }
                if (above >= nucleus) { keep[i] = 0u; }
            }
        }
    }
    // Min-p: at least min_p of the top weight, which is exp(0) = 1.
    for (var i = lid; i < vocab; i += WG) {
        if (keep[i] == 1u && w[i] < p.min_p) { keep[i] = 0u; }
    }
    workgroupBarrier();
    for (var i = lid; i < vocab; i += WG) {
        if (keep[i] == 0u) { w[i] = 0.0; }
    }
    workgroupBarrier();

    var local_total = 0.0;
    var local_count = 0.0;
    for (var i = lid; i < vocab; i += WG) {
        local_total += w[i];
        local_count += select(0.0, 1.0, w[i] > 0.0);
    }
    let total = reduce_sum(lid, local_total);
    let survivors = reduce_sum(lid, local_count);
    var local_entropy = 0.0;
    for (var i = lid; i < vocab; i += WG) {
        let q = w[i] / total;
        if (q > 0.0) { local_entropy -= q * log(q); }
    }
    let entropy = reduce_sum(lid, local_entropy);

    if (lid == 0u) {
        // Generator.choice: cumulative probabilities over the normalised weights.
        var norm = 0.0;
        for (var i = 0u; i < vocab; i++) { norm += w[i] / total; }
        var cumulative = 0.0;
        var chosen = 0u;
        for (var i = 0u; i < vocab; i++) {
            if (w[i] > 0.0) {
                cumulative += w[i] / total;
                chosen = i;
                if (cumulative / norm > p.draw) { break; }
            }
        }
        out[0] = chosen;
        out[1] = u32(survivors);
        out[2] = bitcast<u32>(w[chosen] / total);
        out[3] = bitcast<u32>(entropy);

        // The five most probable survivors, ties to the lower id.
        var ids = array<u32, TOP>(0u, 0u, 0u, 0u, 0u);
        var probs = array<f32, TOP>(-1.0, -1.0, -1.0, -1.0, -1.0);
        for (var i = 0u; i < vocab; i++) {
            let q = w[i] / total;
            if (q <= 0.0 || q <= probs[TOP - 1u]) { continue; }
            var at = TOP - 1u;
            while (at > 0u && probs[at - 1u] < q) {
                probs[at] = probs[at - 1u];
                ids[at] = ids[at - 1u];
                at--;
            }
            probs[at] = q;
            ids[at] = i;
        }
        var count = 0u;
        for (var s = 0u; s < TOP; s++) {
            if (probs[s] > 0.0) {
                write_top(s, ids[s], probs[s], l[ids[s]] / p.temperature);
                count++;
            }
        }
        out[4] = count;
        write_model(raw_max, raw_total, chosen);
    }
}
