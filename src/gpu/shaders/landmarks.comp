#version 450
#extension GL_GOOGLE_include_directive : require
// Sparse attention's landmarks (attn/kv_cache.cpp, update_landmark): for
// each batch row whose position ends a block of lm_block positions, that
// block's mean key and value per KV head: the decoded elements summed in
// double in position order, divided by the block's length rounded once to
// double, then to the nearest float. Invocation x: an element of a KV
// head's row (kv_heads * head_dim of them); y: the batch row.
#include "exact_math.glsl"
#include "kv_rows.glsl"

layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) readonly buffer KC { uint kc[]; };
layout(std430, set = 0, binding = 1) readonly buffer VC { uint vc[]; };
layout(std430, set = 0, binding = 2) writeonly buffer LK { float lk[]; };
layout(std430, set = 0, binding = 3) writeonly buffer LV { float lv[]; };
layout(std430, set = 0, binding = 4) readonly buffer Rows { uvec4 rows[]; };  // sequence, position (attention.comp)
layout(push_constant) uniform Params {
    uint kv_heads; uint head_dim; uint n_ctx; uint tokens; uint k_type; uint v_type; uint lm_block;
} p;

#include "kv_decode.glsl"

float block_mean(bool is_k, uint type, uint row0, uint i) {
    precise double sum = 0.0;
    for (uint r = 0; r < p.lm_block; ++r) {
        precise double added = sum + double(cached(type, row0 + r, i, is_k));
        sum = added;
    }
    if (sum == 0.0) return 0.0;
    return nearest_float(exact_div_d(sum, double(p.lm_block)));
}

void main() {
    const uint g = gl_GlobalInvocationID.x;
    const uint t = gl_GlobalInvocationID.y;
    if (g >= p.kv_heads * p.head_dim || t >= p.tokens) return;
    const uint pos = rows[t].y;
    if ((pos + 1u) % p.lm_block != 0u) return;
    const uint h = g / p.head_dim, i = g % p.head_dim;
    const uint kv_head = rows[t].x * p.kv_heads + h;
    const uint b = pos / p.lm_block;
    const uint row0 = kv_head * p.n_ctx + b * p.lm_block;  // the block's first cached row
    const uint at = (kv_head * (p.n_ctx / p.lm_block) + b) * p.head_dim + i;
    lk[at] = block_mean(true, p.k_type, row0, i);
    lv[at] = block_mean(false, p.v_type, row0, i);
}
