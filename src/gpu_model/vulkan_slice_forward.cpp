#include "gpu_model/vulkan_slice_forward.h"

#include "gpu/shaders.h"
#include "model/moe_router.h"
#include "ops/activation.h"
#include "ops/fixed_sum.h"
#include "ops/iq_grids.h"
#include "ops/norm.h"
#include "ops/quant_traits.h"
#include "util/error.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

namespace tessera {

namespace {

constexpr uint32_t kGroup = 64;  // every shader's local_size_x
// What one dispatch's attention scores may take (the rows are cut to fit).
constexpr uint64_t kScoresBytes = 64ull << 20;

uint32_t groups(int64_t n) { return static_cast<uint32_t>((n + kGroup - 1) / kGroup); }
uint32_t u32(int64_t v) { return static_cast<uint32_t>(v); }

// The weight types with a product shader (gpu/shaders/matvec_*.comp).
bool on_device(QuantType t) {
    switch (t) {
        case QuantType::F32:
        case QuantType::F16:
        case QuantType::BF16:
        case QuantType::Q8_0:
        case QuantType::Q4_0:
        case QuantType::Q4_1:
        case QuantType::Q5_0:
        case QuantType::Q5_1:
        case QuantType::IQ4_NL:
        case QuantType::MXFP4:
        case QuantType::Q2_K:
        case QuantType::Q3_K:
        case QuantType::Q4_K:
        case QuantType::Q5_K:
        case QuantType::Q6_K:
        case QuantType::IQ4_XS:
        case QuantType::IQ2_XXS:
        case QuantType::IQ2_XS:
        case QuantType::IQ2_S:
        case QuantType::IQ3_XXS:
        case QuantType::IQ3_S:
            return true;
        default:
            return false;
    }
}

bool is_grid(QuantType t) {
    return t == QuantType::IQ2_XXS || t == QuantType::IQ2_XS || t == QuantType::IQ2_S || t == QuantType::IQ3_XXS ||
           t == QuantType::IQ3_S;
}

// A grid type's tables as iq_grid_types.glsl reads them: its points (IQ2:
// 8 bytes each, IQ3: 4), the 256 sign-byte masks, the 128 seven-bit ones.
std::vector<uint32_t> grid_words(QuantType t) {
    std::vector<uint32_t> words;
    const auto add64 = [&](const uint64_t* v, size_t n) {
        for (size_t i = 0; i < n; ++i) words.insert(words.end(), {static_cast<uint32_t>(v[i]), static_cast<uint32_t>(v[i] >> 32)});
    };
    if (t == QuantType::IQ3_XXS || t == QuantType::IQ3_S) {
        const uint32_t* points = iq3_points(t);
        words.assign(points, points + (t == QuantType::IQ3_XXS ? 256 : 512));
    } else {
        add64(iq2_points(t), t == QuantType::IQ2_XXS ? 256 : t == QuantType::IQ2_XS ? 512 : 1024);
    }
    add64(iq_sign_masks(), 256);
    add64(iq_sign_masks_even(), 128);
    return words;
}

// A KV type's code (kv_rows.glsl) and the bytes of a cached row (padded to whole words).
uint32_t kv_code(QuantType t) {
    switch (t) {
        case QuantType::F32: return 0;
        case QuantType::F16: return 1;
        case QuantType::Q8_0: return 2;
        case QuantType::Q4_0: return 3;
        default: throw make_error("internal: no Vulkan KV cache of {}", quant_type_name(t));
    }
}
uint64_t kv_row_bytes(QuantType t, int64_t head_dim) { return (quant_row_bytes(t, head_dim) + 3) / 4 * 4; }

// Whole 32-bit words, and room for quantize_q8_0's last word.
size_t padded(size_t bytes) { return (bytes + 3) / 4 * 4 + 4; }

// One layer's landmark keys (or values): [sequence][KV head][block] rows of
// head_dim floats (attention.comp, landmarks.comp).
size_t landmark_bytes(int n_seq, int n_kv, int n_ctx, int block, int head_dim) {
    return padded(static_cast<size_t>(n_seq) * static_cast<size_t>(n_kv) * static_cast<size_t>(n_ctx / block) *
                  static_cast<size_t>(head_dim) * 4);
}

// The scratch of a call of n_batch rows, in bytes per buffer.
struct ScratchBytes {
    size_t x, partial, q, kv, ffn, dots, q8_0, q8_k, scores, logits, router, expert_scale;
    int scores_rows;  // rows of attention one dispatch holds scores for
};

// Floats of attention scores per row and head: a position's keys, and with
// sparse attention its landmarks too (at most one per complete block).
int score_span(int n_ctx, const SparseOptions& sparse) {
    return sparse.enabled ? n_ctx + n_ctx / sparse.block + 1 : n_ctx;
}

// Whether a layer keeps landmarks on the device: sparse attention with
// landmarks, on a layer without a sliding window (those never attend
// sparsely).
bool keeps_landmarks(const SparseOptions& sparse, int window) {
    return sparse.enabled && sparse.landmarks != LandmarkMode::kOff && window == 0;
}

ScratchBytes scratch_bytes(const ModelHParams& hp, const ReductionUnits& units, int n_batch, int n_ctx,
                           const SparseOptions& sparse) {
    const auto nb = static_cast<size_t>(n_batch);
    const auto n_embd = static_cast<size_t>(hp.n_embd), q_dim = static_cast<size_t>(hp.q_dim());
    // A mixture of experts keeps its k experts' rows per token.
    const auto k = static_cast<size_t>(std::max(1, hp.n_expert_used));
    const auto n_ff = static_cast<size_t>(hp.n_ff) * k;
    const size_t widest = std::max({n_embd, q_dim, n_ff});
    const int64_t wo_units = (hp.q_dim() + units.wo_cols(hp) - 1) / units.wo_cols(hp);
    const int64_t ffn_units = (hp.n_ff + units.ffn_channels - 1) / units.ffn_channels;
    ScratchBytes b{};
    b.x = padded(nb * n_embd * 4);
    b.partial = padded(nb * n_embd * 8);
    b.q = padded(nb * q_dim * 4);
    b.kv = padded(nb * static_cast<size_t>(hp.kv_dim()) * 4);
    b.ffn = padded(nb * n_ff * 4);
    b.dots = padded(nb * n_embd * static_cast<size_t>(std::max<int64_t>({1, wo_units, ffn_units})) * k * 4);
    b.router = padded(nb * static_cast<size_t>(std::max(1, hp.n_expert)) * 4);
    b.expert_scale = padded(nb * k * 4);
    // Q8_0: 34 bytes per 32 values; Q8_K: 292 per 256 (both under 1.1 bytes a value).
    b.q8_0 = padded(nb * widest / 32 * 34);
    b.q8_k = padded(nb * widest / 256 * 292 + 292);
    const uint64_t per_row = static_cast<uint64_t>(hp.n_head) * static_cast<uint64_t>(score_span(n_ctx, sparse)) * 4;
    b.scores_rows = static_cast<int>(std::clamp<uint64_t>(kScoresBytes / per_row, 1, nb));
    b.scores = padded(static_cast<size_t>(b.scores_rows) * per_row);
    b.logits = padded(nb * static_cast<size_t>(hp.n_vocab) * 4);
    return b;
}

}  // namespace

uint64_t VulkanSliceForward::footprint(const SliceWeights& w, const ModelHParams& hp, const ReductionUnits& units,
                                       int n_batch, int n_ctx, KvCacheTypes kv, int n_seq, bool track_attention,
                                       const SparseOptions& sparse) {
    const auto floats = [](const std::vector<float>& v) { return v.empty() ? 0 : padded(v.size() * 4); };
    // The share's rows, or its columns of wo and w_down.
    const auto matrix = [](const Matrix& m, int64_t rows, int64_t cols) {
        return rows == 0 || cols == 0 ? 0 : padded(static_cast<size_t>(rows) * quant_row_bytes(m.type, cols));
    };
    const Slice& s = w.slice;
    const int64_t q_width = static_cast<int64_t>(s.n_kv_heads()) * hp.q_per_kv() * hp.head_dim;
    const int64_t kv_width = static_cast<int64_t>(s.n_kv_heads()) * hp.head_dim;
    const auto cache = [&](QuantType t) {
        return static_cast<uint64_t>(n_seq) * static_cast<uint64_t>(s.n_kv_heads()) * static_cast<uint64_t>(n_ctx) *
               kv_row_bytes(t, hp.head_dim);
    };
    uint64_t bytes = 0;
    for (const LayerWeights& l : w.layers) {
        for (const std::vector<float>* v : {&l.attn_norm, &l.ffn_norm, &l.q_bias, &l.k_bias, &l.v_bias, &l.q_norm, &l.k_norm,
                                            &l.post_attn_norm, &l.post_ffn_norm, &l.attn_sinks, &l.wo_bias,
                                            &l.gate_exps_bias, &l.up_exps_bias, &l.down_exps_bias}) {
            bytes += floats(*v);
        }
        bytes += matrix(l.wq, q_width, l.wq.cols) + matrix(l.wk, kv_width, l.wk.cols) + matrix(l.wv, kv_width, l.wv.cols) +
                 matrix(l.wo, l.wo.rows, q_width);
        bytes += matrix(l.w_gate, l.w_gate.rows == 0 ? 0 : s.n_ffn(), l.w_gate.cols) +
                 matrix(l.w_up, l.w_up.rows == 0 ? 0 : s.n_ffn(), l.w_up.cols) +
                 matrix(l.w_down, l.w_down.rows, l.w_down.rows == 0 ? 0 : s.n_ffn());
        // A mixture of experts: the router whole, the share's experts' bands.
        bytes += matrix(l.router, l.router.rows, l.router.cols);
        const int64_t bands = static_cast<int64_t>(s.n_experts());
        bytes += matrix(l.gate_exps, l.gate_exps.rows == 0 ? 0 : bands * s.n_ffn(), l.gate_exps.cols) +
                 matrix(l.up_exps, l.up_exps.rows == 0 ? 0 : bands * s.n_ffn(), l.up_exps.cols) +
                 matrix(l.down_exps, l.down_exps.rows == 0 ? 0 : bands * hp.n_embd, s.n_ffn());
        if (s.n_kv_heads() > 0) bytes += cache(kv.k) + cache(kv.v);
        const int layer = s.layer_begin + static_cast<int>(&l - w.layers.data());
        if (s.n_kv_heads() > 0 && keeps_landmarks(sparse, hp.is_sliding(layer) ? hp.sliding_window : 0)) {
            bytes += 2 * landmark_bytes(n_seq, s.n_kv_heads(), n_ctx, sparse.block, hp.head_dim);
        }
    }
    if (s.outputs) bytes += floats(w.output_norm);
    bytes += matrix(w.output, s.n_vocab_rows(), w.output.cols);
    // The tables of each grid I-quant the matrices use.
    std::vector<QuantType> grids;
    const auto note_grid = [&](const Matrix& m) {
        if (m.rows > 0 && is_grid(m.type) && std::find(grids.begin(), grids.end(), m.type) == grids.end()) {
            grids.push_back(m.type);
            bytes += grid_words(m.type).size() * 4;
        }
    };
    for (const LayerWeights& l : w.layers) {
        for (const Matrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down, &l.router, &l.gate_exps,
                                &l.up_exps, &l.down_exps}) {
            note_grid(*m);
        }
    }
    if (s.n_vocab_rows() > 0) note_grid(w.output);
    const ScratchBytes b = scratch_bytes(hp, units, n_batch, n_ctx, sparse);
    if (track_attention && w.slice.n_kv_heads() > 0) bytes += static_cast<uint64_t>(n_seq) * static_cast<uint64_t>(n_ctx) * 8;
    // (+ 4: the buffer bound where a kernel's optional one is not used.)
    return bytes + 2 * b.x + 2 * (b.q + b.kv + b.ffn) + b.dots + b.q8_0 + b.q8_k + b.scores + 4;
}

