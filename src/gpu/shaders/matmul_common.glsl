// What every matrix product shader shares: its parameters and the order of
// its sums. A product of `rows` weight rows by `tokens` activation rows; each
// row's columns (from block col_begin on) are cut into `units` dots of
// `blocks` blocks each (F32/F16/BF16: elements; the last one what is left of
// n_blocks), every dot in the canonical order from zero: units = 1 is the
// plain product, more are the reduction units of wo and w_down
// (model/reduction_units.h) that add_units.comp snaps and sums. Dot u of row
// r and token t goes to y[y_begin + t * y_stride + r * units + u]; activation
// rows hold only the product's own columns (x_stride blocks or floats apart).
//
// One workgroup per row and tile of up to 8 tokens (rows beyond the
// dispatch's width loop), so the threads read a row's blocks side by side:
//   block types define block_term(r, t, b, a, d): block b's step of the
//     canonical chain, acc = fma(a, d, acc) (ops/row_groups.h). The threads
//     compute the steps' terms (the exact integer sums, the scales) in
//     parallel into shared memory; then one thread per unit runs its chain
//     in block order, each fma rounded once;
//   float types (FLOAT_ROWS) define element(r, i): the 16 lanes of each
//     unit's canonical dot (ops/float_canonical.h) run on 16 threads, lane j
//     taking elements j, j + 16, ... in order (BF16_PAIRS: the pairs 2j + 1,
//     2j of each chunk of 32), then one thread adds the fixed tree.
// With `serial` (devices that are CPUs, such as lavapipe, where a workgroup's
// barriers cost more than the parallel reads win), one invocation computes a
// whole dot instead: invocation x = r * units + u, y = token t. Block types
// have a third layout, tiles (serial = 2: prompts), below. The order
// of every rounding is the CPU's, whatever the thread layout.
#ifdef SUBGROUP_ROWS
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#endif
#include "exact_fma.glsl"

