// Workgroup tree reductions, for the kernels that reduce within one workgroup (rmsnorm,
// attention, softmax, sample, and matvec's norms): `Kernels::new` puts this file before
// each of them. The kernel declares
// WG, its workgroup size (a power of two); every invocation of the workgroup calls these
// together (they hold barriers), so only from uniform control flow.

// Below any value these kernels meet. (Written as -3.402823e38, not f32::MIN's -3.4028235e38:
// Chrome's WGSL parser rejects that literal as beyond f32 instead of rounding it.)
const LOWEST: f32 = -3.402823e38;
var<workgroup> red: array<f32, WG>;

// The sum of every invocation's `v`, returned to all of them.
fn reduce_sum(lid: u32, v: f32) -> f32 {
    red[lid] = v;
    workgroupBarrier();
    for (var half = WG / 2u; half > 0u; half /= 2u) {
        if (lid < half) { red[lid] += red[lid + half]; }
        workgroupBarrier();
    }
    let r = red[0];
    workgroupBarrier();
    return r;
}

// The largest of every invocation's `v`, returned to all of them.
fn reduce_max(lid: u32, v: f32) -> f32 {
    red[lid] = v;
    workgroupBarrier();
    for (var half = WG / 2u; half > 0u; half /= 2u) {
        if (lid < half) { red[lid] = max(red[lid], red[lid + half]); }
        workgroupBarrier();
    }
    let r = red[0];
    workgroupBarrier();
    return r;
}