struct VulkanSliceForward::Kernels {
    explicit Kernels(VulkanContext& c) {
        // Each made on its first use (gpu/vulkan_kernel.h): a model uses a
        // few of its weight types' products and one activation.
        const auto make = [&](const uint32_t* spirv, size_t words, int buffers, size_t push, const char* name) {
            return LazyVulkanKernel(c, spirv, words, buffers, static_cast<uint32_t>(push), name);
        };
        const size_t mm = sizeof(VulkanMatmulParams);
        // Variants with the same bits (gpu/vulkan_context.h): the float
        // products' trees by subgroup shuffles where a workgroup runs a row
        // (subgroup_tree.glsl), the block products' integer sums by packed
        // dot instructions where the device has them (int_dot.glsl).
        sg = !serial_products(c.info()) && ::tessera::subgroup_trees(c.info());
        idot = integer_dot_products(c.info());
        const auto variant_of = [&](bool use, QuantType t, const uint32_t* plain, size_t plain_words,
                                    const uint32_t* other, size_t other_words, const char* name,
                                    std::map<QuantType, LazyVulkanKernel>* into = nullptr) {
            const int buffers = is_grid(t) ? 4 : 3;  // the grids' tables too
            (into != nullptr ? *into : products)
                .emplace(t, use ? make(other, other_words, buffers, mm, name) : make(plain, plain_words, buffers, mm, name));
        };
        variant_of(sg, QuantType::F32, TESSERA_SPIRV(matvec_f32), TESSERA_SPIRV(matvec_f32_sg), "matvec_f32");
        variant_of(sg, QuantType::F16, TESSERA_SPIRV(matvec_f16), TESSERA_SPIRV(matvec_f16_sg), "matvec_f16");
        variant_of(sg, QuantType::BF16, TESSERA_SPIRV(matvec_bf16), TESSERA_SPIRV(matvec_bf16_sg), "matvec_bf16");
        variant_of(idot, QuantType::Q8_0, TESSERA_SPIRV(matvec_q8_0), TESSERA_SPIRV(matvec_q8_0_idot), "matvec_q8_0");
        variant_of(idot, QuantType::Q4_0, TESSERA_SPIRV(matvec_q4_0), TESSERA_SPIRV(matvec_q4_0_idot), "matvec_q4_0");
        variant_of(idot, QuantType::Q4_K, TESSERA_SPIRV(matvec_q4_k), TESSERA_SPIRV(matvec_q4_k_idot), "matvec_q4_k");
        variant_of(idot, QuantType::Q6_K, TESSERA_SPIRV(matvec_q6_k), TESSERA_SPIRV(matvec_q6_k_idot), "matvec_q6_k");
        variant_of(idot, QuantType::Q4_1, TESSERA_SPIRV(matvec_q4_1), TESSERA_SPIRV(matvec_q4_1_idot), "matvec_q4_1");
        variant_of(idot, QuantType::Q5_0, TESSERA_SPIRV(matvec_q5_0), TESSERA_SPIRV(matvec_q5_0_idot), "matvec_q5_0");
        variant_of(idot, QuantType::Q5_1, TESSERA_SPIRV(matvec_q5_1), TESSERA_SPIRV(matvec_q5_1_idot), "matvec_q5_1");
        variant_of(idot, QuantType::IQ4_NL, TESSERA_SPIRV(matvec_iq4_nl), TESSERA_SPIRV(matvec_iq4_nl_idot), "matvec_iq4_nl");
        variant_of(idot, QuantType::MXFP4, TESSERA_SPIRV(matvec_mxfp4), TESSERA_SPIRV(matvec_mxfp4_idot), "matvec_mxfp4");
        variant_of(idot, QuantType::Q2_K, TESSERA_SPIRV(matvec_q2_k), TESSERA_SPIRV(matvec_q2_k_idot), "matvec_q2_k");
        variant_of(idot, QuantType::Q3_K, TESSERA_SPIRV(matvec_q3_k), TESSERA_SPIRV(matvec_q3_k_idot), "matvec_q3_k");
        variant_of(idot, QuantType::Q5_K, TESSERA_SPIRV(matvec_q5_k), TESSERA_SPIRV(matvec_q5_k_idot), "matvec_q5_k");
        variant_of(idot, QuantType::IQ4_XS, TESSERA_SPIRV(matvec_iq4_xs), TESSERA_SPIRV(matvec_iq4_xs_idot), "matvec_iq4_xs");
        variant_of(idot, QuantType::IQ2_XXS, TESSERA_SPIRV(matvec_iq2_xxs), TESSERA_SPIRV(matvec_iq2_xxs_idot), "matvec_iq2_xxs");
        variant_of(idot, QuantType::IQ2_XS, TESSERA_SPIRV(matvec_iq2_xs), TESSERA_SPIRV(matvec_iq2_xs_idot), "matvec_iq2_xs");
        variant_of(idot, QuantType::IQ2_S, TESSERA_SPIRV(matvec_iq2_s), TESSERA_SPIRV(matvec_iq2_s_idot), "matvec_iq2_s");
        variant_of(idot, QuantType::IQ3_XXS, TESSERA_SPIRV(matvec_iq3_xxs), TESSERA_SPIRV(matvec_iq3_xxs_idot), "matvec_iq3_xxs");
        variant_of(idot, QuantType::IQ3_S, TESSERA_SPIRV(matvec_iq3_s), TESSERA_SPIRV(matvec_iq3_s_idot), "matvec_iq3_s");
        // One token's products of the commonest block types by a subgroup
        // per row (matmul_common.glsl's SUBGROUP_ROWS), where the device
        // runs them so (gpu/shaders.h's subgroup_rows).
        if (subgroup_rows(c)) {
            const auto one_token = [&](QuantType t, const uint32_t* plain, size_t plain_words, const uint32_t* packed,
                                       size_t packed_words, const char* name) {
                variant_of(idot, t, plain, plain_words, packed, packed_words, name, &one_token_products);
            };
            one_token(QuantType::Q8_0, TESSERA_SPIRV(matvec_q8_0_sr), TESSERA_SPIRV(matvec_q8_0_idot_sr), "matvec_q8_0_sr");
            one_token(QuantType::Q4_0, TESSERA_SPIRV(matvec_q4_0_sr), TESSERA_SPIRV(matvec_q4_0_idot_sr), "matvec_q4_0_sr");
            one_token(QuantType::Q4_K, TESSERA_SPIRV(matvec_q4_k_sr), TESSERA_SPIRV(matvec_q4_k_idot_sr), "matvec_q4_k_sr");
            one_token(QuantType::Q6_K, TESSERA_SPIRV(matvec_q6_k_sr), TESSERA_SPIRV(matvec_q6_k_idot_sr), "matvec_q6_k_sr");
        }
        quantize_q8_0 = make(TESSERA_SPIRV(quantize_q8_0), 2, 4, "quantize_q8_0");
        quantize_q8_k = make(TESSERA_SPIRV(quantize_q8_k), 2, 4, "quantize_q8_k");
        norm = make(TESSERA_SPIRV(rms_norm), 3, sizeof(VulkanNormParams), "rms_norm");
        rope = make(TESSERA_SPIRV(rope), 3, sizeof(VulkanRopeParams), "rope");
        swiglu = make(TESSERA_SPIRV(swiglu), 2, 8, "swiglu");
        geglu = make(TESSERA_SPIRV(geglu), 2, 8, "geglu");
        swiglu_oai = make(TESSERA_SPIRV(swiglu_oai), 2, 8, "swiglu_oai");
        add_expert_bias = make(TESSERA_SPIRV(add_expert_bias), 3, 8, "add_expert_bias");
        add_rows = make(TESSERA_SPIRV(add_rows), 2, 4, "add_rows");
        scale_rows = make(TESSERA_SPIRV(scale_rows), 2, 8, "scale_rows");
        add_units = make(TESSERA_SPIRV(add_units), 5, sizeof(VulkanAddUnitsParams), "add_units");
        sum_units = make(TESSERA_SPIRV(sum_units), 5, 24, "sum_units");
        add_bias = make(TESSERA_SPIRV(add_bias), 2, sizeof(VulkanAddBiasParams), "add_bias");
        kv_store = make(TESSERA_SPIRV(kv_store), 5, sizeof(VulkanKvStoreParams), "kv_store");
        attention = make(TESSERA_SPIRV(attention), 11, sizeof(VulkanAttentionParams), "attention");
        landmarks = make(TESSERA_SPIRV(landmarks), 5, sizeof(VulkanLandmarkParams), "landmarks");
    }
    VulkanKernel& product(QuantType t) {
        const auto it = products.find(t);
        if (it == products.end()) throw make_error("internal: no Vulkan product for {}", quant_type_name(t));
        return it->second.get();
    }
    // A product's kernel for one token: a subgroup per row where there is one.
    VulkanKernel* one_token_product(QuantType t) {
        const auto it = one_token_products.find(t);
        return it == one_token_products.end() ? nullptr : &it->second.get();
    }
    std::map<QuantType, LazyVulkanKernel> products, one_token_products;
    bool idot = false;  // the block products' *_idot kernels
    bool sg = false;    // the float products' *_sg kernels
    LazyVulkanKernel quantize_q8_0, quantize_q8_k, norm, rope, swiglu, geglu, swiglu_oai, add_expert_bias, add_rows,
        scale_rows, add_units, sum_units, add_bias, kv_store, attention, landmarks;
    std::vector<std::string> built() const {
        std::vector<std::string> names;
        const auto note = [&](const LazyVulkanKernel& k) {
            if (k.made()) names.emplace_back(k.name());
        };
        for (const auto* kernels : {&products, &one_token_products}) {
            for (const auto& [type, k] : *kernels) note(k);
        }
        for (const LazyVulkanKernel* k : {&quantize_q8_0, &quantize_q8_k, &norm, &rope, &swiglu, &geglu, &swiglu_oai,
                                          &add_expert_bias, &add_rows, &scale_rows, &add_units, &sum_units, &add_bias,
                                          &kv_store, &attention, &landmarks}) {
            note(*k);
        }
        return names;
    }
    VulkanKernel& gate(FfnActivation a) {
        return a == FfnActivation::kGelu ? geglu.get() : a == FfnActivation::kSwigluOai ? swiglu_oai.get() : swiglu.get();
    }
};

