// The SPIR-V of every shader in src/gpu/shaders, embedded at build time
// (cmake/embed_spirv.cmake), and the push constants each one takes.
#pragma once

#include <cstddef>
#include <cstdint>

#define TESSERA_SHADER(name)                 \
    namespace tessera::shaders {             \
    extern const uint32_t k_##name[];        \
    extern const size_t k_##name##_words;    \
    }
TESSERA_SHADER(matvec_f32)
TESSERA_SHADER(matvec_f16)
TESSERA_SHADER(matvec_q8_0)
TESSERA_SHADER(matvec_q4_0)
TESSERA_SHADER(matvec_q4_k)
TESSERA_SHADER(matvec_q6_k)
// The float products with subgroup trees (subgroup_tree.glsl).
TESSERA_SHADER(matvec_f32_sg)
TESSERA_SHADER(matvec_f16_sg)
TESSERA_SHADER(matvec_bf16_sg)
// The block products with packed integer dot products (int_dot.glsl).
TESSERA_SHADER(matvec_q8_0_idot)
TESSERA_SHADER(matvec_q4_0_idot)
TESSERA_SHADER(matvec_q4_k_idot)
TESSERA_SHADER(matvec_q6_k_idot)
// One token's block products by a subgroup per row (matmul_common.glsl's SUBGROUP_ROWS).
TESSERA_SHADER(matvec_q8_0_sr)
TESSERA_SHADER(matvec_q4_0_sr)
TESSERA_SHADER(matvec_q4_k_sr)
TESSERA_SHADER(matvec_q6_k_sr)
TESSERA_SHADER(matvec_q8_0_idot_sr)
TESSERA_SHADER(matvec_q4_0_idot_sr)
TESSERA_SHADER(matvec_q4_k_idot_sr)
TESSERA_SHADER(matvec_q6_k_idot_sr)
TESSERA_SHADER(matvec_q4_1_idot)
TESSERA_SHADER(matvec_q5_0_idot)
TESSERA_SHADER(matvec_q5_1_idot)
TESSERA_SHADER(matvec_iq4_nl_idot)
TESSERA_SHADER(matvec_mxfp4_idot)
TESSERA_SHADER(matvec_q5_k_idot)
TESSERA_SHADER(matvec_q3_k_idot)
TESSERA_SHADER(matvec_q2_k_idot)
TESSERA_SHADER(matvec_iq4_xs_idot)
TESSERA_SHADER(matvec_iq2_xxs_idot)
TESSERA_SHADER(matvec_iq2_xs_idot)
TESSERA_SHADER(matvec_iq2_s_idot)
TESSERA_SHADER(matvec_iq3_xxs_idot)
TESSERA_SHADER(matvec_iq3_s_idot)
TESSERA_SHADER(matvec_iq2_xxs)
TESSERA_SHADER(matvec_iq2_xs)
TESSERA_SHADER(matvec_iq2_s)
TESSERA_SHADER(matvec_iq3_xxs)
TESSERA_SHADER(matvec_iq3_s)
TESSERA_SHADER(matvec_bf16)
TESSERA_SHADER(matvec_q4_1)
TESSERA_SHADER(matvec_q5_0)
TESSERA_SHADER(matvec_q5_1)
TESSERA_SHADER(matvec_iq4_nl)
TESSERA_SHADER(matvec_mxfp4)
TESSERA_SHADER(matvec_q5_k)
TESSERA_SHADER(matvec_q3_k)
TESSERA_SHADER(matvec_q2_k)
TESSERA_SHADER(matvec_iq4_xs)
TESSERA_SHADER(quantize_q8_0)
TESSERA_SHADER(quantize_q8_k)
TESSERA_SHADER(rms_norm)
TESSERA_SHADER(rope)
TESSERA_SHADER(softmax)
TESSERA_SHADER(swiglu)
TESSERA_SHADER(geglu)
TESSERA_SHADER(swiglu_oai)
TESSERA_SHADER(add_expert_bias)
TESSERA_SHADER(soft_cap)
TESSERA_SHADER(add_rows)
TESSERA_SHADER(scale_rows)
TESSERA_SHADER(add_units)
TESSERA_SHADER(sum_units)
TESSERA_SHADER(add_bias)
TESSERA_SHADER(kv_store)
TESSERA_SHADER(attention)
TESSERA_SHADER(landmarks)
TESSERA_SHADER(fma_probe)
TESSERA_SHADER(subgroup_probe)
#undef TESSERA_SHADER

