#include "model/random_model.h"
#include "ops/quant_traits.h"

#include "model/architecture.h"
#include "model/gguf_file.h"
#include "model/gguf_writer.h"
#include "ops/quant_blocks.h"
#include "util/error.h"
#include "util/fp16.h"
#include "util/rng.h"

#include <cmath>
#include <cstring>

namespace tessera {

namespace {

// llama.cpp's general.file_type for a model whose weights are mostly `type`.
uint32_t file_type_of(QuantType type) {
    switch (type) {
        case QuantType::F32: return 0;
        case QuantType::F16: return 1;
        case QuantType::Q4_0: return 2;
        case QuantType::Q4_1: return 3;
        case QuantType::Q8_0: return 7;
        // llama.cpp has no file type for "all Q4_K"; a --pure Q4_K_M is written as Q4_K_M.
        case QuantType::Q4_K: return 15;
        case QuantType::Q6_K: return 18;
        case QuantType::Q5_0: return 8;
        case QuantType::Q5_1: return 9;
        case QuantType::Q2_K: return 10;
        case QuantType::Q3_K: return 12;  // (as a --pure Q3_K_M)
        case QuantType::Q5_K: return 17;  // (as a --pure Q5_K_M)
        case QuantType::IQ4_NL: return 25;
        case QuantType::IQ4_XS: return 30;
        case QuantType::BF16: return 32;
        case QuantType::MXFP4: return 38;
        case QuantType::Q1_0: return 40;
        case QuantType::Q2_0: return 41;
        case QuantType::TQ1_0: return 36;
        case QuantType::TQ2_0: return 37;
        case QuantType::NVFP4: return 39;
        case QuantType::IQ2_XXS: return 19;
        case QuantType::IQ2_XS: return 20;
        case QuantType::IQ3_XXS: return 23;
        case QuantType::IQ3_S: return 26;
        case QuantType::IQ2_S: return 28;
        case QuantType::IQ1_S: return 24;
        case QuantType::IQ1_M: return 31;
        default:
            throw make_error("gen-model cannot write {} weights (use one of {})", quant_type_name(type),
                             supported_weight_types());
    }
}

void random_bytes(Rng& rng, uint8_t* p, uint64_t n) {
    uint64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const uint64_t r = rng.next_u64();
        std::memcpy(p + i, &r, 8);
    }
    if (i < n) {
        const uint64_t r = rng.next_u64();
        std::memcpy(p + i, &r, n - i);
    }
}

// The K-quant super-blocks of 256 values, byte for byte as llama.cpp's
// block_q4_K and block_q6_K (ggml-common.h).
constexpr uint64_t kQ4_KBytes = 144;  // fp16 d, fp16 dmin, 12 bytes of 6-bit scales/mins, 128 bytes of nibbles
constexpr uint64_t kQ6_KBytes = 210;  // 128 bytes low nibbles, 64 bytes high 2-bit pairs, 16 int8 scales, fp16 d

// Q4_K: value = d * sc[j] * q - dmin * m[j] for sub-block j (32 values),
// q in 0..15. With every sc = 8, m = 60 and dmin = d, a value is
// 8d * (q - 7.5): uniform codes are centred on 0, with standard deviation
// 8d * 4.61.
void fill_random_q4_k(float stddev, Rng& rng, uint8_t* dst, uint64_t n_bytes) {
    const uint16_t d = fp32_to_fp16(stddev / (8.0f * 4.61f));
    constexpr uint8_t sc = 8, m = 60;
    // The 6-bit packing of llama.cpp's get_scale_min_k4: sub-blocks 0..3 in
    // the low 6 bits of bytes 0..7, sub-blocks 4..7 split over bytes 8..11
    // (low 4 bits) and the top 2 bits of bytes 0..7.
    uint8_t scales[12];
    for (int j = 0; j < 4; ++j) {
        scales[j] = static_cast<uint8_t>((sc & 63) | ((sc >> 4) << 6));
        scales[j + 4] = static_cast<uint8_t>((m & 63) | ((m >> 4) << 6));
        scales[j + 8] = static_cast<uint8_t>((sc & 15) | ((m & 15) << 4));
    }
    for (uint64_t b = 0; b < n_bytes / kQ4_KBytes; ++b) {
        uint8_t* block = dst + b * kQ4_KBytes;
        std::memcpy(block, &d, 2);
        std::memcpy(block + 2, &d, 2);
        std::memcpy(block + 4, scales, sizeof scales);
        random_bytes(rng, block + 16, 128);
    }
}

// Q6_K: value = d * scale[k] * (q - 32) for sub-block k (16 values), q in
// 0..63 split into a low nibble (ql) and 2 high bits (qh). Uniform codes are
// not centred (mean -0.5), so code 0 is remapped to 32 (value 0): values
// -31..31 with mean 0 and standard deviation 18.04 * d * scale.
void fill_random_q6_k(float stddev, Rng& rng, uint8_t* dst, uint64_t n_bytes) {
    constexpr int8_t scale = 4;
    const uint16_t d = fp32_to_fp16(stddev / (18.04f * scale));
    for (uint64_t b = 0; b < n_bytes / kQ6_KBytes; ++b) {
        uint8_t* block = dst + b * kQ6_KBytes;
        uint8_t* ql = block;
        uint8_t* qh = block + 128;
        random_bytes(rng, block, 192);
        // Each half of 128 values: value l + 32 * k takes the nibble of
        // ql[l + 32 * (k & 1)] (low for k < 2, high otherwise) and bits
        // 2k..2k+1 of qh[l].
        for (int half = 0; half < 2; ++half) {
            for (int l = 0; l < 32; ++l) {
                uint8_t& h = qh[half * 32 + l];
                const uint8_t lo_a = ql[half * 64 + l];
                const uint8_t lo_b = ql[half * 64 + l + 32];
                const uint8_t nibbles[4] = {static_cast<uint8_t>(lo_a & 15), static_cast<uint8_t>(lo_b & 15),
                                            static_cast<uint8_t>(lo_a >> 4), static_cast<uint8_t>(lo_b >> 4)};
                for (int k = 0; k < 4; ++k) {
                    if (nibbles[k] == 0 && ((h >> (2 * k)) & 3) == 0) h = static_cast<uint8_t>(h | (2 << (2 * k)));
                }
            }
        }
        std::memset(block + 192, static_cast<uint8_t>(scale), 16);
        std::memcpy(block + 208, &d, 2);
    }
}

// The grid I-quants: any bytes are a valid block (point indices, signs and
// scales all take every value), so uniform bytes with one fp16 d for all
// blocks, d set from the standard deviation the first blocks decode to.
// (Their quantizers search a point set per 8 weights: too slow for a
// 1B-parameter file.)
void fill_random_grid(QuantType type, float stddev, Rng& rng, uint8_t* dst, uint64_t n_bytes) {
    const QuantLayout& layout = layout_of(type);
    const uint64_t blocks = n_bytes / layout.block_bytes;
    random_bytes(rng, dst, n_bytes);
    const uint16_t one = fp32_to_fp16(1.0f);
    for (uint64_t b = 0; b < blocks; ++b) std::memcpy(dst + b * layout.block_bytes, &one, 2);
    const uint64_t sample = std::min<uint64_t>(blocks, 64);
    std::vector<float> values(static_cast<size_t>(sample * layout.block_size));
    scalar_traits(type)->to_float(dst, values.data(), static_cast<int64_t>(values.size()));
    double sum2 = 0.0;
    for (float v : values) sum2 += static_cast<double>(v) * v;
    const double rms = values.empty() ? 1.0 : std::sqrt(sum2 / static_cast<double>(values.size()));
    const uint16_t d = fp32_to_fp16(static_cast<float>(stddev / rms));
    for (uint64_t b = 0; b < blocks; ++b) std::memcpy(dst + b * layout.block_bytes, &d, 2);
}

// Fills n_bytes of `type` with values of standard deviation `stddev`, drawing
// quantized codes directly (uniform codes, a fixed block scale) instead of
// quantizing floats: a 1B-parameter file is then written in seconds.
void fill_random(QuantType type, float stddev, uint64_t seed, uint8_t* dst, uint64_t n_bytes) {
    Rng rng(seed);
    switch (type) {
        case QuantType::F32: {
            // Uniform in [-a, a] has standard deviation a / sqrt(3).
            const float a = stddev * std::sqrt(3.0f);
            float* f = reinterpret_cast<float*>(dst);
            for (uint64_t i = 0; i < n_bytes / 4; ++i) f[i] = (2.0f * rng.next_float() - 1.0f) * a;
            break;
        }
        case QuantType::F16: {
            const float a = stddev * std::sqrt(3.0f);
            uint16_t* h = reinterpret_cast<uint16_t*>(dst);
            for (uint64_t i = 0; i < n_bytes / 2; ++i) h[i] = fp32_to_fp16((2.0f * rng.next_float() - 1.0f) * a);
            break;
        }
        case QuantType::Q8_0: {
            // Codes uniform in [-127, 127] have standard deviation ~73.3.
            const uint16_t d = fp32_to_fp16(stddev / 73.3f);
            auto* blocks = reinterpret_cast<BlockQ8_0*>(dst);
            for (uint64_t b = 0; b < n_bytes / sizeof(BlockQ8_0); ++b) {
                blocks[b].d = d;
                random_bytes(rng, reinterpret_cast<uint8_t*>(blocks[b].qs), sizeof blocks[b].qs);
                for (int8_t& q : blocks[b].qs) {
                    if (q == -128) q = -127;
                }
            }
            break;
        }
        case QuantType::Q4_0: {
            // Codes 0..15 stand for -8..7, which is not centred: a mean of -0.5
            // steps in every weight correlates all rows and greedy text
            // collapses into a loop. Code 0 is remapped to 8 (value 0), so
            // values are -7..7 with mean 0 and standard deviation ~4.18.
            const uint16_t d = fp32_to_fp16(stddev / 4.18f);
            auto* blocks = reinterpret_cast<BlockQ4_0*>(dst);
            for (uint64_t b = 0; b < n_bytes / sizeof(BlockQ4_0); ++b) {
                blocks[b].d = d;
                random_bytes(rng, blocks[b].qs, sizeof blocks[b].qs);
                for (uint8_t& q : blocks[b].qs) {
                    uint8_t lo = q & 0x0f, hi = q >> 4;
                    if (lo == 0) lo = 8;
                    if (hi == 0) hi = 8;
                    q = static_cast<uint8_t>(lo | (hi << 4));
                }
            }
            break;
        }
        case QuantType::Q4_K: fill_random_q4_k(stddev, rng, dst, n_bytes); break;
        case QuantType::Q6_K: fill_random_q6_k(stddev, rng, dst, n_bytes); break;
        case QuantType::IQ2_XXS:
        case QuantType::IQ2_XS:
        case QuantType::IQ2_S:
        case QuantType::IQ3_XXS:
        case QuantType::IQ3_S:
        case QuantType::IQ1_S:  // (IQ1_M keeps its d in its scales' top bits: quantized below)
            fill_random_grid(type, stddev, rng, dst, n_bytes);
            break;
        default: {
            // Every other type: Gaussian weights through the type's own
            // quantizer (slower than random codes, but each type's scales and
            // grids come out as real files have them). The quantizers take
            // ~100 ns a value, over ten minutes for an 8B model's matrices, so
            // only a tensor's first kQuantizedValues are quantized; each block
            // after them is a copy of one of those, drawn at random.
            const QuantTraits* traits = scalar_traits(type);
            if (traits == nullptr || traits->from_float == nullptr) {
                throw make_error("gen-model cannot write {} weights", quant_type_name(type));
            }
            constexpr int64_t kQuantizedValues = int64_t{1} << 21;
            const QuantLayout& layout = layout_of(type);
            const auto n_blocks = static_cast<int64_t>(n_bytes / layout.block_bytes);
            const int64_t n = std::min(n_blocks * layout.block_size, kQuantizedValues);
            constexpr int64_t kChunk = 64 * 256;
            std::vector<float> values(static_cast<size_t>(std::min(n, kChunk)));
            for (int64_t i = 0; i < n; i += kChunk) {
                const int64_t count = std::min(kChunk, n - i);
                for (int64_t k = 0; k < count; ++k) values[static_cast<size_t>(k)] = stddev * rng.next_normal();
                traits->from_float(values.data(), dst + quant_row_bytes(type, i), count);
            }
            const auto quantized = static_cast<uint64_t>(n / layout.block_size);
            for (auto b = quantized; b < static_cast<uint64_t>(n_blocks); ++b) {
                std::memcpy(dst + b * layout.block_bytes, dst + rng.next_u64() % quantized * layout.block_bytes,
                            layout.block_bytes);
            }
            break;
        }
    }
}

void set_synthetic_vocab(GgufWriter& writer, int32_t n_vocab) {
    // A SentencePiece-shaped vocabulary: unk, bos, eos, the 256 byte tokens,
    // then filler pieces. Any text encodes (through byte fallback).
    if (n_vocab < 259) throw make_error("a synthetic vocabulary needs at least 259 tokens (got {})", n_vocab);
    std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
    std::vector<int32_t> types = {2, 3, 3};
    for (int b = 0; b < 256; ++b) {
        tokens.push_back(fmt::format("<0x{:02X}>", b));
        types.push_back(6);
    }
    for (int32_t i = static_cast<int32_t>(tokens.size()); i < n_vocab; ++i) {
        tokens.push_back(fmt::format("\xe2\x96\x81t{}", i));
        types.push_back(1);
    }
    std::vector<float> scores(tokens.size());
    for (size_t i = 0; i < scores.size(); ++i) scores[i] = -static_cast<float>(i);
    writer.set_string("tokenizer.ggml.model", "llama");
    writer.set_string_array("tokenizer.ggml.tokens", tokens);
    writer.set_f32_array("tokenizer.ggml.scores", scores);
    writer.set_i32_array("tokenizer.ggml.token_type", types);
    writer.set_u32("tokenizer.ggml.unknown_token_id", 0);
    writer.set_u32("tokenizer.ggml.bos_token_id", 1);
    writer.set_u32("tokenizer.ggml.eos_token_id", 2);
}

}  // namespace