bool VulkanSliceForward::packed_dots() const { return kernels_->idot; }
bool VulkanSliceForward::subgroup_trees() const { return kernels_->sg; }
std::vector<std::string> VulkanSliceForward::built_kernels() const { return kernels_->built(); }

struct VulkanSliceForward::Layer {
    std::unique_ptr<VulkanBuffer> attn_norm, ffn_norm, q_bias, k_bias, v_bias, q_norm, k_norm;
    std::unique_ptr<VulkanBuffer> post_attn_norm, post_ffn_norm;  // Gemma's (null: none)
    DeviceMatrix router, gate_exps, up_exps, down_exps;  // a mixture of experts (router.buffer set)
    // gpt-oss's: the slice's heads' sinks, wo's bias, the experts' biases (null: none).
    std::unique_ptr<VulkanBuffer> sinks, wo_bias, gate_exps_bias, up_exps_bias, down_exps_bias;
    DeviceMatrix wq, wk, wv, wo, w_gate, w_up, w_down;
    std::unique_ptr<VulkanBuffer> k_cache, v_cache;
    std::unique_ptr<VulkanBuffer> lm_k, lm_v;  // sparse attention's landmarks (null: none)
    int window = 0;
};

VulkanSliceForward::VulkanSliceForward(const LlamaModel& model, const Slice& slice, const ForwardConfig& config,
                                       int device_index)
    : hparams_(model.hparams()), units_(reduction_units(model)), kv_types_(config.kv_types) {
    const ModelHParams& hp = hparams_;
    validate_slice(slice, hp);
    // What the device runs so far; the rest is said by name.
    const auto refuse = [](const std::string& what) {
        throw make_error("the Vulkan backend does not run {} yet (use --device cpu)", what);
    };
    if (config.sparse.enabled) {
        validate(config.sparse);
        sparse_ = config.sparse;
    }
    if (config.n_seq < 1) throw make_error("internal: {} sequences", config.n_seq);
    // Every cache type the CPU holds, keys and values: F32, F16, Q8_0, Q4_0.
    for (const QuantType t : {config.kv_types.k, config.kv_types.v}) {
        if (t != QuantType::F16 && t != QuantType::F32 && t != QuantType::Q8_0 && t != QuantType::Q4_0) {
            refuse(std::string(quant_type_name(t)) + " KV caches");
        }
    }
    if (hp.head_dim % 2 != 0) refuse("odd head sizes");
    // Its expert products index one rectangle: every channel of some experts
    // or some channels of every expert.
    if (slice.has_tail() || (slice.n_ffn() < hp.n_ff && slice.n_experts() < hp.n_expert)) {
        refuse("the mixed or balanced split of a mixture of experts (--moe-split mixed or balanced)");
    }
    const auto block_kv = [](QuantType t) { return t == QuantType::Q8_0 || t == QuantType::Q4_0; };
    if ((block_kv(config.kv_types.k) || block_kv(config.kv_types.v)) && hp.head_dim > 256) {
        refuse("Q8_0/Q4_0 KV caches of heads wider than 256");
    }
    weights_ = load_slice_weights(model, slice, ColumnSlices::kView);
    if (slice.kv_head_begin % units_.kv_heads != 0 || slice.ffn_begin % units_.ffn_channels != 0) {
        throw make_error("internal: slice {} does not start on reduction units of {} KV heads and {} FFN channels",
                         describe_slice(slice), units_.kv_heads, units_.ffn_channels);
    }
    n_kv_ = slice.n_kv_heads();
    n_q_heads_ = n_kv_ * hp.q_per_kv();
    q_begin_ = static_cast<int64_t>(slice.kv_head_begin) * hp.q_per_kv() * hp.head_dim;
    q_width_ = static_cast<int64_t>(n_q_heads_) * hp.head_dim;
    kv_begin_ = static_cast<int64_t>(slice.kv_head_begin) * hp.head_dim;
    kv_width_ = static_cast<int64_t>(n_kv_) * hp.head_dim;
    n_ffn_ = slice.n_ffn();
    n_ctx_ = config.n_ctx;
    n_seq_ = config.n_seq;
    n_batch_ = std::clamp(config.n_batch, 1, std::max(1, config.n_ctx));
    context_ = std::make_unique<VulkanContext>(device_index);
    // All of it or nothing: a share too large for the device is said before
    // anything is uploaded.
    const VulkanDeviceInfo& info = context_->info();
    const uint64_t need =
        footprint(weights_, hp, units_, n_batch_, n_ctx_, kv_types_, n_seq_, config.track_attention, sparse_);
    if (need > info.device_local_bytes) {
        throw make_error("{} needs {:.1f} MiB of device memory ({} bytes of weights, KV cache and scratch), and Vulkan "
                         "device {} ({}) has {:.1f} MiB ({} bytes): give it fewer layers (a pipeline stage, --gpu-layers), "
                         "a smaller context (-c), or use --device cpu",
                         describe_slice(slice), need / 1048576.0, need, info.index, info.name,
                         info.device_local_bytes / 1048576.0, info.device_local_bytes);
    }
    kernels_ = std::make_unique<Kernels>(*context_);
    serial_ = serial_products(info);
    tiles_ = tiled_products();

    const int64_t hd = hp.head_dim;
    for (int layer = slice.layer_begin; layer < slice.layer_end; ++layer) {
        const LayerWeights& w = weights_.layers[static_cast<size_t>(layer - slice.layer_begin)];
        Layer l;
        if (!w.attn_sinks.empty() && n_q_heads_ > 0) {
            const auto first = w.attn_sinks.begin() + static_cast<std::ptrdiff_t>(slice.kv_head_begin) * hp.q_per_kv();
            l.sinks = floats(std::vector<float>(first, first + n_q_heads_));
        }
        if (!w.wo_bias.empty()) l.wo_bias = floats(w.wo_bias);
        // The experts' biases of this share: its experts, its channels (a
        // down bias joins where the share holds channel 0, as on the CPU).
        const auto expert_band = [&](const std::vector<float>& v, int64_t per_expert, int64_t first, int64_t n) {
            std::vector<float> band;
            for (int e = slice.expert_begin; e < slice.expert_end; ++e) {
                const auto at = v.begin() + static_cast<std::ptrdiff_t>(e * per_expert + first);
                band.insert(band.end(), at, at + n);
            }
            return floats(band);
        };
        if (!w.gate_exps_bias.empty()) l.gate_exps_bias = expert_band(w.gate_exps_bias, hp.n_ff, slice.ffn_begin, n_ffn_);
        if (!w.up_exps_bias.empty()) l.up_exps_bias = expert_band(w.up_exps_bias, hp.n_ff, slice.ffn_begin, n_ffn_);
        if (!w.down_exps_bias.empty() && slice.ffn_begin == 0) {
            l.down_exps_bias = expert_band(w.down_exps_bias, hp.n_embd, 0, hp.n_embd);
        }
        l.attn_norm = floats(w.attn_norm);
        l.ffn_norm = floats(w.ffn_norm);
        if (!w.q_bias.empty()) l.q_bias = floats(w.q_bias);
        if (!w.k_bias.empty()) l.k_bias = floats(w.k_bias);
        if (!w.v_bias.empty()) l.v_bias = floats(w.v_bias);
        if (!w.q_norm.empty()) l.q_norm = floats(w.q_norm);
        if (!w.k_norm.empty()) l.k_norm = floats(w.k_norm);
        if (!w.post_attn_norm.empty()) l.post_attn_norm = floats(w.post_attn_norm);
        if (!w.post_ffn_norm.empty()) l.post_ffn_norm = floats(w.post_ffn_norm);
        // This share's rows of the row-split products, its columns of wo and w_down.
        if (n_kv_ > 0) {
            l.wq = matrix(w.wq, "attn_q", layer, q_begin_, q_width_, 0, w.wq.cols);
            l.wk = matrix(w.wk, "attn_k", layer, kv_begin_, kv_width_, 0, w.wk.cols);
            l.wv = matrix(w.wv, "attn_v", layer, kv_begin_, kv_width_, 0, w.wv.cols);
            l.wo = matrix(w.wo, "attn_output", layer, 0, w.wo.rows, q_begin_, q_width_);
            const auto cache = [&](QuantType t) {
                auto b = device_buffer(static_cast<size_t>(n_seq_) * static_cast<size_t>(n_kv_ * n_ctx_) * kv_row_bytes(t, hd));
                b->zero();
                return b;
            };
            l.k_cache = cache(kv_types_.k);
            l.v_cache = cache(kv_types_.v);
        }
        if (hp.has_experts()) {
            // Every expert, stacked as in the file; a token's k are bands of rows.
            l.router = matrix(w.router, "ffn_gate_inp", layer, 0, w.router.rows, 0, w.router.cols);
            // This share's experts, each its channels' rows (gate, up) and
            // columns (down), packed: local expert i's band at i * rows.
            if (!w.gate_exps_scale.empty() || !w.up_exps_scale.empty() || !w.down_exps_scale.empty()) {
                throw make_error("the Vulkan backend does not apply the experts' .scale factors yet (blk.{}); use --device cpu",
                                 layer);
            }
            l.gate_exps = experts_matrix(w.gate_exps, "ffn_gate_exps", layer, hp.n_ff, slice.ffn_begin, n_ffn_, 0,
                                         w.gate_exps.cols);
            l.up_exps = experts_matrix(w.up_exps, "ffn_up_exps", layer, hp.n_ff, slice.ffn_begin, n_ffn_, 0, w.up_exps.cols);
            l.down_exps = experts_matrix(w.down_exps, "ffn_down_exps", layer, hp.n_embd, 0, hp.n_embd, slice.ffn_begin,
                                         n_ffn_);
        } else if (n_ffn_ > 0) {
            l.w_gate = matrix(w.w_gate, "ffn_gate", layer, slice.ffn_begin, n_ffn_, 0, w.w_gate.cols);
            l.w_up = matrix(w.w_up, "ffn_up", layer, slice.ffn_begin, n_ffn_, 0, w.w_up.cols);
            l.w_down = matrix(w.w_down, "ffn_down", layer, 0, w.w_down.rows, slice.ffn_begin, n_ffn_);
        }
        l.window = hp.is_sliding(layer) ? hp.sliding_window : 0;
        if (n_kv_ > 0 && keeps_landmarks(sparse_, l.window)) {
            const size_t bytes = landmark_bytes(n_seq_, n_kv_, n_ctx_, sparse_.block, hd);
            l.lm_k = device_buffer(bytes);
            l.lm_v = device_buffer(bytes);
            l.lm_k->zero();
            l.lm_v->zero();
        }
        layers_.push_back(std::move(l));
    }
    if (slice.outputs) output_norm_ = floats(weights_.output_norm);
    if (slice.n_vocab_rows() > 0) {
        output_ = matrix(weights_.output, "output", -1, slice.vocab_begin, slice.n_vocab_rows(), 0,
                         weights_.output.cols);
    }

    const ScratchBytes sb = scratch_bytes(hp, units_, n_batch_, n_ctx_, sparse_);
    score_span_ = score_span(n_ctx_, sparse_);
    partial_ = std::make_unique<VulkanBuffer>(*context_, sb.partial, VulkanMemory::kHost);
    x_ = std::make_unique<VulkanBuffer>(*context_, sb.x, VulkanMemory::kHost);
    h_ = device_buffer(sb.x);
    out_ = device_buffer(sb.x);
    q_ = device_buffer(sb.q);
    attn_ = device_buffer(sb.q);
    k_ = device_buffer(sb.kv);
    v_ = device_buffer(sb.kv);
    gate_ = device_buffer(sb.ffn);
    up_ = device_buffer(sb.ffn);
    dots_ = device_buffer(sb.dots);
    act_q8_0_ = device_buffer(sb.q8_0);
    act_q8_k_ = device_buffer(sb.q8_k);
    scores_rows_ = sb.scores_rows;
    scores_ = device_buffer(sb.scores);
    unused_ = device_buffer(4);  // bound where a kernel's optional buffer is not used
    rows_ = std::make_unique<VulkanBuffer>(*context_, static_cast<size_t>(n_batch_) * 16, VulkanMemory::kHost);
    if (config.track_attention && n_kv_ > 0) {
        mass_ = device_buffer(static_cast<size_t>(n_seq_) * static_cast<size_t>(n_ctx_) * 8);
        mass_->zero();
    }
    if (hp.has_experts()) {
        router_logits_ = std::make_unique<VulkanBuffer>(*context_, sb.router, VulkanMemory::kHost);
        expert_scale_ = std::make_unique<VulkanBuffer>(*context_, sb.expert_scale, VulkanMemory::kHost);
        chosen_ = std::make_unique<VulkanBuffer>(*context_, sb.expert_scale, VulkanMemory::kHost);
    }
    if (slice.n_vocab_rows() > 0) logits_ = std::make_unique<VulkanBuffer>(*context_, sb.logits, VulkanMemory::kHost);
    std::vector<std::pair<float, float>> rope_keys;  // each table's (base, scale)
    for (int layer = slice.layer_begin; layer < slice.layer_end; ++layer) {
        const float base = hp.rope_base_of(layer), scale = hp.rope_scale_of(layer);
        size_t i = 0;
        while (i < rope_keys.size() && !(rope_keys[i].first == base && rope_keys[i].second == scale)) ++i;
        if (i == rope_keys.size()) {
            rope_keys.emplace_back(base, scale);
            ropes_.emplace_back(hp.n_rot, base, weights_.rope_freqs, hp.family->rope, scale, hp.yarn);
            const size_t bytes = padded(static_cast<size_t>(n_batch_) * static_cast<size_t>(hp.n_rot / 2) * 4);
            rope_cos_.push_back(std::make_unique<VulkanBuffer>(*context_, bytes, VulkanMemory::kHost));
            rope_sin_.push_back(std::make_unique<VulkanBuffer>(*context_, bytes, VulkanMemory::kHost));
        }
        rope_of_layer_.push_back(static_cast<int>(i));
    }
}