layout(local_size_x = 64) in;
const uint kTokens = 8u;  // tokens a workgroup takes at once (matmul.h's product_groups)
layout(std430, set = 0, binding = 0) readonly buffer W { uint w[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Y { float y[]; };
layout(push_constant) uniform Params {
    uint blocks;      // blocks (F32/F16: elements) of one dot
    uint units;       // dots per row
    uint rows;
    uint row_blocks;  // blocks (elements) of a whole weight row
    uint col_begin;   // the first block (element) of a row this product reads; a multiple of
                      // row_blocks skips that many whole rows (an expert's band of a stacked matrix)
    uint x_stride;    // one activation row, in blocks (F32/F16: floats)
    uint y_stride;    // one output row, in floats
    uint tokens;
    uint n_blocks;    // blocks (elements) of the whole product: the last unit takes what is left
    uint x_begin;     // the first activation row it reads (token t reads row x_begin + t)
    uint y_begin;     // where its output starts in y, in floats
    uint serial;      // 1: one invocation per dot, the whole chain its own (CPU devices)
} p;

uint w_byte(uint o) { return (w[o >> 2] >> ((o & 3u) * 8u)) & 0xffu; }
// The four bytes from byte o on, as one word (o need not be a word's start:
// buffers are whole words, so the next word is there).
uint w_word(uint o) {
    const uint s = (o & 3u) * 8u, lo = w[o >> 2];
    return s == 0u ? lo : (lo >> s) | (w[(o >> 2) + 1u] << (32u - s));
}
int signed_byte(uint b) { return int(b << 24) >> 24; }

#ifdef FLOAT_ROWS
// Weight element i of row r (counted from col_begin), and activation row t's.
float element(uint r, uint i);
float activation(uint t, uint i);

shared float lanes_of[4][16];

#ifdef BF16_PAIRS
// BF16 by BF16 in the pairs order of ops/float_canonical.h (vdpbf16ps's):
// lane j takes elements 2j + 1, then 2j, of each chunk of 32, zero past
// `count`; each step flushes values below the smallest normal float to a
// zero of their sign, its inputs and its result.
float flush_tiny(float v) {
    return abs(v) < 1.17549435e-38 ? uintBitsToFloat(floatBitsToUint(v) & 0x80000000u) : v;
}
float pair_step(uint r, uint t, uint first, uint count, uint i, float acc) {
    const bool in_row = i < count;
    const float a = in_row ? flush_tiny(element(r, first + i)) : 0.0;
    const float b = in_row ? flush_tiny(activation(p.x_begin + t, first + i)) : 0.0;
    return flush_tiny(exact_fma(a, b, acc));
}
#endif

void serial_dot() {
    const uint g = gl_GlobalInvocationID.x, t = gl_GlobalInvocationID.y;
    if (g >= p.rows * p.units || t >= p.tokens) return;
    const uint r = g / p.units, u = g % p.units;
    const uint first = u * p.blocks, count = min(p.blocks, p.n_blocks - first);
    precise float l[16];
    for (int j = 0; j < 16; ++j) l[j] = 0.0;
#ifdef BF16_PAIRS
    for (uint c = 0u; c < count; c += 32u) {
        for (uint j = 0u; j < 16u; ++j) {
            l[j] = pair_step(r, t, first, count, c + 2u * j + 1u, l[j]);
            l[j] = pair_step(r, t, first, count, c + 2u * j, l[j]);
        }
    }
#else
    for (uint i = 0; i < count; ++i) l[i % 16u] = exact_fma(element(r, first + i), activation(p.x_begin + t, first + i), l[i % 16u]);
    for (uint i = count; i % 16u != 0u; ++i) l[i % 16u] = exact_fma(0.0, 0.0, l[i % 16u]);
#endif
    for (int s = 8; s >= 1; s /= 2) {
        for (int j = 0; j < s; ++j) l[j] = l[j] + l[j + s];
    }
    y[p.y_begin + t * p.y_stride + g] = l[0];
}

// Lane `lane` of unit u's canonical dot of row r with token t: elements
// lane, lane + 16, ... in order, padded to whole rounds of 16 with zeros as
// the CPU pads.
float lane_sum(uint r, uint t, uint u, uint lane) {
    const uint first = u * p.blocks, count = min(p.blocks, p.n_blocks - first);
    precise float acc = 0.0;
#ifdef BF16_PAIRS
    for (uint c = 0u; c < count; c += 32u) {
        acc = pair_step(r, t, first, count, c + 2u * lane + 1u, acc);
        acc = pair_step(r, t, first, count, c + 2u * lane, acc);
    }
#else
    for (uint i = lane; i < count; i += 16u) acc = exact_fma(element(r, first + i), activation(p.x_begin + t, first + i), acc);
    if (lane >= count % 16u && count % 16u != 0u) acc = exact_fma(0.0, 0.0, acc);
#endif
    return acc;
}

void main() {
    if (p.serial != 0u) {
        serial_dot();
        return;
    }
    // A tile of kTokens tokens per workgroup: the row's weights are read for
    // all of them at once (prompts).
    const uint t0 = gl_WorkGroupID.y * kTokens, lid = gl_LocalInvocationID.x;
    const uint lane = lid % 16u, slot = lid / 16u;
    const uint tiles = min(kTokens, p.tokens - t0);
#ifdef SUBGROUP_TREE
    if (subgroups_hold_lanes()) {
        // No barrier: each dot's 16 lanes finish it among themselves (the
        // condition below holds for all 16 or none of them).
        for (uint r = gl_WorkGroupID.x; r < p.rows; r += gl_NumWorkGroups.x) {
            for (uint d0 = 0; d0 < tiles * p.units; d0 += 4u) {
                const uint dot = d0 + slot;
                const uint t = t0 + dot / p.units, u = dot % p.units;
                if (dot < tiles * p.units) {
                    const float sum = lane_tree(lane_sum(r, t, u, lane));
                    if (lane == 0u) y[p.y_begin + t * p.y_stride + r * p.units + u] = sum;
                }
            }
        }
        return;
    }
#endif
    for (uint r = gl_WorkGroupID.x; r < p.rows; r += gl_NumWorkGroups.x) {
        // Every (token, unit) dot, four at a time (16 lanes each).
        for (uint d0 = 0; d0 < tiles * p.units; d0 += 4u) {
            const uint dot = d0 + slot;
            const uint t = t0 + dot / p.units, u = dot % p.units;
            if (dot < tiles * p.units) lanes_of[slot][lane] = lane_sum(r, t, u, lane);
            barrier();
            if (lane == 0u && dot < tiles * p.units) {
                precise float l[16];
                for (int j = 0; j < 16; ++j) l[j] = lanes_of[slot][j];
                for (int s = 8; s >= 1; s /= 2) {
                    for (int j = 0; j < s; ++j) l[j] = l[j] + l[j + s];
                }
                y[p.y_begin + t * p.y_stride + r * p.units + u] = l[0];
            }
            barrier();
        }
    }
}
#elif defined(SUBGROUP_ROWS)
// A subgroup per row, for one token's products on GPUs (a row of blocks is a
// few hundred bytes there, too little for a workgroup's 64 threads): the
// lanes split each block's words of codes, per_block lanes a block and
// span blocks side by side, so neighbouring lanes read neighbouring words.
// Block types define
//   block_words(): the words of a block's codes; lane_sums(r, t, b, k): the
//     exact integer sums (two of them, the
//     type says which) of word k of block b's codes;
//   block_finish(r, t, b, sums, a, d): block b's step of the canonical chain
//     from the whole block's sums.
// The lanes' sums are added by shuffles (exact integers: any order gives the
// same), then every lane runs the row's chain acc = fma(a, d, acc) over the
// blocks in order, each block's step shuffled from its first lane. No shared
// memory, no barrier.
uint block_words();
ivec2 lane_sums(uint r, uint t, uint b, uint k);
void block_finish(uint r, uint t, uint b, ivec2 sums, out float a, out float d);

void main() {
    const uint size = gl_SubgroupSize, lane = gl_SubgroupInvocationID;
    // At most 8 lanes a block: each lane takes several words, and a subgroup
    // of 32 steps through 4 blocks at once (a shorter chain of steps per row).
    const uint words = block_words(), per_block = min(min(words, 8u), size), span = size / per_block;
    const uint mine = lane / per_block, first_word = lane % per_block;
    const uint stride = gl_NumWorkGroups.x * gl_NumSubgroups;
    for (uint r = gl_WorkGroupID.x * gl_NumSubgroups + gl_SubgroupID; r < p.rows; r += stride) {
        for (uint t = 0; t < p.tokens; ++t) {
            for (uint u = 0; u < p.units; ++u) {
                const uint first = u * p.blocks, last = min(p.n_blocks, first + p.blocks);
                float acc = 0.0;
                for (uint b0 = first; b0 < last; b0 += span) {
                    const uint b = b0 + mine;
                    ivec2 sums = ivec2(0);
                    if (b < last) {
                        for (uint k = first_word; k < words; k += per_block) sums += lane_sums(r, p.x_begin + t, b, k);
                    }
                    for (uint d = per_block / 2u; d >= 1u; d /= 2u) sums += subgroupShuffleXor(sums, d);
                    float a = 0.0, d = 0.0;
                    if (b < last) block_finish(r, p.x_begin + t, b, sums, a, d);
                    const uint n = min(span, last - b0);
                    for (uint k = 0; k < n; ++k) {
                        acc = exact_fma(subgroupShuffle(a, k * per_block), subgroupShuffle(d, k * per_block), acc);
                    }
                }
                if (lane == 0u) y[p.y_begin + t * p.y_stride + r * p.units + u] = acc;
            }
        }
    }
}
#else
// Block b's step (counted from col_begin) of row r with activation row t:
// the chain goes acc = fma(a, d, acc).
void block_term(uint r, uint t, uint b, out float a, out float d);

const uint kChunk = 256u;  // blocks whose terms the workgroup holds at once, per token (16 KiB in all: Vulkan's least)
shared float term_a[kTokens * kChunk], term_d[kTokens * kChunk];

void serial_dot() {
    const uint g = gl_GlobalInvocationID.x, t = gl_GlobalInvocationID.y;
    if (g >= p.rows * p.units || t >= p.tokens) return;
    const uint r = g / p.units, u = g % p.units;
    const uint first = u * p.blocks, last = min(p.n_blocks, first + p.blocks);
    float acc = 0.0;
    for (uint b = first; b < last; ++b) {
        float a, d;
        block_term(r, p.x_begin + t, b, a, d);
        acc = exact_fma(a, d, acc);
    }
    y[p.y_begin + t * p.y_stride + g] = acc;
}

// Tiles (prompts; serial = 2): invocation i of a workgroup's 64
// runs the whole chains of kTileDots neighbouring dots (g = r * units + u,
// as serial_dot numbers them) for kTileTokens neighbouring tokens, each
// chain in block order as serial_dot runs it: no shared memory, no barrier,
// every invocation busy. A workgroup covers 8 x kTileDots dots by
// 8 x kTileTokens tokens, so a block of weights is read by the 8 invocations
// of its token tiles, and an activation block by those of its dots, at
// nearly the same time (the cache serves the rest), and within an
// invocation one weight block serves its kTileTokens tokens.
// The tile's shape: specialization constants (gpu/shaders.h's product_tile,
// TESSERA_VULKAN_TILE), so a device can be measured in several.
layout(constant_id = 1) const uint kTileDots = 2u;
layout(constant_id = 2) const uint kTileTokens = 4u;

void tiled_dots() {
    const uint lid = gl_LocalInvocationID.x;
    const uint t0 = (gl_WorkGroupID.y * 8u + lid / 8u) * kTileTokens;  // 8 x 8 invocations
    if (t0 >= p.tokens) return;
    const uint dots = p.rows * p.units, stride = gl_NumWorkGroups.x * 8u * kTileDots;
    for (uint g0 = (gl_WorkGroupID.x * 8u + lid % 8u) * kTileDots; g0 < dots; g0 += stride) {
        for (uint i = 0u; i < kTileDots && g0 + i < dots; ++i) {
            const uint g = g0 + i, r = g / p.units, u = g % p.units;
            const uint first = u * p.blocks, last = min(p.n_blocks, first + p.blocks);
            float acc[kTileTokens];
            for (uint j = 0u; j < kTileTokens; ++j) acc[j] = 0.0;
            for (uint b = first; b < last; ++b) {
                for (uint j = 0u; j < kTileTokens; ++j) {
                    if (t0 + j < p.tokens) {
                        float a, d;
                        block_term(r, p.x_begin + t0 + j, b, a, d);
                        acc[j] = exact_fma(a, d, acc[j]);
                    }
                }
            }
            for (uint j = 0u; j < kTileTokens; ++j) {
                if (t0 + j < p.tokens) y[p.y_begin + (t0 + j) * p.y_stride + g] = acc[j];
            }
        }
    }
}

void main() {
    if (p.serial == 2u) {
        tiled_dots();
        return;
    }
    if (p.serial != 0u) {
        serial_dot();
        return;
    }
    // A tile of kTokens tokens per workgroup: the row's blocks are read for
    // all of them at once (prompts); thread t * units + u runs the chain of
    // token t's unit u.
    const uint t0 = gl_WorkGroupID.y * kTokens, lid = gl_LocalInvocationID.x;
    const uint tiles = min(kTokens, p.tokens - t0);
    const uint mine_t = lid / p.units, mine_u = lid % p.units;  // units <= 8 (model/reduction_units.h)
    const bool chains = mine_t < tiles;
    for (uint r = gl_WorkGroupID.x; r < p.rows; r += gl_NumWorkGroups.x) {
        float acc = 0.0;
        for (uint c0 = 0; c0 < p.n_blocks; c0 += kChunk) {
            const uint c1 = min(p.n_blocks, c0 + kChunk), width = c1 - c0;
            for (uint k = lid; k < tiles * width; k += 64u) {
                const uint t = k / width, b = c0 + k % width;
                float a, d;
                block_term(r, p.x_begin + t0 + t, b, a, d);
                term_a[t * kChunk + b - c0] = a;
                term_d[t * kChunk + b - c0] = d;
            }
            barrier();
            if (chains) {
                const uint first = max(c0, mine_u * p.blocks), last = min(c1, min(p.n_blocks, (mine_u + 1u) * p.blocks));
                for (uint b = first; b < last; ++b) {
                    acc = exact_fma(term_a[mine_t * kChunk + b - c0], term_d[mine_t * kChunk + b - c0], acc);
                }
            }
            barrier();
        }
        if (chains) y[p.y_begin + (t0 + mine_t) * p.y_stride + r * p.units + mine_u] = acc;
    }
}
#endif
