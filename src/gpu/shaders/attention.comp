#version 450
#extension GL_GOOGLE_include_directive : require
// One query head of one position per workgroup, as attn/attention.cpp
// computes it over keys and values of any KV type (kv_rows.glsl): scores
// q . k_p in the canonical float order (16 lanes, the fixed tree) over float
// keys, and over the decoded elements of block keys in a batched run; in a
// rowwise one (see below) over block keys, the query quantized to Q8_0 as
// the CPU's from_float quantizes it (block_quantize.glsl) and the canonical
// block order of ops/row_groups.h (an exact integer sum per block, then
// acc = fma(float(s), d_k * d_q, acc)); each score times the scale rounded
// once (then soft-capped, with
// Highway's tanh, where the family caps); softmax over the visible positions
// [first, pos] (canonical exp, the 16-lane sum counted from `first`, one
// rounded reciprocal). The output then as the CPU's two paths give it:
//   rowwise (a position decoding, runs of at most 32): out_i = sum over the
//     visible positions in order of fma(w_p, v_p,i), from zero
//     (ops/weighted_rows.h);
//   batched (a longer run, a prompt): the canonical float dot of the
//     weights and V's column i over the positions the last query of the
//     position's block of 32 reads, the weights outside [first, pos] zero.
// Sparse attention (attn/sparse_attention.cpp), for a row the host marks
// sparse: one softmax over [its window's rows | the scattered rows | the
// landmark blocks' mean keys (float)], then the window's weighted sum, plus
// the scattered rows' sum, plus the landmarks' (each from zero, added in
// that order, as the CPU adds them).
// Scores live in `scores` (row tl = t - t_begin of this dispatch, head h,
// p.score_span floats).
#include "block_quantize.glsl"
#include "hwy_tanh.glsl"
#include "kv_rows.glsl"

layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) readonly buffer Q { float q[]; };
layout(std430, set = 0, binding = 1) readonly buffer KC { uint kc[]; };
layout(std430, set = 0, binding = 2) readonly buffer VC { uint vc[]; };
layout(std430, set = 0, binding = 3) writeonly buffer Out { float out_[]; };
layout(std430, set = 0, binding = 4) buffer Scores { float scores[]; };
// gpt-oss's sinks: query head h's softmax counts one more logit, sinks[h],
// that has no value (the CPU's weigh: appended last, unscaled).
layout(std430, set = 0, binding = 5) readonly buffer Sinks { float sinks[]; };
// Each batch row's sequence, position, index in its run and the run's
// length (runs of one sequence's consecutive positions: a prompt, or a
// decoding sequence of a continuous batch).
layout(std430, set = 0, binding = 6) readonly buffer Rows { uvec4 rows[]; };
// With track: the attention each position received, per sequence, in the
// CPU's fixed point (attn/attention_mass.h: weight * 2^32 + 0.5, truncated),
// 64-bit counters as pairs of words added with 32-bit atomics and a carry:
// integer sums, so the order of the workgroups does not matter.
layout(std430, set = 0, binding = 7) buffer Mass { uint mass[]; };
// With sparse: per batch row 8 words {mode, window_begin, n_tokens,
// n_blocks, offset}, mode 0 as dense decides, 1 dense and rowwise, 2
// sparse; its scattered positions and then its landmark blocks at `offset`.
layout(std430, set = 0, binding = 8) readonly buffer Sparse { uint sp[]; };
// The landmarks: block b's mean key and value of a sequence's KV head, at
// ((seq * kv_heads + head) * n_ctx / lm_block + b) * head_dim (landmarks.comp).
layout(std430, set = 0, binding = 9) readonly buffer LK { float lk[]; };
layout(std430, set = 0, binding = 10) readonly buffer LV { float lv[]; };
layout(push_constant) uniform Params {
    uint head_dim; uint q_per_kv; uint n_heads; uint n_ctx;
    uint t_begin;
    uint window; float scale; uint k_type; uint v_type;
    uint stride;
    float soft_cap;  // > 0: scores become cap * tanh(score / cap) after the scale (Gemma 2)
    uint has_sinks;
    uint track;
    uint sparse;      // 1: rows follow their Sparse entry
    uint lm_block;    // positions per landmark block
    uint score_span;  // floats of scores per row and head
} p;

#include "kv_decode.glsl"

shared float part[64];
// The query head in Q8_0 (block keys, rowwise): codes and each block's scale
// (the stored half's value). Heads of block caches are at most 256 wide.
shared int q_codes[256];
shared float q_scales[8];
shared float lane_sums[16];
shared float shared_max, shared_inv;

float tree16(inout float lanes[16]) {
    for (int s = 8; s >= 1; s /= 2) {
        for (int j = 0; j < s; ++j) {
            precise float v = lanes[j] + lanes[j + s];
            lanes[j] = v;
        }
    }
    return lanes[0];
}