VulkanSliceForward::~VulkanSliceForward() = default;

std::unique_ptr<VulkanBuffer> VulkanSliceForward::device_buffer(size_t bytes) {
    auto b = std::make_unique<VulkanBuffer>(*context_, bytes, VulkanMemory::kDevice);
    device_bytes_ += bytes;
    return b;
}

std::unique_ptr<VulkanBuffer> VulkanSliceForward::floats(const std::vector<float>& values) {
    auto b = device_buffer(padded(values.size() * 4));
    b->upload(values.data(), values.size() * 4);
    return b;
}

VulkanSliceForward::DeviceMatrix VulkanSliceForward::matrix(const Matrix& m, const char* what, int layer,
                                                            int64_t first_row, int64_t rows, int64_t first_col,
                                                            int64_t cols) {
    const std::string name = layer >= 0 ? fmt::format("blk.{}.{}", layer, what) : std::string(what);
    if (!on_device(m.type)) {
        throw make_error("the Vulkan backend does not run {} weights yet ({}); use --device cpu",
                         quant_type_name(m.type), name);
    }
    if (m.out_scale != 1.0f) {
        throw make_error("the Vulkan backend does not apply a weight's .scale factor yet ({}); use --device cpu", name);
    }
    const int64_t block = layout_of(m.type).block_size;
    if (m.grouped || m.data == nullptr || first_row < m.row_begin || first_row + rows > m.row_end() ||
        first_col < m.col_begin || first_col + cols > m.col_begin + m.cols || (first_col - m.col_begin) % block != 0 ||
        cols % block != 0) {
        throw make_error("internal: rows {}+{}, columns {}+{} of {} are not in its view", first_row, rows, first_col, cols,
                         name);
    }
    if (is_grid(m.type) && grid_tables_.find(m.type) == grid_tables_.end()) {
        const std::vector<uint32_t> words = grid_words(m.type);
        auto tables = device_buffer(words.size() * 4);
        tables->upload(words.data(), words.size() * 4);
        grid_tables_.emplace(m.type, std::move(tables));
    }
    DeviceMatrix d;
    d.type = m.type;
    d.rows = rows;
    d.cols = cols;
    const size_t row_bytes = quant_row_bytes(m.type, cols);
    const size_t offset = quant_row_bytes(m.type, first_col - m.col_begin);
    d.buffer = device_buffer(padded(static_cast<size_t>(rows) * row_bytes));
    if (row_bytes == m.row_bytes) {
        d.buffer->upload(m.row(first_row), static_cast<size_t>(rows) * row_bytes);
        return d;
    }
    // Some columns of every row (a rank's share of wo, w_down): packed here.
    std::vector<uint8_t> packed(static_cast<size_t>(rows) * row_bytes);
    for (int64_t r = 0; r < rows; ++r) {
        std::memcpy(packed.data() + static_cast<size_t>(r) * row_bytes, m.row(first_row + r) + offset, row_bytes);
    }
    d.buffer->upload(packed.data(), packed.size());
    return d;
}

VulkanSliceForward::DeviceMatrix VulkanSliceForward::experts_matrix(const Matrix& m, const char* what, int layer,
                                                                    int64_t per_expert, int64_t first_row, int64_t rows,
                                                                    int64_t first_col, int64_t cols) {
    const Slice& s = weights_.slice;
    const int64_t n_local = s.n_experts();
    const size_t row_bytes = quant_row_bytes(m.type, cols);
    const size_t offset = quant_row_bytes(m.type, first_col - m.col_begin);
    std::vector<uint8_t> packed(static_cast<size_t>(n_local * rows) * row_bytes);
    for (int64_t i = 0; i < n_local; ++i) {
        for (int64_t r = 0; r < rows; ++r) {
            const int64_t whole = (s.expert_begin + i) * per_expert + first_row + r;  // the stacked tensor's row
            if (whole < m.row_begin || whole >= m.row_end()) {
                throw make_error("internal: row {} of blk.{}.{} is not in its view", whole, layer, what);
            }
            std::memcpy(packed.data() + static_cast<size_t>(i * rows + r) * row_bytes, m.row(whole) + offset, row_bytes);
        }
    }
    Matrix band = m;
    band.data = packed.data();
    band.rows = n_local * rows;
    band.row_begin = 0;
    band.cols = cols;
    band.col_begin = 0;
    band.row_bytes = row_bytes;
    return matrix(band, what, layer, 0, band.rows, 0, cols);
}

void VulkanSliceForward::embed(std::span<const int32_t> tokens, float* x) const {
    if (!weights_.slice.embeds) throw make_error("internal: this slice does not hold the token embedding");
    embed_tokens(weights_.token_embd, hparams_, tokens, x);
}

