// The point sets of the grid I-quants and what their quantizers search.
//
// A point is 8 (IQ1, IQ2) or 4 (IQ3) levels; ggml stores each as bytes (the
// value a weight's code stands for, before its sign and scale): IQ2's levels
// are 8, 25, 43; IQ3_XXS's 4, 12, ..., 52, 62; IQ3_S's 1, 3, ..., 15; IQ1's
// -1, 0, 1 (int8). The sets are llama.cpp's (ops/iq_grid_tables.inc,
// generated with its source named).
#pragma once

#include "ops/quant_type.h"

#include <cstdint>
#include <limits>
#include <vector>

namespace tessera {

// The byte values of point i: 8 of them for IQ2_XXS / IQ2_XS / IQ2_S, 4 for
// IQ3_XXS / IQ3_S. Tables of 8- or 4-byte entries, little-endian.
const uint64_t* iq2_points(QuantType type);  // 256, 512 or 1024 entries
const uint32_t* iq3_points(QuantType type);  // 256 or 512 entries
// IQ1_S and IQ1_M's 2048 points, each 8 int8 levels (-1, 0, 1) as bytes.
const uint64_t* iq1_points();
// The same points as 8 p + 1 (int8 bytes -7, 1, 9): 8 times a weight with its
// shift of +1/8, what SIMD kernels multiply by (less 2 for a shift of -1/8).
const uint64_t* iq1_shifted_points();
// The same points as their packed levels (llama.cpp's kgrid: 2 bits a level
// for IQ2, 3 for IQ3, level i at bit bits * i), and how many: what kernels
// that look points up in registers hold.
const uint16_t* iq_point_codes(QuantType type, int* count);

// A 7-bit sign pattern completed with its parity bit (an even number of
// minus signs): ggml's ksigns_iq2xs.
uint8_t iq_signs_from7(int bits7);
// A sign byte as 8 bytes of 0xFF (minus) or 0 (plus), little-endian: what
// kernels negate activations with. Indexed by the byte (256 entries), and by
// 7 bits completed with their parity (128 entries).
const uint64_t* iq_sign_masks();
const uint64_t* iq_sign_masks_even();

// What a quantizer searches (llama.cpp's iq2xs_init_impl / iq3xs_init_impl):
// the points as odd levels 2 l + 1, a map from a point's packed levels (2 or
// 3 bits each) to its index, and for every packed level vector that is not
// a point, its nearest points: those at the `n_want` smallest distinct
// squared distances, in order of (distance, index).
struct IqGridSearch {
    int levels_per_point = 0;    // 8 or 4
    int bits_per_level = 0;      // 2 or 3
    std::vector<uint64_t> odd;   // point i's levels 2 l + 1 as bytes
    std::vector<int32_t> map;    // packed levels -> index, or -(offset + 1) into neighbours
    std::vector<uint16_t> neighbours;  // at an offset: count, then that many indices
};

// llama.cpp's iq2/iq3_find_best_neighbour and iq1_find_best_neighbour2:
// among the neighbours of u (a packed level vector not in the set) the point
// nearest to xval at `scale` under the weights, the first of equal distance,
// a level's value taken as value_of(its odd byte 2 l + 1); its levels into
// L. (With NaN distances only, the first neighbour: llama.cpp asserts.)
template <typename ValueOf>
int iq_best_neighbour(const IqGridSearch& g, int u, const float* xval, const float* weight, float scale,
                      ValueOf value_of, int8_t* L) {
    const uint16_t* list = g.neighbours.data() + (-g.map[u] - 1);
    float best_d2 = std::numeric_limits<float>::max();
    int best = list[1];
    for (int j = 1; j <= list[0]; ++j) {
        const uint64_t point = g.odd[list[j]];
        float d2 = 0.0f;
        for (int i = 0; i < g.levels_per_point; ++i) {
            const float diff = scale * value_of(static_cast<int>((point >> (8 * i)) & 0xFF)) - xval[i];
            d2 += weight[i] * diff * diff;
        }
        if (d2 < best_d2) {
            best_d2 = d2;
            best = list[j];
        }
    }
    const uint64_t point = g.odd[best];
    for (int i = 0; i < g.levels_per_point; ++i) L[i] = static_cast<int8_t>((((point >> (8 * i)) & 0xFF) - 1) / 2);
    return best;
}

// Built once per type on first use (thread-safe), for IQ2_XXS, IQ2_XS,
// IQ2_S, IQ3_XXS, IQ3_S, IQ1_S and IQ1_M (the last two share one).
const IqGridSearch& iq_grid_search(QuantType type);

}  // namespace tessera