// q . k of a cached key row: with the quantized query over block keys, or
// in the 16-lane float order over decoded elements.
float key_dot(bool block_keys, uint krow, uint qbase) {
    const uint hd = p.head_dim;
    if (block_keys) {
        precise float acc = 0.0;
        for (uint b = 0; b < hd / 32u; ++b) {
            const uint o = block_at(p.k_type, krow, 32u * b);
            int sum = 0;
            for (uint j = 0; j < 32u; ++j) sum += block_code(true, p.k_type, o, 32u * b + j) * q_codes[32u * b + j];
            precise float d = block_scale(true, o) * q_scales[b];
            acc = exact_fma(float(sum), d, acc);
        }
        return acc;
    }
    precise float lanes[16];
    for (int j = 0; j < 16; ++j) lanes[j] = 0.0;
    for (uint i = 0; i < hd; ++i) {
        lanes[i % 16u] = exact_fma(cached(p.k_type, krow, i, true), q[qbase + i], lanes[i % 16u]);
    }
    for (uint i = hd; i % 16u != 0u; ++i) lanes[i % 16u] = exact_fma(0.0, 0.0, lanes[i % 16u]);
    return tree16(lanes);
}

// q . a landmark's mean key (float rows: the 16-lane order).
float landmark_dot(uint lbase, uint qbase) {
    const uint hd = p.head_dim;
    precise float lanes[16];
    for (int j = 0; j < 16; ++j) lanes[j] = 0.0;
    for (uint i = 0; i < hd; ++i) lanes[i % 16u] = exact_fma(lk[lbase + i], q[qbase + i], lanes[i % 16u]);
    for (uint i = hd; i % 16u != 0u; ++i) lanes[i % 16u] = exact_fma(0.0, 0.0, lanes[i % 16u]);
    return tree16(lanes);
}

// Adds w to position pos's attention mass (fixed point, see Mass).
void add_mass(uint seq, uint pos, float w) {
    precise double units = double(w) * 4294967296.0 + 0.5;  // exact product, one rounded sum
    const double high = floor(units / 4294967296.0);        // a power of two: exact
    const uint hi = uint(high), lo = uint(units - high * 4294967296.0);
    const uint at = 2u * (seq * p.n_ctx + pos);
    const uint before = atomicAdd(mass[at], lo);
    const uint carry = before > 0xffffffffu - lo ? 1u : 0u;
    if (hi + carry != 0u) atomicAdd(mass[at + 1u], hi + carry);
}