void VulkanSliceForward::record_norm(VkCommandBuffer cb, const VulkanBuffer& x, const VulkanBuffer& weight,
                                     const VulkanBuffer& out, int rows, int64_t n) {
    const VulkanNormParams p{u32(n), u32(rows), hparams_.rms_eps};
    // A workgroup per row (rms_norm.comp).
    kernels_->norm->record(cb, kernels_->norm->bind({&x, &weight, &out}), &p, u32(std::min(rows, 65535)));
}

const VulkanBuffer& VulkanSliceForward::record_activation(VkCommandBuffer cb, QuantType type, const VulkanBuffer& rows,
                                                          int n_tok, int64_t n) {
    const QuantType vdt = require_compute_traits(type, "matrix").vec_dot_type;
    // BF16's shader rounds each float activation to BF16 itself (matvec_bf16.comp).
    if (vdt == QuantType::F32 || vdt == QuantType::BF16) return rows;
    if (vdt == QuantType::Q8_0) {
        if (q8_0_of_ != &rows) {
            const uint32_t blocks = u32(n_tok * n / 32);
            kernels_->quantize_q8_0->record(cb, kernels_->quantize_q8_0->bind({&rows, act_q8_0_.get()}), &blocks,
                                            groups((blocks + 1) / 2));
            q8_0_of_ = &rows;
        }
        return *act_q8_0_;
    }
    if (vdt == QuantType::Q8_K) {
        if (q8_k_of_ != &rows) {
            const uint32_t blocks = u32(n_tok * n / 256);
            kernels_->quantize_q8_k->record(cb, kernels_->quantize_q8_k->bind({&rows, act_q8_k_.get()}), &blocks,
                                            std::min<uint32_t>(blocks, 65535));  // a workgroup per block
            q8_k_of_ = &rows;
        }
        return *act_q8_k_;
    }
    throw make_error("internal: no Vulkan activations of {}", quant_type_name(vdt));
}

void VulkanSliceForward::record_product(VkCommandBuffer cb, const DeviceMatrix& w, const VulkanBuffer& act, int n_tok,
                                        const VulkanBuffer& y, int64_t y_stride, int64_t unit_cols, bool then_barrier) {
    const int64_t block = layout_of(w.type).block_size;
    const int64_t row_blocks = w.cols / block;
    // Units of unit_cols columns, the last one what is left (model/reduction_units.h).
    const int64_t units = unit_cols > 0 ? (w.cols + unit_cols - 1) / unit_cols : 1;
    const int64_t unit_blocks = unit_cols > 0 ? unit_cols / block : row_blocks;
    VulkanMatmulParams p{u32(unit_blocks),    u32(units),    u32(w.rows), u32(row_blocks), 0,
                         u32(row_blocks),     u32(y_stride), u32(n_tok),  u32(row_blocks)};
    if (VulkanKernel* one = n_tok == 1 && !is_grid(w.type) ? kernels_->one_token_product(w.type) : nullptr) {
        one->record(cb, one->bind(product_buffers(w, act, y)), &p, subgroup_row_groups(context_->info(), w.rows), 1, 1,
                    then_barrier);
        return;
    }
    record_layout(cb, kernels_->product(w.type), product_buffers(w, act, y), p, w.type, w.rows, units, n_tok,
                  then_barrier);
}

void VulkanSliceForward::record_layout(VkCommandBuffer cb, VulkanKernel& k, const std::vector<const VulkanBuffer*>& buffers,
                                       VulkanMatmulParams& p, QuantType type, int64_t rows, int64_t units, int n_tok,
                                       bool then_barrier) {
    // Tiles: block types only (the float products' lanes keep their own
    // layouts), prompts or every product as tiles_ says.
    const bool tiles = layout_of(type).block_size > 1 &&
                       (tiles_ == ProductTiles::kEvery || (tiles_ == ProductTiles::kPrompts && n_tok > 1));
    if (tiles) {
        p.serial = 2;
        k.record(cb, k.bind(buffers), &p, tile_groups(rows, units), tile_token_groups(n_tok), 1, then_barrier);
        return;
    }
    p.serial = serial_ ? 1 : 0;
    k.record(cb, k.bind(buffers), &p, product_groups(serial_, rows, units), product_token_groups(serial_, n_tok), 1,
             then_barrier);
}

std::vector<const VulkanBuffer*> VulkanSliceForward::product_buffers(const DeviceMatrix& w, const VulkanBuffer& act,
                                                                    const VulkanBuffer& y) const {
    if (!is_grid(w.type)) return {w.buffer.get(), &act, &y};
    return {w.buffer.get(), &act, &y, grid_tables_.at(w.type).get()};
}

void VulkanSliceForward::record_dots(VkCommandBuffer cb, const DeviceMatrix& w, const VulkanBuffer& act, int n_tok,
                                     int64_t unit_cols) {
    dot_units_ = (w.cols + unit_cols - 1) / unit_cols;
    dot_experts_ = 1;
    down_bias_ = nullptr;
    record_product(cb, w, act, n_tok, *dots_, w.rows * dot_units_, unit_cols);
}

void VulkanSliceForward::prepare_rope(std::span<const int> positions) {
    const auto n_tok = static_cast<int>(positions.size());
    for (size_t i = 0; i < ropes_.size(); ++i) {
        RopeTable& rope = ropes_[i];
        const size_t pairs = rope.cos_table().size();
        for (int t = 0; t < n_tok; ++t) {
            rope.set_position(positions[static_cast<size_t>(t)]);
            rope_cos_[i]->upload(rope.cos_table().data(), pairs * 4, static_cast<size_t>(t) * pairs * 4);
            rope_sin_[i]->upload(rope.sin_table().data(), pairs * 4, static_cast<size_t>(t) * pairs * 4);
        }
    }
}

void VulkanSliceForward::record_attention(VkCommandBuffer cb, int layer, int n_tok) {
    const ModelHParams& hp = hparams_;
    const Layer& l = layers_[static_cast<size_t>(layer - weights_.slice.layer_begin)];
    const int64_t n_embd = hp.n_embd, hd = hp.head_dim;

    // Q/K/V of this share's heads, their biases and norms, RoPE, the K/V store.
    new_input();
    record_norm(cb, *x_, *l.attn_norm, *h_, n_tok, n_embd);
    // Q, K and V of one input: no barrier between their products.
    record_product(cb, l.wq, record_activation(cb, l.wq.type, *h_, n_tok, n_embd), n_tok, *q_, q_width_, 0, false);
    record_product(cb, l.wk, record_activation(cb, l.wk.type, *h_, n_tok, n_embd), n_tok, *k_, kv_width_, 0, false);
    record_product(cb, l.wv, record_activation(cb, l.wv.type, *h_, n_tok, n_embd), n_tok, *v_, kv_width_, 0);
    const auto bias = [&](const std::unique_ptr<VulkanBuffer>& b, VulkanBuffer& y, int64_t n, int64_t first) {
        if (!b) return;
        const VulkanAddBiasParams p{u32(n), u32(n_tok), u32(n), u32(first)};
        kernels_->add_bias->record(cb, kernels_->add_bias->bind({&y, b.get()}), &p, groups(n), u32(n_tok));
    };
    bias(l.q_bias, *q_, q_width_, q_begin_);
    bias(l.k_bias, *k_, kv_width_, kv_begin_);
    bias(l.v_bias, *v_, kv_width_, kv_begin_);
    if (l.q_norm) record_norm(cb, *q_, *l.q_norm, *q_, n_tok * n_q_heads_, hd);
    if (l.k_norm) record_norm(cb, *k_, *l.k_norm, *k_, n_tok * n_kv_, hd);
    const int table = rope_of_layer_[static_cast<size_t>(layer - weights_.slice.layer_begin)];
    const auto pairs = static_cast<int64_t>(ropes_[static_cast<size_t>(table)].cos_table().size());
    if (pairs > 0) {
        const uint32_t halves = hp.family->rope == RopeLayout::kHalves ? 1u : 0u;
        const VulkanBuffer* cos = rope_cos_[static_cast<size_t>(table)].get();
        const VulkanBuffer* sin = rope_sin_[static_cast<size_t>(table)].get();
        const VulkanRopeParams pq{u32(n_q_heads_), u32(hd), u32(pairs), halves, u32(n_tok), u32(q_width_)};
        kernels_->rope->record(cb, kernels_->rope->bind({q_.get(), cos, sin}), &pq, groups(n_q_heads_ * pairs), u32(n_tok),
                               1, false);
        const VulkanRopeParams pk{u32(n_kv_), u32(hd), u32(pairs), halves, u32(n_tok), u32(kv_width_)};
        kernels_->rope->record(cb, kernels_->rope->bind({k_.get(), cos, sin}), &pk, groups(n_kv_ * pairs), u32(n_tok));
    }
    const uint32_t k_type = kv_code(kv_types_.k), v_type = kv_code(kv_types_.v);
    const VulkanKvStoreParams ps{u32(n_kv_), u32(hd), u32(n_ctx_), u32(n_tok), u32(kv_width_), k_type, v_type};
    kernels_->kv_store->record(cb, kernels_->kv_store->bind({k_.get(), v_.get(), l.k_cache.get(), l.v_cache.get(), rows_.get()}), &ps,
                               groups(kv_width_), u32(n_tok));
    if (l.lm_k) {
        // The blocks the batch's rows complete (KvCache::store_head's).
        const VulkanLandmarkParams pl{u32(n_kv_), u32(hd), u32(n_ctx_), u32(n_tok), k_type, v_type, u32(sparse_.block)};
        kernels_->landmarks->record(
            cb, kernels_->landmarks->bind({l.k_cache.get(), l.v_cache.get(), l.lm_k.get(), l.lm_v.get(), rows_.get()}),
            &pl, groups(kv_width_), u32(n_tok));
    }

    // Attention itself, in dispatches of scores_rows_ rows; runs longer than
    // SliceForward::kRowwiseRows attend as a prompt does on the CPU.
    const float scale = hp.query_scale > 0.0f ? hp.query_scale : 1.0f / std::sqrt(static_cast<float>(hd));
    const VkDescriptorSet attention =
        kernels_->attention->bind({q_.get(), l.k_cache.get(), l.v_cache.get(), attn_.get(), scores_.get(),
                                   l.sinks ? l.sinks.get() : unused_.get(), rows_.get(),
                                   mass_ ? mass_.get() : unused_.get(), sparse_rows_ ? sparse_rows_.get() : unused_.get(),
                                   l.lm_k ? l.lm_k.get() : unused_.get(), l.lm_v ? l.lm_v.get() : unused_.get()});
    static_assert(SliceForward::kRowwiseRows == 32, "attention.comp attends runs of more than 32 rows as a prompt");
    for (int t0 = 0; t0 < n_tok; t0 += scores_rows_) {
        const VulkanAttentionParams pa{u32(hd),       u32(hp.q_per_kv()), u32(n_q_heads_), u32(n_ctx_), u32(t0),
                                       u32(l.window), scale,              k_type,          v_type,
                                       u32(q_width_), hp.attn_soft_cap,   l.sinks ? 1u : 0u,
                                       mass_ ? 1u : 0u,   sparse_.enabled ? 1u : 0u,
                                       u32(sparse_.block), u32(score_span_)};
        kernels_->attention->record(cb, attention, &pa, u32(n_q_heads_), u32(std::min(scores_rows_, n_tok - t0)));
    }
    new_input();
    record_dots(cb, l.wo, record_activation(cb, l.wo.type, *attn_, n_tok, q_width_), n_tok, units_.wo_cols(hp));
}