void apply_model_preset(RandomModelSpec& spec, const std::string& name) {
    spec.arch = name;
    spec.random_norms = name != "llama";
    if (name == "llama") return;
    if (name == "llama3") {
        spec.arch = "llama";
        spec.rope_freqs = true;
        spec.tied_output = true;
        spec.rope_freq_base = 500000.0f;
    } else if (name == "mistral") {
        spec.arch = "llama";
        spec.sliding_window = 24;
    } else if (name == "mixtral") {
        spec.arch = "llama";
        spec.rope_freq_base = 1000000.0f;
        if (spec.n_expert == 0) spec.n_expert = 8;
        if (spec.n_expert_used == 0) spec.n_expert_used = 2;
    } else if (name == "gpt-oss") {
        // gpt-oss-20b's heads (64 wide, whatever the width), YaRN over a
        // 4096-token training context, 32 experts of which 4 are used; a
        // window short enough to matter in a test (the real one is 128).
        if (spec.head_dim == 0) spec.head_dim = 64;
        spec.rope_freq_base = 150000.0f;
        spec.sliding_window = 24;
        spec.yarn_factor = 32.0f;
        spec.yarn_orig_ctx = 4096;
        if (spec.n_expert == 0) spec.n_expert = 8;
        if (spec.n_expert_used == 0) spec.n_expert_used = 2;
    } else if (name == "qwen3moe") {
        spec.head_dim = 2 * spec.n_embd / spec.n_head;
        spec.rope_freq_base = 1000000.0f;
        if (spec.n_expert == 0) spec.n_expert = 8;
        if (spec.n_expert_used == 0) spec.n_expert_used = 2;
    } else if (name == "qwen2") {
        spec.rope_freq_base = 1000000.0f;
    } else if (name == "qwen3") {
        spec.head_dim = 2 * spec.n_embd / spec.n_head;  // wider heads than n_embd / n_head, as Qwen 3's
        spec.rope_freq_base = 1000000.0f;
    } else if (name == "gemma2") {
        spec.tied_output = true;
        spec.sliding_window = 24;
    } else if (name == "gemma3") {
        spec.tied_output = true;
        spec.sliding_window = 24;
        spec.rope_freq_base = 1000000.0f;
        spec.rope_freq_base_swa = 10000.0f;
        spec.rope_scale_factor = 8.0f;
    } else if (name != "phi3" && find_architecture(name) == nullptr) {
        throw make_error("gen-model: unknown --arch '{}' (known: {})", name, model_preset_names());
    }
}