void main() {
    const uint h = gl_WorkGroupID.x, tl = gl_WorkGroupID.y, lid = gl_LocalInvocationID.x;
    const uint t = p.t_begin + tl;
    const uvec4 row = rows[t];
    const uint pos = row.y, in_run = row.z, run_tok = row.w;
    // Sliding-window layers never attend sparsely (the CPU's options).
    const uint mode = (p.sparse != 0u && p.window == 0u) ? sp[8u * t] : 0u;
    const bool sparse = mode == 2u;
    // Runs longer than 32 rows attend as a prompt does on the CPU (batched),
    // unless sparse attention reaches past dense at the run's end.
    const bool batched = mode == 0u && run_tok > 32u;
    // The softmax's elements: [first, n_valid) of the positions (dense), or
    // [0, n_all) of [window | scattered | landmarks] (sparse).
    uint first = 0u, n_valid = pos + 1u;
    uint w0 = 0u, n_w = 0u, n_t = 0u, n_l = 0u, offset = 0u;
    if (sparse) {
        w0 = sp[8u * t + 1u];
        n_t = sp[8u * t + 2u];
        n_l = sp[8u * t + 3u];
        offset = sp[8u * t + 4u];
        n_w = pos - w0 + 1u;
        n_valid = n_w + n_t + n_l;
    } else if (p.window > 0u && n_valid > p.window) {
        first = n_valid - p.window;
    }
    uint n_read = n_valid;
    if (batched) {
        const uint t0 = (in_run / 32u) * 32u;
        n_read = (pos - in_run) + t0 + min(32u, run_tok - t0);
    }
    const uint hd = p.head_dim;
    const uint n_kv = p.n_heads / p.q_per_kv;
    const uint kv_head = row.x * n_kv + h / p.q_per_kv;  // the sequence's KV head
    const uint kv_row0 = kv_head * p.n_ctx;               // its position 0
    const uint lm_row0 = sparse ? kv_head * (p.n_ctx / p.lm_block) : 0u;
    const uint qbase = t * p.stride + h * hd;
    const uint sbase = (tl * p.n_heads + h) * p.score_span;

    // (Uniform across the workgroup: the barrier below is reached by all.)
    const bool block_keys = !batched && (p.k_type == kQ8_0 || p.k_type == kQ4_0);
    if (block_keys) {
        if (lid < hd / 32u) {
            float x[32];
            for (uint j = 0; j < 32u; ++j) x[j] = q[qbase + 32u * lid + j];
            int codes[32];
            q_scales[lid] = unpackHalf2x16(q8_0_block(x, codes)).x;
            for (uint j = 0; j < 32u; ++j) q_codes[32u * lid + j] = codes[j];
        }
        barrier();
    }
    for (uint s = first + lid; s < n_valid; s += 64u) {
        float dot;
        if (!sparse || s < n_w) {
            dot = key_dot(block_keys, kv_row0 + w0 + s, qbase);
        } else if (s < n_w + n_t) {
            dot = key_dot(block_keys, kv_row0 + sp[offset + s - n_w], qbase);
        } else {
            dot = landmark_dot((lm_row0 + sp[offset + s - n_w]) * hd, qbase);
        }
        precise float scaled = dot * p.scale;
        if (p.soft_cap > 0.0) {
            precise float capped = p.soft_cap * hwy_tanh(exact_div_f(scaled, p.soft_cap));
            scaled = capped;
        }
        scores[sbase + s] = scaled;
    }
    barrier();
    float m = -1.0 / 0.0;
    for (uint s = first + lid; s < n_valid; s += 64u) m = max(m, scores[sbase + s]);
    part[lid] = m;
    barrier();
    if (lid == 0u) {
        float all = part[0];
        for (int j = 1; j < 64; ++j) all = max(all, part[j]);
        if (p.has_sinks != 0u) all = max(all, sinks[h]);
        shared_max = all;
    }
    barrier();
    for (uint s = first + lid; s < n_valid; s += 64u) {
        precise float shifted = scores[sbase + s] - shared_max;
        scores[sbase + s] = canonical_exp(shifted);
    }
    barrier();
    if (lid < 16u) {
        precise float acc = 0.0;
        for (uint s = first + lid; s < n_valid; s += 16u) acc = acc + scores[sbase + s];
        // The sink is element n_valid - first of the softmax: its lane's last.
        if (p.has_sinks != 0u && lid == (n_valid - first) % 16u) {
            precise float shifted = sinks[h] - shared_max;
            acc = acc + canonical_exp(shifted);
        }
        lane_sums[lid] = acc;
    }
    barrier();
    if (lid == 0u) {
        precise float lanes[16];
        for (int j = 0; j < 16; ++j) lanes[j] = lane_sums[j];
        shared_inv = exact_recip_f(tree16(lanes));
    }
    barrier();
    for (uint s = first + lid; s < n_valid; s += 64u) {
        precise float w = scores[sbase + s] * shared_inv;
        scores[sbase + s] = w;
        if (p.track != 0u) {
            if (!sparse || s < n_w) {
                add_mass(row.x, w0 + s, w);
            } else if (s < n_w + n_t) {
                add_mass(row.x, sp[offset + s - n_w], w);
            } else {
                // AttentionMass::add_spread: each position of the block gets
                // the weight divided by the block's length.
                const float each = exact_div_f(w, float(p.lm_block));
                const uint b0 = sp[offset + s - n_w] * p.lm_block;
                for (uint j = 0; j < p.lm_block; ++j) add_mass(row.x, b0 + j, each);
            }
        }
    }
    barrier();
    for (uint i = lid; i < hd; i += 64u) {
        if (sparse) {
            precise float o = 0.0;
            for (uint s = 0; s < n_w; ++s) o = exact_fma(scores[sbase + s], cached(p.v_type, kv_row0 + w0 + s, i, false), o);
            if (n_t > 0u) {
                precise float sum = 0.0;
                for (uint s = n_w; s < n_w + n_t; ++s) {
                    sum = exact_fma(scores[sbase + s], cached(p.v_type, kv_row0 + sp[offset + s - n_w], i, false), sum);
                }
                precise float added = o + sum;
                o = added;
            }
            if (n_l > 0u) {
                precise float sum = 0.0;
                for (uint s = n_w + n_t; s < n_valid; ++s) {
                    sum = exact_fma(scores[sbase + s], lv[(lm_row0 + sp[offset + s - n_w]) * hd + i], sum);
                }
                precise float added = o + sum;
                o = added;
            }
            out_[qbase + i] = o;
        } else if (!batched) {
            precise float o = 0.0;
            for (uint s = first; s < n_valid; ++s) o = exact_fma(scores[sbase + s], cached(p.v_type, kv_row0 + s, i, false), o);
            out_[qbase + i] = o;
        } else {
            precise float lanes[16];
            for (int j = 0; j < 16; ++j) lanes[j] = 0.0;
            for (uint s = 0; s < n_read; ++s) {
                const float w = (s >= first && s < n_valid) ? scores[sbase + s] : 0.0;
                lanes[s % 16u] = exact_fma(cached(p.v_type, kv_row0 + s, i, false), w, lanes[s % 16u]);
            }
            for (uint s = n_read; s % 16u != 0u; ++s) lanes[s % 16u] = exact_fma(0.0, 0.0, lanes[s % 16u]);
            out_[qbase + i] = tree16(lanes);
        }
    }
}