void VulkanSliceForward::record_ffn(VkCommandBuffer cb, int layer, int n_tok) {
    const ModelHParams& hp = hparams_;
    const Layer& l = layers_[static_cast<size_t>(layer - weights_.slice.layer_begin)];
    new_input();
    record_norm(cb, *x_, *l.ffn_norm, *h_, n_tok, hp.n_embd);
    record_product(cb, l.w_gate, record_activation(cb, l.w_gate.type, *h_, n_tok, hp.n_embd), n_tok, *gate_, n_ffn_, 0,
                   false);
    record_product(cb, l.w_up, record_activation(cb, l.w_up.type, *h_, n_tok, hp.n_embd), n_tok, *up_, n_ffn_, 0);
    const uint32_t ps_glu[2] = {u32(n_ffn_), u32(n_tok)};
    VulkanKernel& gate = kernels_->gate(hp.family->activation);
    gate.record(cb, gate.bind({gate_.get(), up_.get()}), ps_glu, groups(n_ffn_), u32(n_tok));
    new_input();
    record_dots(cb, l.w_down, record_activation(cb, l.w_down.type, *gate_, n_tok, n_ffn_), n_tok, units_.ffn_channels);
}

std::vector<const VulkanBuffer*> VulkanSliceForward::unit_buffers(const VulkanBuffer& out) const {
    const bool biased = down_bias_ != nullptr;
    return {dots_.get(), &out, biased ? expert_scale_.get() : unused_.get(), biased ? chosen_.get() : unused_.get(),
            biased ? down_bias_ : unused_.get()};
}

void VulkanSliceForward::record_add_dots(VkCommandBuffer cb, int n_tok, const VulkanBuffer* post_norm,
                                         const VulkanBuffer* bias) {
    const int64_t n_embd = hparams_.n_embd;
    if (post_norm == nullptr && bias == nullptr) {
        VulkanAddUnitsParams p{u32(n_embd), u32(dot_units_), u32(n_tok), u32(n_embd), u32(dot_experts_)};
        p.down_bias = down_bias_ != nullptr ? 1 : 0;
        kernels_->add_units->record(cb, kernels_->add_units->bind(unit_buffers(*x_)), &p, groups(n_embd), u32(n_tok));
        return;
    }
    // The sum as a float, plus wo's bias, normed: then added
    // (join_attention_output's order).
    record_sum(cb, n_tok, *out_, true);
    if (bias != nullptr) {
        const VulkanAddBiasParams pb{u32(n_embd), u32(n_tok), u32(n_embd), 0};
        kernels_->add_bias->record(cb, kernels_->add_bias->bind({out_.get(), bias}), &pb, groups(n_embd), u32(n_tok));
    }
    const VulkanBuffer* output = out_.get();
    if (post_norm != nullptr) {
        record_norm(cb, *out_, *post_norm, *h_, n_tok, n_embd);
        output = h_.get();
    }
    const uint32_t n = u32(n_tok * n_embd);
    kernels_->add_rows->record(cb, kernels_->add_rows->bind({x_.get(), output}), &n, groups(n));
}

void VulkanSliceForward::record_router(VkCommandBuffer cb, int layer, int n_tok) {
    const Layer& l = layers_[static_cast<size_t>(layer - weights_.slice.layer_begin)];
    new_input();
    record_norm(cb, *x_, *l.ffn_norm, *h_, n_tok, hparams_.n_embd);
    record_product(cb, l.router, record_activation(cb, l.router.type, *h_, n_tok, hparams_.n_embd), n_tok,
                   *router_logits_, hparams_.n_expert, 0);
}

void VulkanSliceForward::choose_experts(int layer, int n_tok) {
    const ModelHParams& hp = hparams_;
    const auto n_expert = static_cast<size_t>(hp.n_expert), k = static_cast<size_t>(hp.n_expert_used);
    router_rows_.resize(static_cast<size_t>(n_tok) * n_expert);
    router_logits_->download(router_rows_.data(), router_rows_.size() * 4);
    choices_.resize(static_cast<size_t>(n_tok) * k);
    std::vector<float> weights(choices_.size());
    std::vector<uint32_t> chosen(choices_.size());
    const std::vector<float>& bias = layer_weights(layer).router_bias;
    for (size_t t = 0; t < static_cast<size_t>(n_tok); ++t) {
        float* row = router_rows_.data() + t * n_expert;
        if (!bias.empty()) {
            for (size_t e = 0; e < n_expert; ++e) row[e] += bias[e];
        }
        route_token(*hp.family, std::span<float>(row, n_expert), std::span<ExpertChoice>(choices_.data() + t * k, k));
        // This share's experts by their local index; another rank adds the
        // rest (a weight of 0 here keeps their down biases out).
        const Slice& s = weights_.slice;
        for (size_t i = 0; i < k; ++i) {
            const ExpertChoice& c = choices_[t * k + i];
            const bool local = c.expert >= s.expert_begin && c.expert < s.expert_end;
            weights[t * k + i] = local ? c.weight : 0.0f;
            chosen[t * k + i] = local ? static_cast<uint32_t>(c.expert - s.expert_begin) : 0u;
        }
    }
    expert_scale_->upload(weights.data(), weights.size() * 4);
    chosen_->upload(chosen.data(), chosen.size() * 4);
}

// Each token's k experts (choose_experts) over h_ (the FFN's normed input,
// and its converted activation, kept from record_router): gate and up of
// the expert's band of rows, the gating times the router's weight, the down
// product's units into dots_ as [token][expert][row][unit].
void VulkanSliceForward::record_experts(VkCommandBuffer cb, int layer, int n_tok) {
    const ModelHParams& hp = hparams_;
    const Layer& l = layers_[static_cast<size_t>(layer - weights_.slice.layer_begin)];
    const int64_t n_embd = hp.n_embd, k = hp.n_expert_used;
    const int64_t pairs = static_cast<int64_t>(n_tok) * k;
    const auto expert_rows = [&](const DeviceMatrix& w, int64_t first_row, int64_t rows, const VulkanBuffer& act,
                                 int64_t x_row, const VulkanBuffer& y, int64_t y_begin, int64_t unit_cols,
                                 bool then_barrier) {
        const int64_t block = layout_of(w.type).block_size, row_blocks = w.cols / block;
        const int64_t units = unit_cols > 0 ? (w.cols + unit_cols - 1) / unit_cols : 1;
        const int64_t unit_blocks = unit_cols > 0 ? unit_cols / block : row_blocks;
        VulkanMatmulParams p{u32(unit_blocks), u32(units), u32(rows), u32(row_blocks), u32(first_row * row_blocks),
                             u32(row_blocks), u32(rows * units), 1, u32(row_blocks)};
        p.x_begin = u32(x_row);
        p.y_begin = u32(y_begin);
        record_layout(cb, kernels_->product(w.type), product_buffers(w, act, y), p, w.type, rows, units, 1,
                      then_barrier);
    };
    const Slice& s = weights_.slice;
    const int64_t n_ffn = n_ffn_;
    // pair j's expert among this share's (its band's index), or -1.
    const auto local = [&](int64_t j) {
        const int e = choices_[static_cast<size_t>(j)].expert;
        return e >= s.expert_begin && e < s.expert_end ? e - s.expert_begin : -1;
    };
    const VulkanBuffer& h_gate = record_activation(cb, l.gate_exps.type, *h_, n_tok, n_embd);
    for (int64_t j = 0; j < pairs; ++j) {
        if (local(j) >= 0) expert_rows(l.gate_exps, local(j) * n_ffn, n_ffn, h_gate, j / k, *gate_, j * n_ffn, 0, false);
    }
    const VulkanBuffer& h_up = record_activation(cb, l.up_exps.type, *h_, n_tok, n_embd);
    for (int64_t j = 0; j < pairs; ++j) {
        if (local(j) >= 0) expert_rows(l.up_exps, local(j) * n_ffn, n_ffn, h_up, j / k, *up_, j * n_ffn, 0, false);
    }
    record_compute_barrier(cb);
    const uint32_t glu[2] = {u32(n_ffn), u32(pairs)};
    const auto expert_bias = [&](const std::unique_ptr<VulkanBuffer>& bias, VulkanBuffer& y) {
        if (!bias) return;
        kernels_->add_expert_bias->record(cb, kernels_->add_expert_bias->bind({&y, bias.get(), chosen_.get()}), glu,
                                          groups(n_ffn), u32(pairs));
    };
    expert_bias(l.gate_exps_bias, *gate_);
    expert_bias(l.up_exps_bias, *up_);
    VulkanKernel& gate = kernels_->gate(hp.family->activation);
    gate.record(cb, gate.bind({gate_.get(), up_.get()}), glu, groups(n_ffn), u32(pairs));
    kernels_->scale_rows->record(cb, kernels_->scale_rows->bind({gate_.get(), expert_scale_.get()}), glu, groups(n_ffn),
                                 u32(pairs));
    new_input();
    const VulkanBuffer& act = record_activation(cb, l.down_exps.type, *gate_, static_cast<int>(pairs), n_ffn);
    const int64_t unit_cols = units_.ffn_channels;
    dot_units_ = (n_ffn + unit_cols - 1) / unit_cols;
    dot_experts_ = k;
    down_bias_ = l.down_exps_bias.get();  // joined with the units (record_add_dots)
    const size_t slot_bytes = static_cast<size_t>(n_embd * dot_units_) * 4;
    for (int64_t j = 0; j < pairs; ++j) {
        if (local(j) >= 0) {
            expert_rows(l.down_exps, local(j) * n_embd, n_embd, act, j, *dots_, j * n_embd * dot_units_, unit_cols, false);
        } else {
            record_zero(cb, *dots_, static_cast<size_t>(j) * slot_bytes, slot_bytes);  // another rank's expert
        }
    }
    record_compute_barrier(cb);
}

