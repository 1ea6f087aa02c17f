#version 450
#extension GL_GOOGLE_include_directive : require
// Stores the K and V rows of `tokens` batch rows (each at its sequence and
// position) in one layer's caches ([sequence][kv_head][position] rows) (kv_rows.glsl): F32 copied, F16 rounded as util/fp16.h rounds, Q8_0
// and Q4_0 quantized block by block as the CPU's from_float
// (block_quantize.glsl). Invocation x: an element of a head's row (F32 and
// F16 write their word; the row's first writes a block type's whole row);
// y: the position.
#include "block_quantize.glsl"
#include "kv_rows.glsl"

layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) readonly buffer K { float k[]; };
layout(std430, set = 0, binding = 1) readonly buffer V { float v[]; };
layout(std430, set = 0, binding = 2) writeonly buffer KC { uint kc[]; };
layout(std430, set = 0, binding = 3) writeonly buffer VC { uint vc[]; };
layout(std430, set = 0, binding = 4) readonly buffer Rows { uvec4 rows[]; };  // sequence, position (attention.comp)
layout(push_constant) uniform Params {
    uint kv_heads; uint head_dim; uint n_ctx; uint tokens; uint stride; uint k_type; uint v_type;
} p;

uint bytes_[272];  // a row of up to 256 values in blocks (8 x 34)

// Word w of the row whose bytes are in bytes_.
uint packed_word(uint w, uint n_bytes) {
    uint v = 0u;
    for (uint b = 0; b < 4u; ++b) {
        if (4u * w + b < n_bytes) v |= bytes_[4u * w + b] << (8u * b);
    }
    return v;
}

void put(bool is_k, uint at, uint word) {
    if (is_k) {
        kc[at] = word;
    } else {
        vc[at] = word;
    }
}
float source(bool is_k, uint at) { return is_k ? k[at] : v[at]; }

// Element i's word of the cached row (F32, F16), or the whole row (a block
// type, from its element 0).
void store_row(bool is_k, uint type, uint src, uint row, uint i) {
    const uint words = row_words(type, p.head_dim);
    const uint at = row * words;
    if (type == kF32) {
        put(is_k, at + i, floatBitsToUint(source(is_k, src + i)));
        return;
    }
    if (type == kF16) {
        if (i % 2u == 0u) {
            put(is_k, at + i / 2u,
                f32_to_f16_bits(source(is_k, src + i)) | (f32_to_f16_bits(source(is_k, src + i + 1u)) << 16));
        }
        return;
    }
    if (i != 0u) return;
    const uint block_bytes = type == kQ8_0 ? 34u : 18u;
    for (uint b = 0; b < p.head_dim / 32u; ++b) {
        float x[32];
        for (uint j = 0; j < 32u; ++j) x[j] = source(is_k, src + 32u * b + j);
        int q[32];
        const uint h = type == kQ8_0 ? q8_0_block(x, q) : q4_0_block(x, q);
        const uint o = b * block_bytes;
        bytes_[o] = h & 0xffu;
        bytes_[o + 1u] = h >> 8;
        if (type == kQ8_0) {
            for (uint j = 0; j < 32u; ++j) bytes_[o + 2u + j] = uint(q[j]) & 0xffu;
        } else {
            for (uint j = 0; j < 16u; ++j) bytes_[o + 2u + j] = uint(q[j]) | (uint(q[j + 16u]) << 4);
        }
    }
    const uint n_bytes = p.head_dim / 32u * block_bytes;
    for (uint w = 0; w < words; ++w) put(is_k, at + w, packed_word(w, n_bytes));
}

void main() {
    const uint g = gl_GlobalInvocationID.x;
    const uint t = gl_GlobalInvocationID.y;
    if (g >= p.kv_heads * p.head_dim || t >= p.tokens) return;
    const uint h = g / p.head_dim, i = g % p.head_dim;
    const uint src = t * p.stride + h * p.head_dim;  // the head's row of K (and V)
    const uint row = (rows[t].x * p.kv_heads + h) * p.n_ctx + rows[t].y;  // the cached row: [seq][head][pos]
    store_row(true, p.k_type, src, row, i);
    store_row(false, p.v_type, src, row, i);
}