std::string model_preset_names() {
    return "llama, llama3, mistral, mixtral, qwen2, qwen3, qwen3moe, gpt-oss, gemma2, gemma3, phi3";
}

void write_random_model(const RandomModelSpec& spec, const std::string& path,
                        const std::function<void(size_t, size_t)>& progress) {
    const uint32_t file_type = file_type_of(spec.type);
    if (spec.n_embd <= 0 || spec.n_layer <= 0 || spec.n_head <= 0 || spec.n_head_kv <= 0 || spec.n_ff <= 0 ||
        spec.n_ctx <= 0) {
        throw make_error("gen-model: every dimension must be positive");
    }
    const Architecture* family = find_architecture(spec.arch);
    if (family == nullptr) throw make_error("gen-model: unknown architecture '{}' (known: {})", spec.arch, supported_architectures());
    if (spec.head_dim == 0 && spec.n_embd % spec.n_head != 0) {
        throw make_error("gen-model: --dim {} is not a multiple of --heads {}", spec.n_embd, spec.n_head);
    }
    if (spec.n_head % spec.n_head_kv != 0) {
        throw make_error("gen-model: --heads {} is not a multiple of --kv-heads {}", spec.n_head, spec.n_head_kv);
    }
    if (family->writes_experts && spec.n_expert == 0) {
        throw make_error("gen-model: {} is a mixture of experts: --experts must be positive", spec.arch);
    }
    // (1024: what a reader accepts, model/hparams.cpp.)
    if (spec.n_expert < 0 || spec.n_expert > 1024) {
        throw make_error("gen-model: --experts must be in [0, 1024] (got {})", spec.n_expert);
    }
    if (spec.n_expert > 0 && (spec.n_expert_used < 1 || spec.n_expert_used > spec.n_expert)) {
        throw make_error("gen-model: --experts-used must be in [1, --experts] ({} of {})", spec.n_expert_used, spec.n_expert);
    }
    const int32_t head_dim = spec.head_dim > 0 ? spec.head_dim : spec.n_embd / spec.n_head;
    if (spec.dense_type && spec.n_expert == 0) {
        throw make_error("gen-model: --dense-type is for a mixture of experts (--experts)");
    }
    for (const QuantType t : {spec.type, spec.dense_type.value_or(spec.type)}) {
        const int64_t block = layout_of(t).block_size;
        if (spec.n_embd % block != 0 || spec.n_ff % block != 0 ||
            (static_cast<int64_t>(head_dim) * spec.n_head) % block != 0) {
            throw make_error("gen-model: {} needs --dim and --ffn to be multiples of {}", quant_type_name(t), block);
        }
    }

    GgufWriter writer;
    writer.set_zero_data(spec.zero_weights);
    const std::string a = spec.arch + ".";
    writer.set_string("general.architecture", spec.arch);
    writer.set_string("general.name", fmt::format("tessera-random-{}-{}x{}-{}", spec.arch, spec.n_layer, spec.n_embd,
                                                  quant_type_name(spec.type)));
    writer.set_u32("general.file_type", file_type);
    if (layout_of(spec.type).block_size > 1) writer.set_u32("general.quantization_version", 2);
    writer.set_u64("tessera.random_seed", spec.seed);
    writer.set_u32(a + "context_length", static_cast<uint32_t>(spec.n_ctx));
    writer.set_u32(a + "embedding_length", static_cast<uint32_t>(spec.n_embd));
    writer.set_u32(a + "block_count", static_cast<uint32_t>(spec.n_layer));
    writer.set_u32(a + "feed_forward_length", static_cast<uint32_t>(spec.n_ff));
    writer.set_u32(a + "attention.head_count", static_cast<uint32_t>(spec.n_head));
    writer.set_u32(a + "attention.head_count_kv", static_cast<uint32_t>(spec.n_head_kv));
    if (spec.head_dim > 0) {
        writer.set_u32(a + "attention.key_length", static_cast<uint32_t>(head_dim));
        writer.set_u32(a + "attention.value_length", static_cast<uint32_t>(head_dim));
    }
    writer.set_u32(a + "rope.dimension_count", static_cast<uint32_t>(head_dim));
    writer.set_f32(a + "rope.freq_base", spec.rope_freq_base);
    writer.set_f32(a + "attention.layer_norm_rms_epsilon", family->rope == RopeLayout::kAdjacent ? 1e-5f : 1e-6f);
    if (spec.sliding_window > 0) writer.set_u32(a + "attention.sliding_window", static_cast<uint32_t>(spec.sliding_window));
    if (spec.rope_scale_factor > 0.0f) {
        writer.set_string(a + "rope.scaling.type", "linear");
        writer.set_f32(a + "rope.scaling.factor", spec.rope_scale_factor);
    }
    if (spec.yarn_factor > 0.0f) {
        writer.set_string(a + "rope.scaling.type", "yarn");
        writer.set_f32(a + "rope.scaling.factor", spec.yarn_factor);
        writer.set_u32(a + "rope.scaling.original_context_length", static_cast<uint32_t>(spec.yarn_orig_ctx));
    }
    if (spec.rope_freq_base_swa > 0.0f) writer.set_f32(a + "rope.freq_base_swa", spec.rope_freq_base_swa);
    if (spec.n_expert > 0) {
        writer.set_u32(a + "expert_count", static_cast<uint32_t>(spec.n_expert));
        writer.set_u32(a + "expert_used_count", static_cast<uint32_t>(spec.n_expert_used));
        if (family->writes_experts) writer.set_u32(a + "expert_feed_forward_length", static_cast<uint32_t>(spec.n_ff));
    }
    if (family->reads_attn_soft_cap) writer.set_f32(a + "attn_logit_softcapping", family->default_attn_soft_cap);
    if (family->reads_final_soft_cap && family->default_final_soft_cap > 0.0f) {
        writer.set_f32(a + "final_logit_softcapping", family->default_final_soft_cap);
    }

    int64_t n_vocab = spec.n_vocab;
    if (!spec.vocab_from.empty()) {
        const GgufFile vocab_file(spec.vocab_from);
        const GgufValue* tokens = vocab_file.find_array("tokenizer.ggml.tokens", GgufValueType::String);
        if (tokens == nullptr) throw make_error("{}: has no tokenizer.ggml.tokens to copy", spec.vocab_from);
        n_vocab = static_cast<int64_t>(tokens->count);
        for (const auto& kv : vocab_file.metadata()) {
            if (kv.key.rfind("tokenizer.", 0) == 0) writer.set_value(kv.key, kv.value);
        }
    } else {
        set_synthetic_vocab(writer, spec.n_vocab);
    }

    const int64_t d = spec.n_embd;
    const int64_t q_dim = static_cast<int64_t>(head_dim) * spec.n_head;
    const int64_t kv_dim = static_cast<int64_t>(head_dim) * spec.n_head_kv;
    uint64_t tensor_seed = spec.seed * 0x100000001b3ull;
    auto add_matrix = [&](const std::string& name, int64_t cols, int64_t rows) {
        const uint64_t seed = ++tensor_seed;
        const float stddev = 1.0f / std::sqrt(static_cast<float>(cols));
        const QuantType type = spec.dense_type.value_or(spec.type);
        writer.add_tensor(name, type, {cols, rows},
                          [type, stddev, seed](uint8_t* dst, uint64_t n) { fill_random(type, stddev, seed, dst, n); });
    };
    // Norm weights (and biases) of n values: 1 (0), or near it with random_norms.
    auto add_vector = [&](const std::string& name, int64_t n, float center, float spread) {
        // (Constant vectors draw no seed, so files of the Llama preset keep their bytes.)
        const uint64_t seed = spec.random_norms ? ++tensor_seed : 0;
        const bool random = spec.random_norms;
        writer.add_tensor(name, QuantType::F32, {n}, [=](uint8_t* dst, uint64_t bytes) {
            float* f = reinterpret_cast<float*>(dst);
            Rng rng(seed);
            for (uint64_t i = 0; i < bytes / 4; ++i) f[i] = random ? center + spread * rng.next_normal() : center;
        });
    };
    auto add_norm = [&](const std::string& name, int64_t n) { add_vector(name, n, 1.0f, 0.1f); };
    add_matrix("token_embd.weight", d, n_vocab);
    if (spec.rope_freqs) {
        // Llama 3.1's factors: 1 for fast pairs, up to 8 for slow ones.
        writer.add_tensor("rope_freqs.weight", QuantType::F32, {head_dim / 2}, [head_dim](uint8_t* dst, uint64_t) {
            float* f = reinterpret_cast<float*>(dst);
            for (int32_t i = 0; i < head_dim / 2; ++i) f[i] = 1.0f + 7.0f * static_cast<float>(i) / (head_dim / 2);
        });
    }
    for (int32_t l = 0; l < spec.n_layer; ++l) {
        const std::string p = fmt::format("blk.{}.", l);
        add_norm(p + "attn_norm.weight", d);
        if (family->writes_fused) {
            add_matrix(p + "attn_qkv.weight", d, q_dim + 2 * kv_dim);
        } else {
            add_matrix(p + "attn_q.weight", d, q_dim);
            add_matrix(p + "attn_k.weight", d, kv_dim);
            add_matrix(p + "attn_v.weight", d, kv_dim);
        }
        if (family->writes_qkv_bias) {
            add_vector(p + "attn_q.bias", q_dim, 0.0f, 0.5f);
            add_vector(p + "attn_k.bias", kv_dim, 0.0f, 0.5f);
            add_vector(p + "attn_v.bias", kv_dim, 0.0f, 0.5f);
        }
        if (family->writes_qk_norm) {
            add_norm(p + "attn_q_norm.weight", head_dim);
            add_norm(p + "attn_k_norm.weight", head_dim);
        }
        add_matrix(p + "attn_output.weight", q_dim, d);
        if (family->writes_oai_extras) {
            add_vector(p + "attn_output.bias", d, 0.0f, 0.5f);
            add_vector(p + "attn_sinks.weight", spec.n_head, 0.0f, 1.0f);
        }
        if (family->writes_post_norms) add_norm(p + "post_attention_norm.weight", d);
        add_norm(p + std::string(family->ffn_norm) + ".weight", d);
        if (spec.n_expert > 0) {
            // The router stays F32 (llama-quantize never quantizes it); each
            // expert's matrices as a dense FFN's, stacked in a 3-D tensor.
            const int64_t ne = spec.n_expert, ff = spec.n_ff;
            const uint64_t router_seed = ++tensor_seed;
            const float router_stddev = 1.0f / std::sqrt(static_cast<float>(d));
            // Its values BF16 ones, as in the files convert_hf_to_gguf.py
            // writes from the BF16 checkpoints these families ship (it keeps
            // the router in F32).
            writer.add_tensor(p + "ffn_gate_inp.weight", QuantType::F32, {d, ne}, [=](uint8_t* dst, uint64_t n) {
                fill_random(QuantType::F32, router_stddev, router_seed, dst, n);
                for (uint64_t i = 0; i + 4 <= n; i += 4) {
                    uint32_t bits;
                    std::memcpy(&bits, dst + i, 4);
                    bits = (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;  // to nearest, ties to even
                    std::memcpy(dst + i, &bits, 4);
                }
            });
            const auto add_experts = [&](const std::string& name, int64_t cols, int64_t rows) {
                const uint64_t seed = ++tensor_seed;
                const float stddev = 1.0f / std::sqrt(static_cast<float>(cols));
                const QuantType type = spec.type;
                writer.add_tensor(name, type, {cols, rows, ne},
                                  [type, stddev, seed](uint8_t* dst, uint64_t n) { fill_random(type, stddev, seed, dst, n); });
            };
            add_experts(p + "ffn_gate_exps.weight", d, ff);
            add_experts(p + "ffn_up_exps.weight", d, ff);
            add_experts(p + "ffn_down_exps.weight", ff, d);
            if (family->writes_oai_extras) {
                // Biases of the router and of every expert's products, F32.
                add_vector(p + "ffn_gate_inp.bias", ne, 0.0f, 0.5f);
                const auto add_biases = [&](const std::string& name, int64_t n) {
                    const uint64_t seed = ++tensor_seed;
                    writer.add_tensor(name, QuantType::F32, {n, ne}, [seed](uint8_t* dst, uint64_t bytes) {
                        float* f = reinterpret_cast<float*>(dst);
                        Rng rng(seed);
                        for (uint64_t i = 0; i < bytes / 4; ++i) f[i] = 0.2f * rng.next_normal();
                    });
                };
                add_biases(p + "ffn_gate_exps.bias", ff);
                add_biases(p + "ffn_up_exps.bias", ff);
                add_biases(p + "ffn_down_exps.bias", d);
            }
            if (family->writes_post_norms) add_norm(p + "post_ffw_norm.weight", d);
            continue;
        }
        if (family->writes_fused) {
            add_matrix(p + "ffn_up.weight", d, 2 * static_cast<int64_t>(spec.n_ff));
        } else {
            add_matrix(p + "ffn_gate.weight", d, spec.n_ff);
            add_matrix(p + "ffn_up.weight", d, spec.n_ff);
        }
        add_matrix(p + "ffn_down.weight", spec.n_ff, d);
        if (family->writes_post_norms) add_norm(p + "post_ffw_norm.weight", d);
    }
    add_norm("output_norm.weight", d);
    if (!spec.tied_output) add_matrix("output.weight", d, n_vocab);
    writer.write(path, progress);
}

}  // namespace tessera