void VulkanSliceForward::record_layer(VkCommandBuffer cb, int layer, int n_tok) {
    const Layer& l = layers_[static_cast<size_t>(layer - weights_.slice.layer_begin)];
    record_attention(cb, layer, n_tok);
    record_add_dots(cb, n_tok, l.post_attn_norm.get(), l.wo_bias.get());
    record_ffn(cb, layer, n_tok);
    record_add_dots(cb, n_tok, l.post_ffn_norm.get());
}

void VulkanSliceForward::forward_layers(float* x, int pos0, int n_tok) {
    const SeqRun run{0, pos0, n_tok};
    forward_layers(x, std::span<const SeqRun>(&run, 1));
}

void VulkanSliceForward::reset_mass(std::span<const SeqRun> runs) {
    if (!mass_) return;
    for (const SeqRun& r : runs) {
        const std::vector<uint64_t> zeros(static_cast<size_t>(r.n_tok), 0);
        mass_->upload(zeros.data(), zeros.size() * 8, (static_cast<size_t>(r.seq) * n_ctx_ + r.pos0) * 8);
    }
}

void VulkanSliceForward::add_attention_mass(int seq, int n_used, int64_t* totals) {
    if (!mass_) throw make_error("internal: attention is not tracked on this slice");
    if (seq < 0 || seq >= n_seq_ || n_used < 0 || n_used > n_ctx_) {
        throw make_error("no attention of {} positions of sequence {} (context {}, {} sequences)", n_used, seq, n_ctx_,
                         n_seq_);
    }
    std::vector<uint64_t> counts(static_cast<size_t>(n_used));
    mass_->download(counts.data(), counts.size() * 8, static_cast<size_t>(seq) * n_ctx_ * 8);
    for (int p = 0; p < n_used; ++p) totals[p] += static_cast<int64_t>(counts[static_cast<size_t>(p)]);
}

void VulkanSliceForward::forward_layers(float* x, std::span<const SeqRun> runs) {
    const int n_tok = check_runs(runs);
    reset_mass(runs);  // new rows' attention starts from zero (AttentionMass::reset)
    const Slice& slice = weights_.slice;
    if (slice.n_kv_heads() != hparams_.n_head_kv || slice.n_ffn() != hparams_.n_ff) {
        throw make_error("internal: whole layers asked of a share ({})", describe_slice(slice));
    }
    const size_t bytes = static_cast<size_t>(n_tok) * static_cast<size_t>(hparams_.n_embd) * 4;
    prepare_rows(runs);
    x_->upload(x, bytes);
    // One submission for every layer of a dense slice. A mixture of experts
    // ends one at each router: the host chooses the experts (as the CPU's
    // route_token chooses them), and the next submission starts with them.
    const bool moe = hparams_.has_experts();
    int layer = slice.layer_begin;
    bool routed = false;  // the next submission starts with `layer`'s experts
    while (layer < slice.layer_end) {
        context_->run([&](VkCommandBuffer cb) {
            record_host_to_compute(cb);
            for (; layer < slice.layer_end; ++layer) {
                const Layer& l = layers_[static_cast<size_t>(layer - slice.layer_begin)];
                if (routed) {
                    record_experts(cb, layer, n_tok);
                    record_add_dots(cb, n_tok, l.post_ffn_norm.get());
                    routed = false;
                    continue;
                }
                if (!moe) {
                    record_layer(cb, layer, n_tok);
                    continue;
                }
                record_attention(cb, layer, n_tok);
                record_add_dots(cb, n_tok, l.post_attn_norm.get(), l.wo_bias.get());
                record_router(cb, layer, n_tok);
                routed = true;
                break;
            }
            record_compute_to_host(cb);
        });
        if (routed) choose_experts(layer, n_tok);
    }
    x_->download(x, bytes);
}

void VulkanSliceForward::logits(const float* x, int n_tok, float* logits) {
    const ModelHParams& hp = hparams_;
    if (!weights_.slice.outputs || weights_.slice.vocab_begin != 0 || weights_.slice.vocab_end != hp.n_vocab) {
        throw make_error("internal: this slice does not hold the whole output head");
    }
    check_rows(n_tok);
    x_->upload(x, static_cast<size_t>(n_tok) * static_cast<size_t>(hp.n_embd) * 4);
    context_->run([&](VkCommandBuffer cb) {
        record_host_to_compute(cb);
        new_input();
        record_norm(cb, *x_, *output_norm_, *h_, n_tok, hp.n_embd);
        record_head(cb, *h_, n_tok);
        record_compute_to_host(cb);
    });
    read_head(n_tok, logits, hp.n_vocab);
}

void VulkanSliceForward::head_rows(const float* h, int n_tok, float* logits, int64_t stride) {
    if (weights_.slice.n_vocab_rows() == 0) throw make_error("internal: this slice holds no rows of the output head");
    check_rows(n_tok);
    x_->upload(h, static_cast<size_t>(n_tok) * static_cast<size_t>(hparams_.n_embd) * 4);
    context_->run([&](VkCommandBuffer cb) {
        record_host_to_compute(cb);
        new_input();
        record_head(cb, *x_, n_tok);
        record_compute_to_host(cb);
    });
    read_head(n_tok, logits, stride);
}

void VulkanSliceForward::norm_output_input(const float* x, float* h, int n_tok) const {
    check_rows(n_tok);
    if (!weights_.slice.outputs) throw make_error("internal: this slice does not hold the output norm");
    const int64_t n_embd = hparams_.n_embd;
    for (int t = 0; t < n_tok; ++t) {
        rms_norm(x + t * n_embd, weights_.output_norm.data(), n_embd, hparams_.rms_eps, h + t * n_embd);
    }
}

void VulkanSliceForward::record_head(VkCommandBuffer cb, const VulkanBuffer& h, int n_tok) {
    record_product(cb, output_, record_activation(cb, output_.type, h, n_tok, hparams_.n_embd), n_tok, *logits_,
                   output_.rows, 0);
}

void VulkanSliceForward::read_head(int n_tok, float* logits, int64_t stride) {
    const auto rows = static_cast<size_t>(output_.rows);
    for (int t = 0; t < n_tok; ++t) {
        float* row = logits + static_cast<size_t>(t) * static_cast<size_t>(stride);
        logits_->download(row, rows * 4, static_cast<size_t>(t) * rows * 4);
        if (!weights_.output_bias.empty()) {
            const size_t first = static_cast<size_t>(weights_.slice.vocab_begin);
            for (size_t v = 0; v < rows; ++v) row[v] += weights_.output_bias[first + v];
        }
        // The final soft cap on the host: the CPU's own function.
        if (hparams_.final_soft_cap > 0.0f) soft_cap(row, static_cast<int64_t>(rows), hparams_.final_soft_cap);
    }
}

void VulkanSliceForward::check_rows(int n_tok) const {
    if (n_tok < 1 || n_tok > n_batch_) throw make_error("internal: batch of {} positions (at most {})", n_tok, n_batch_);
}

void VulkanSliceForward::new_input() { q8_0_of_ = q8_k_of_ = nullptr; }

void VulkanSliceForward::record_sum(VkCommandBuffer cb, int n_tok, const VulkanBuffer& out, bool as_float) {
    const uint32_t p[6] = {u32(hparams_.n_embd), u32(dot_units_), u32(n_tok), as_float ? 1u : 0u, u32(dot_experts_),
                           down_bias_ != nullptr ? 1u : 0u};
    kernels_->sum_units->record(cb, kernels_->sum_units->bind(unit_buffers(out)), p, groups(hparams_.n_embd), u32(n_tok));
}

void VulkanSliceForward::attention_partial_of(int layer, const float* x, std::span<const SeqRun> runs, double* partial) {
    const int n_tok = check_runs(runs);
    const size_t n = static_cast<size_t>(n_tok) * static_cast<size_t>(hparams_.n_embd);
    if (n_kv_ == 0) {
        std::fill(partial, partial + n, 0.0);
    } else {
        prepare_rows(runs);
        if (layer == weights_.slice.layer_begin) reset_mass(runs);
        x_->upload(x, n * 4);
        context_->run([&](VkCommandBuffer cb) {
            record_host_to_compute(cb);
            record_attention(cb, layer, n_tok);
            record_sum(cb, n_tok, *partial_, false);
            record_compute_to_host(cb);
        });
        partial_->download(partial, n * 8);
    }
    emit_bands();
}

void VulkanSliceForward::ffn_partial_of(int layer, const float* x, int n_tok, double* partial) {
    check_rows(n_tok);

    const size_t n = static_cast<size_t>(n_tok) * static_cast<size_t>(hparams_.n_embd);
    if (n_ffn_ == 0) {
        std::fill(partial, partial + n, 0.0);
    } else {
        x_->upload(x, n * 4);
        if (hparams_.has_experts()) {
            // The router first (its logits to the host), then the experts.
            context_->run([&](VkCommandBuffer cb) {
                record_host_to_compute(cb);
                record_router(cb, layer, n_tok);
                record_compute_to_host(cb);
            });
            choose_experts(layer, n_tok);
        }
        context_->run([&](VkCommandBuffer cb) {
            record_host_to_compute(cb);
            if (hparams_.has_experts()) {
                record_experts(cb, layer, n_tok);
            } else {
                record_ffn(cb, layer, n_tok);
            }
            record_sum(cb, n_tok, *partial_, false);
            record_compute_to_host(cb);
        });
        partial_->download(partial, n * 8);
    }
    emit_bands();
}