// A shader's words and count, by name: TESSERA_SPIRV(rope) is
// tessera::shaders::k_rope, tessera::shaders::k_rope_words.
#define TESSERA_SPIRV(name) ::tessera::shaders::k_##name, ::tessera::shaders::k_##name##_words

namespace tessera {

// How a device runs the products (matmul_common.glsl): a workgroup per row
// on GPUs, an invocation per dot where the device is a CPU (lavapipe), or as
// TESSERA_VULKAN_PRODUCTS says ("rows", "subgroups", "tiles" or "dots", for
// tests and benchmarks).
struct VulkanDeviceInfo;
bool serial_products(const VulkanDeviceInfo& info);
// Where block products run in tiles instead (matmul_common.glsl's
// tiled_dots): by default the products of more than one token (prompts),
// on every device; with TESSERA_VULKAN_PRODUCTS=tiles, every block product,
// one token's too; with another layout named there, none.
enum class ProductTiles { kNone, kPrompts, kEvery };
ProductTiles tiled_products();
// A tile invocation's dots and tokens (matmul_common.glsl's kTileDots and
// kTileTokens): 2 x 4, or TESSERA_VULKAN_TILE=DxT (each 1 to 16), checked.
struct ProductTile {
    uint32_t dots = 2, tokens = 4;
};
ProductTile product_tile();
// The workgroups of a tiled product: 8 tiles of dots (rows x units) by 8 of tokens each.
uint32_t tile_groups(int64_t rows, int64_t units);
uint32_t tile_token_groups(int64_t tokens);
// Whether one token's block products (the types with a *_sr build) run a
// subgroup per row instead: on GPUs whose subgroups pass the probe
// (gpu/subgroup_probe.h), unless TESSERA_VULKAN_PRODUCTS is "rows" or
// "dots" ("subgroups" asks for it, on a CPU device too, and is an error
// where the probe fails). Same bits either way.
class VulkanContext;
bool subgroup_rows(VulkanContext& context);
// The workgroups of such a product of `rows` rows (64 / subgroup size rows
// a workgroup; the shader strides over what a dispatch's limit leaves).
uint32_t subgroup_row_groups(const VulkanDeviceInfo& info, int64_t rows);
// The workgroups of a product of `rows` rows (and `units` dots a row), and
// of its `tokens` rows of activations (matmul_common.glsl's tiles of 8).
uint32_t product_groups(bool serial, int64_t rows, int64_t units);
uint32_t product_token_groups(bool serial, int64_t tokens);

// matmul_common.glsl.
struct VulkanMatmulParams {
    uint32_t blocks, units, rows, row_blocks, col_begin, x_stride, y_stride, tokens, n_blocks;
    uint32_t x_begin = 0, y_begin = 0;
    uint32_t serial = 0;  // 1: an invocation per dot (CPU devices); 2: tiles (block types); 0: a workgroup per row
};
// rope.comp.
struct VulkanRopeParams {
    uint32_t heads, head_dim, pairs, halves, tokens, stride;
};
// rms_norm.comp.
struct VulkanNormParams {
    uint32_t n, rows;
    float eps;
};
// kv_store.comp.
struct VulkanKvStoreParams {
    uint32_t kv_heads, head_dim, n_ctx, tokens, stride, k_type, v_type;  // kv_rows.glsl's type codes
};
// attention.comp.
struct VulkanAttentionParams {
    uint32_t head_dim, q_per_kv, n_heads, n_ctx;
    uint32_t t_begin;
    uint32_t window;
    float scale;
    uint32_t k_type, v_type;
    uint32_t stride;
    float soft_cap;  // 0: none
    uint32_t has_sinks;
    uint32_t track;  // 1: add each weight to its position's attention mass
    uint32_t sparse;      // 1: each row follows its sparse entry (mode, window, candidates)
    uint32_t lm_block;    // positions per landmark block (sparse)
    uint32_t score_span;  // floats of scores per row and head
};
// landmarks.comp.
struct VulkanLandmarkParams {
    uint32_t kv_heads, head_dim, n_ctx, tokens, k_type, v_type, lm_block;
};
// add_units.comp.
struct VulkanAddUnitsParams {
    uint32_t rows, units, tokens, x_stride;
    uint32_t experts = 1;  // dot rows per token (a mixture of experts' k)
    uint32_t down_bias = 0;  // 1: the experts' down biases join (gpt-oss)
};
// add_bias.comp.
struct VulkanAddBiasParams {
    uint32_t n, tokens, stride, bias_begin;
};

}  // namespace tessera