// The partial came back whole: its bands go out in the order the exchange asked.
void VulkanSliceForward::emit_bands() {
    if (!on_band_ || bands_ <= 1) return;
    const int64_t n_rows = hparams_.n_embd;
    const int64_t count = SliceForward::partial_band_count(n_rows, bands_);
    for (int64_t k = 0; k < count; ++k) {
        const int64_t b = (first_band_ + k) % count;
        const int64_t r0 = b == 0 ? 0 : SliceForward::partial_band_end(n_rows, count, b - 1);
        on_band_(static_cast<int>(r0), static_cast<int>(SliceForward::partial_band_end(n_rows, count, b)));
    }
}

void VulkanSliceForward::set_partial_bands(int bands, BandSink on_band, int first_band) {
    bands_ = std::max(1, bands);
    on_band_ = std::move(on_band);
    first_band_ = std::max(0, first_band);
}

// The group's sum joins the residual on the host, as a CPU rank joins it.
const LayerWeights& VulkanSliceForward::layer_weights(int layer) const {
    return weights_.layers.at(static_cast<size_t>(layer - weights_.slice.layer_begin));
}
void VulkanSliceForward::add_attention_output(int layer, const double* partial, float* x, int n_tok) {
    join_attention_output(layer_weights(layer), hparams_, partial, x, n_tok, join_);
}
void VulkanSliceForward::add_ffn_output(int layer, const double* partial, float* x, int n_tok) {
    join_ffn_output(layer_weights(layer), hparams_, partial, x, n_tok, join_);
}
void VulkanSliceForward::add_attention_output(int layer, const float* sum, float* x, int n_tok) {
    join_attention_output(layer_weights(layer), hparams_, sum, x, n_tok, join_);
}
void VulkanSliceForward::add_ffn_output(int layer, const float* sum, float* x, int n_tok) {
    join_ffn_output(layer_weights(layer), hparams_, sum, x, n_tok, join_);
}

int VulkanSliceForward::check_runs(std::span<const SeqRun> runs) const {
    return check_seq_runs(runs, n_seq_, n_ctx_, n_batch_);
}

// Each row's sequence, position, place in its run and the run's length
// (attention.comp, kv_store.comp), and RoPE's cos/sin of its position.
void VulkanSliceForward::prepare_rows(std::span<const SeqRun> runs) {
    std::vector<uint32_t> rows;
    std::vector<int> positions;
    for (const SeqRun& r : runs) {
        for (int i = 0; i < r.n_tok; ++i) {
            rows.insert(rows.end(), {u32(r.seq), u32(r.pos0 + i), u32(i), u32(r.n_tok)});
            positions.push_back(r.pos0 + i);
        }
    }
    rows_->upload(rows.data(), rows.size() * 4);
    if (sparse_.enabled) prepare_sparse_rows(runs);
    prepare_rope(positions);
}

// Each row's attention as attn/attention.cpp decides it: a run longer than
// SliceForward::kRowwiseRows whose last position still reads what dense
// reads attends as a prompt (mode 0); otherwise each position alone, dense
// (1) where sparse_is_dense_at says so, else sparse (2) over its window, its
// scattered positions and its landmark blocks (sparse_candidates).
void VulkanSliceForward::prepare_sparse_rows(std::span<const SeqRun> runs) {
    std::vector<uint32_t> header, indices;
    SparseCandidates c;
    for (const SeqRun& r : runs) {
        const bool batched = r.n_tok > SliceForward::kRowwiseRows && sparse_is_dense_at(r.pos0 + r.n_tok - 1, sparse_);
        for (int i = 0; i < r.n_tok; ++i) {
            const int pos = r.pos0 + i;
            if (batched || sparse_is_dense_at(pos, sparse_)) {
                header.insert(header.end(), {batched ? 0u : 1u, 0u, 0u, 0u, 0u, 0u, 0u, 0u});
                continue;
            }
            sparse_candidates(pos, sparse_, c);
            header.insert(header.end(), {2u, u32(c.window_begin), u32(c.tokens.size()), u32(c.blocks.size()),
                                         u32(indices.size()), 0u, 0u, 0u});
            for (int t : c.tokens) indices.push_back(u32(t));
            for (int b : c.blocks) indices.push_back(u32(b));
        }
    }
    // The candidates follow the headers: offsets count from the buffer's start.
    for (size_t row = 0; row < header.size() / 8; ++row) {
        if (header[row * 8] == 2u) header[row * 8 + 4] += u32(header.size());
    }
    header.insert(header.end(), indices.begin(), indices.end());
    const size_t bytes = header.size() * 4;
    if (!sparse_rows_ || sparse_rows_->size() < bytes) {
        sparse_rows_ = std::make_unique<VulkanBuffer>(*context_, std::max<size_t>(bytes, 4096), VulkanMemory::kHost);
    }
    sparse_rows_->upload(header.data(), bytes);
}

// A context shift or eviction, on the host: the sequence's used rows come
// back, move as the CPU's KvCache::compact_positions moves them (keys decoded,
// rotated by the move with the layer's RoPE table, stored again; values
// copied), with the CPU's own conversions, and go back up. Rare enough (a
// full context) that a round trip costs nothing that matters.
void VulkanSliceForward::compact_context(int seq, std::span<const int> kept, int n_used) {
    check_compaction(seq, kept, n_used, n_seq_, n_ctx_);
    if (n_kv_ == 0 || n_used == 0) return;
    if (mass_) {  // AttentionMass::compact
        std::vector<uint64_t> counts(static_cast<size_t>(n_ctx_));
        const size_t at = static_cast<size_t>(seq) * n_ctx_ * 8;
        mass_->download(counts.data(), counts.size() * 8, at);
        for (size_t j = 0; j < kept.size(); ++j) counts[j] = counts[static_cast<size_t>(kept[j])];
        std::fill(counts.begin() + static_cast<std::ptrdiff_t>(kept.size()), counts.end(), uint64_t{0});
        mass_->upload(counts.data(), counts.size() * 8, at);
    }
    const int hd = hparams_.head_dim;
    const uint64_t kb = kv_row_bytes(kv_types_.k, hd), vb = kv_row_bytes(kv_types_.v, hd);
    const size_t used = static_cast<size_t>(n_used);
    std::vector<uint8_t> k_rows(used * kb), v_rows(used * vb);
    std::vector<float> k(static_cast<size_t>(hd));
    const QuantTraits* k_traits = kv_types_.k == QuantType::F32 ? nullptr : &require_compute_traits(kv_types_.k, "KV cache");
    for (size_t local = 0; local < layers_.size(); ++local) {
        const Layer& l = layers_[local];
        RopeTable rope = ropes_[static_cast<size_t>(rope_of_layer_[local])];
        for (int h = 0; h < n_kv_; ++h) {
            const uint64_t row0 = (static_cast<uint64_t>(seq) * n_kv_ + static_cast<uint64_t>(h)) * n_ctx_;
            l.k_cache->download(k_rows.data(), k_rows.size(), row0 * kb);
            l.v_cache->download(v_rows.data(), v_rows.size(), row0 * vb);
            for (size_t j = 0; j < kept.size(); ++j) {
                const auto from = static_cast<size_t>(kept[j]);
                if (from == j) continue;
                if (k_traits == nullptr) {
                    std::memcpy(k.data(), k_rows.data() + from * kb, static_cast<size_t>(hd) * 4);
                } else {
                    k_traits->to_float(k_rows.data() + from * kb, k.data(), hd);
                }
                rope.set_position(static_cast<int64_t>(j) - static_cast<int64_t>(from));
                rope.apply(k.data(), 1, hd);
                if (k_traits == nullptr) {
                    std::memcpy(k_rows.data() + j * kb, k.data(), static_cast<size_t>(hd) * 4);
                } else {
                    k_traits->from_float(k.data(), k_rows.data() + j * kb, hd);
                }
                std::memmove(v_rows.data() + j * vb, v_rows.data() + from * vb, vb);
            }
            l.k_cache->upload(k_rows.data(), k_rows.size(), row0 * kb);
            l.v_cache->upload(v_rows.data(), v_rows.size(), row0 * vb);
            if (l.lm_k) update_landmarks(l, seq, h, kept, k_rows, v_rows);
        }
    }
}

// KvCache::compact_positions' landmarks: those of the blocks from the first
// moved position on, from the moved rows, with the CPU's own code.
void VulkanSliceForward::update_landmarks(const Layer& l, int seq, int head, std::span<const int> kept,
                                          const std::vector<uint8_t>& k_rows, const std::vector<uint8_t>& v_rows) {
    size_t first_moved = 0;
    while (first_moved < kept.size() && kept[first_moved] == static_cast<int>(first_moved)) ++first_moved;
    const int hd = hparams_.head_dim, block = sparse_.block;
    const size_t n_blocks = static_cast<size_t>(n_ctx_ / block);
    std::vector<float> rows(static_cast<size_t>(block) * hd), mean(static_cast<size_t>(hd));
    for (size_t b = first_moved / block; (b + 1) * block <= kept.size(); ++b) {
        for (const bool is_k : {true, false}) {
            const QuantType type = is_k ? kv_types_.k : kv_types_.v;
            const uint64_t rb = kv_row_bytes(type, hd);
            const std::vector<uint8_t>& bytes = is_k ? k_rows : v_rows;
            for (int r = 0; r < block; ++r) {
                const uint8_t* src = bytes.data() + (b * block + static_cast<size_t>(r)) * rb;
                float* dst = rows.data() + static_cast<size_t>(r) * hd;
                if (type == QuantType::F32) {
                    std::memcpy(dst, src, static_cast<size_t>(hd) * 4);
                } else {
                    require_compute_traits(type, "KV cache").to_float(src, dst, hd);
                }
            }
            landmark_mean(rows.data(), block, hd, mean.data());
            const size_t at = ((static_cast<size_t>(seq) * n_kv_ + static_cast<size_t>(head)) * n_blocks + b) * hd * 4;
            (is_k ? l.lm_k : l.lm_v)->upload(mean.data(), mean.size() * 4, at);
        }
    }
}



std::unique_ptr<RankRunner> make_vulkan_rank(const LlamaModel& model, const Slice& slice, const ForwardConfig& config,
                                             int device_index, int gpu_layers) {
    if (gpu_layers < slice.n_layers()) {
        throw make_error("--gpu-layers {}: a tensor-parallel rank keeps all {} of its layers on the device", gpu_layers,
                         slice.n_layers());
    }
    return std::make_unique<VulkanSliceForward>(model, slice, config, device_index);
}

}  // namespace tessera

