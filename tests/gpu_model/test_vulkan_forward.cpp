// The whole forward pass on the Vulkan device (lavapipe in CI) against the
// CPU's, bit for bit: generated models of every weight type the device runs
// and of the families it runs, and the bundled stories260K, over a prompt
// (rowwise in batches of at most 32, and as one batched prompt) and greedy
// steps after it, F16 and F32 caches. The CrossCpu protocol
// (tests/model/test_cross_cpu.cpp) with a GPU beside the CPU.
#include "gpu/vulkan_context.h"
#include "gpu_model/vulkan_decoder.h"
#include "model/llama_model.h"
#include "model/local_decoder.h"
#include "model/random_model.h"
#include "test_paths.h"
#include "util/error.h"
#include "util/thread_pool.h"

#include "vulkan_test_device.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace tessera {
namespace {

// A prompt of n_prompt tokens, then `steps` greedy steps: every step's logits.
std::vector<float> logits_of(Decoder& decoder, int n_prompt, int steps) {
    const int n_vocab = decoder.hparams().n_vocab;
    std::vector<int32_t> prompt;
    for (int i = 0; i < n_prompt; ++i) prompt.push_back((i * 37 + 11) % n_vocab);
    std::vector<float> out;
    const float* logits = decoder.eval(prompt, 0);
    for (int s = 0; s < steps; ++s) {
        out.insert(out.end(), logits, logits + n_vocab);
        int32_t best = 0;
        for (int v = 1; v < n_vocab; ++v) {
            if (logits[v] > logits[best]) best = v;
        }
        logits = decoder.eval(std::span<const int32_t>(&best, 1), n_prompt + s);
    }
    return out;
}

// Where the device's logits first differ from the CPU's ("" when equal).
std::string compare(const std::string& path, int n_batch, KvCacheTypes kv, int n_prompt = 36, int steps = 4,
                    int n_ctx = 96, int gpu_layers = INT_MAX, const SparseOptions& sparse = SparseOptions()) {
    const LlamaModel model(path);
    ForwardConfig config;
    config.n_ctx = n_ctx;
    config.n_batch = n_batch;
    config.kv_types = kv;
    config.sparse = sparse;
    LocalDecoder cpu(model, config, 2);
    VulkanDecoder gpu(model, config, test::vulkan_device_index(), gpu_layers, 2);
    // What the device holds is what the check before uploading counted (less
    // the host's own row buffer).
    const SliceWeights views = load_slice_weights(model, full_slice(model.hparams()));
    const uint64_t counted = VulkanSliceForward::footprint(views, model.hparams(), reduction_units(model), config.n_batch,
                                                           config.n_ctx, kv, config.n_seq, false, sparse);
    const VulkanSliceForward* part = gpu.forward().device_part();
    if (gpu_layers >= model.hparams().n_layer &&
        (part == nullptr || part->device_bytes() > counted || part->device_bytes() + (1u << 20) < counted)) {
        return "holds " + std::to_string(part != nullptr ? part->device_bytes() : 0) + " bytes, counted " +
               std::to_string(counted);
    }
    const std::vector<float> want = logits_of(cpu, n_prompt, steps);
    const std::vector<float> got = logits_of(gpu, n_prompt, steps);
    if (got.size() != want.size()) return "sizes differ";
    const size_t n_vocab = static_cast<size_t>(model.hparams().n_vocab);
    for (size_t i = 0; i < got.size(); ++i) {
        if (std::memcmp(&got[i], &want[i], 4) != 0) {
            return "step " + std::to_string(i / n_vocab) + " logit " + std::to_string(i % n_vocab) + ": device " +
                   std::to_string(got[i]) + ", cpu " + std::to_string(want[i]);
        }
    }
    return "";
}

// Sparse attention that leaves dense early in a short prompt: a window of
// 8, blocks of 4, one global token, log-stride positions.
SparseOptions small_sparse(LandmarkMode landmarks) {
    SparseOptions o;
    o.enabled = true;
    o.window = 8;
    o.block = 4;
    o.globals = 1;
    o.log_stride = true;
    o.landmarks = landmarks;
    return o;
}

RandomModelSpec small_spec(QuantType type) {
    RandomModelSpec spec;
    spec.n_embd = 256;
    spec.n_layer = 2;
    spec.n_head = 4;
    spec.n_head_kv = 2;
    spec.n_ff = 512;
    spec.n_vocab = 300;
    spec.n_ctx = 128;
    spec.type = type;
    return spec;
}

TEST(VulkanForward, EveryWeightTypeGivesTheCpuLogits) {
    const std::string dir = test::scratch_dir("vulkan_forward_types");
    for (QuantType type : {QuantType::F32, QuantType::F16, QuantType::BF16, QuantType::Q8_0, QuantType::Q4_0,
                           QuantType::Q4_1, QuantType::Q5_0, QuantType::Q5_1, QuantType::IQ4_NL, QuantType::MXFP4,
                           QuantType::Q2_K, QuantType::Q3_K, QuantType::Q4_K, QuantType::Q5_K, QuantType::Q6_K,
                           QuantType::IQ4_XS, QuantType::IQ2_XXS, QuantType::IQ2_XS, QuantType::IQ2_S,
                           QuantType::IQ3_XXS, QuantType::IQ3_S}) {
        const std::string path = dir + "/model-" + quant_type_name(type) + ".gguf";
        write_random_model(small_spec(type), path);
        // Batches of 16 (every row attends rowwise) for half of the types,
        // one batch of 36 (as a prompt) for the others: lavapipe is slow.
        const bool rowwise = (static_cast<int>(type) % 2) == 0;
        EXPECT_EQ(compare(path, rowwise ? 16 : 64, QuantType::F16), "")
            << quant_type_name(type) << (rowwise ? ", batches of 16" : ", one batch");
    }
}

// A forward builds the kernels its model runs and no other (each is a
// shader compile, most of a small model's start on lavapipe): a Q4_K model
// builds Q4_K's product and the Q8_K quantizer, the head's product, and
// SwiGLU, not the other weight types', GELU's, gpt-oss's or the experts'.
TEST(VulkanForward, AForwardBuildsOnlyTheKernelsItsModelRuns) {
    const std::string dir = test::scratch_dir("vulkan_forward_built");
    const std::string path = dir + "/q4k.gguf";
    write_random_model(small_spec(QuantType::Q4_K), path);
    const LlamaModel model(path);
    ForwardConfig config;
    config.n_ctx = 64;
    config.n_batch = 8;
    VulkanDecoder gpu(model, config, test::vulkan_device_index(), INT_MAX, 1);
    const VulkanSliceForward* part = gpu.forward().device_part();
    ASSERT_NE(part, nullptr);
    EXPECT_TRUE(part->built_kernels().empty()) << "before the first forward";
    logits_of(gpu, 12, 2);  // a batch, then single tokens
    const std::vector<std::string> built = part->built_kernels();
    std::string listed;
    for (const std::string& name : built) listed += name + " ";
    const auto has = [&](const std::string& name) {
        return std::find(built.begin(), built.end(), name) != built.end();
    };
    for (const char* used : {"matvec_q4_k", "quantize_q8_k", "rms_norm", "rope", "swiglu", "kv_store", "attention"}) {
        EXPECT_TRUE(has(used)) << used << " not among: " << listed;
    }
    for (const char* unused :
         {"matvec_f16", "matvec_bf16", "matvec_q8_0", "matvec_q4_0", "matvec_q5_k", "matvec_iq2_xxs", "matvec_iq3_s",
          "geglu", "swiglu_oai", "add_expert_bias", "scale_rows", "landmarks"}) {
        EXPECT_FALSE(has(unused)) << unused << " among: " << listed;
    }
}

// --gpu-layers: the first layer on the device and the second on the CPU, or
// none on the device, give the same bits.
TEST(VulkanForward, LayersSplitBetweenTheDeviceAndTheCpuGiveTheCpuLogits) {
    const std::string dir = test::scratch_dir("vulkan_forward_split");
    for (QuantType type : {QuantType::Q4_K, QuantType::F16}) {
        const std::string path = dir + "/model-" + quant_type_name(type) + ".gguf";
        write_random_model(small_spec(type), path);
        EXPECT_EQ(compare(path, 64, QuantType::F16, 40, 6, 96, 1), "") << quant_type_name(type) << ", 1 layer";
        EXPECT_EQ(compare(path, 16, QuantType::F16, 40, 6, 96, 0), "") << quant_type_name(type) << ", none";
    }
}

// Every cache type (llama.cpp's -ctk/-ctv), keys and values, decoding
// rowwise and as a prompt: block keys score a decoding position with the
// query in Q8_0 and integer block sums (the CPU's canonical row order), a
// prompt over their decoded elements.
TEST(VulkanForward, EveryCacheTypeGivesTheCpuLogits) {
    const std::string dir = test::scratch_dir("vulkan_forward_caches");
    const std::string path = dir + "/model.gguf";
    write_random_model(small_spec(QuantType::Q8_0), path);
    for (const KvCacheTypes kv : {KvCacheTypes(QuantType::F32), KvCacheTypes(QuantType::F32, QuantType::F16),
                                  KvCacheTypes(QuantType::F16, QuantType::Q8_0),
                                  KvCacheTypes(QuantType::F16, QuantType::Q4_0),
                                  KvCacheTypes(QuantType::F32, QuantType::Q8_0), KvCacheTypes(QuantType::Q8_0),
                                  KvCacheTypes(QuantType::Q4_0), KvCacheTypes(QuantType::Q8_0, QuantType::F16),
                                  KvCacheTypes(QuantType::Q4_0, QuantType::F32)}) {
        const std::string name = std::string(quant_type_name(kv.k)) + "/" + quant_type_name(kv.v);
        EXPECT_EQ(compare(path, 64, kv), "") << name << ", one batch";
        if (kv.v != QuantType::F16 || kv.k != QuantType::F16) {
            EXPECT_EQ(compare(path, 8, kv), "") << name << ", batches of 8";
        }
    }
}

// Sparse attention (window, global and log-stride positions, landmark
// blocks in each mode): a prompt (one run past dense attends position by
// position, as on the CPU), batches of 8, then decoding, over float and
// block caches; gpt-oss's sinks and alternating sliding windows beside it.
TEST(VulkanForward, SparseAttentionGivesTheCpuLogits) {
    const std::string dir = test::scratch_dir("vulkan_forward_sparse");
    const std::string path = dir + "/model.gguf";
    write_random_model(small_spec(QuantType::Q4_0), path);
    for (const LandmarkMode mode : {LandmarkMode::kAll, LandmarkMode::kLog, LandmarkMode::kOff}) {
        for (const KvCacheTypes kv : {KvCacheTypes(QuantType::F16), KvCacheTypes(QuantType::Q8_0),
                                      KvCacheTypes(QuantType::F32, QuantType::Q4_0)}) {
            const std::string name = std::string(landmark_mode_name(mode)) + ", " + quant_type_name(kv.k) + "/" +
                                     quant_type_name(kv.v);
            EXPECT_EQ(compare(path, 64, kv, 44, 6, 96, INT_MAX, small_sparse(mode)), "") << name << ", one batch";
            EXPECT_EQ(compare(path, 8, kv, 44, 6, 96, INT_MAX, small_sparse(mode)), "") << name << ", batches of 8";
        }
    }
    RandomModelSpec spec = small_spec(QuantType::MXFP4);
    apply_model_preset(spec, "gpt-oss");
    const std::string gpt_oss = dir + "/gpt-oss.gguf";
    write_random_model(spec, gpt_oss);
    EXPECT_EQ(compare(gpt_oss, 64, KvCacheTypes(), 44, 6, 96, INT_MAX, small_sparse(LandmarkMode::kAll)), "")
        << "gpt-oss";
}

TEST(VulkanForward, FamiliesGiveTheCpuLogits) {
    const std::string dir = test::scratch_dir("vulkan_forward_families");
    // Biases (qwen2), Q/K norms (qwen3), RoPE frequency factors and a tied
    // head (llama3), a sliding window (mistral), fused Q/K/V and gate/up
    // with RoPE in halves (phi3), GELU, post-norms, soft caps, scaled
    // embeddings and alternating windows with their own RoPE (gemma2, gemma3).
    for (const std::string family : {"qwen2", "qwen3", "llama3", "mistral", "phi3", "gemma2", "gemma3"}) {
        RandomModelSpec spec = small_spec(QuantType::Q4_0);
        apply_model_preset(spec, family);
        spec.random_norms = true;
        const std::string path = dir + "/" + family + ".gguf";
        write_random_model(spec, path);
        // Rowwise for the families with windows (their masks), batched for the others.
        const bool rowwise = family == "mistral" || family == "gemma2" || family == "gemma3";
        EXPECT_EQ(compare(path, rowwise ? 16 : 64, QuantType::F16), "") << family;
        if (family == "gemma3") {
            EXPECT_EQ(compare(path, 64, QuantType::F16), "") << family << ", one batch";
        }
    }
}

// Mixtures of experts (whole layers): the router read back, the experts
// chosen on the host as the CPU chooses them, their products on the device.
TEST(VulkanForward, MixturesOfExpertsGiveTheCpuLogits) {
    const std::string dir = test::scratch_dir("vulkan_forward_moe");
    // gpt-oss: attention sinks, its clamped SwiGLU, biased router and
    // experts, wo's bias, alternating windows, YaRN, MXFP4 experts.
    for (const std::string family : {"qwen3moe", "mixtral", "gpt-oss"}) {
        for (QuantType type : {family == "gpt-oss" ? QuantType::MXFP4 : QuantType::Q4_0, QuantType::Q4_K}) {
            RandomModelSpec spec = small_spec(type);
            apply_model_preset(spec, family);
            const std::string path = dir + "/" + family + "-" + quant_type_name(type) + ".gguf";
            write_random_model(spec, path);
            const bool rowwise = type == QuantType::Q4_K;
            EXPECT_EQ(compare(path, rowwise ? 16 : 64, QuantType::F16), "")
                << family << " " << quant_type_name(type) << (rowwise ? ", batches of 16" : ", one batch");
        }
    }
}

// Random models of these families and weight types, each against the CPU's
// logits with TESSERA_VULKAN_PRODUCTS set to `layout`.
void expect_families_in_layout(const std::string& dir, const char* layout,
                               const std::vector<std::pair<std::string, QuantType>>& models) {
    setenv("TESSERA_VULKAN_PRODUCTS", layout, 1);
    for (const auto& [family, type] : models) {
        RandomModelSpec spec = small_spec(type);
        apply_model_preset(spec, family);
        const std::string path = dir + "/" + family + ".gguf";
        write_random_model(spec, path);
        EXPECT_EQ(compare(path, 64, QuantType::F16, 20, 3), "") << family << " " << quant_type_name(type);
    }
    unsetenv("TESSERA_VULKAN_PRODUCTS");
}

// GPUs run the products a workgroup per row (lavapipe, a CPU, an invocation
// per dot): that layout too, through whole models with units and experts.
TEST(VulkanForward, TheGpusLayoutOfProductsGivesTheCpuLogits) {
    expect_families_in_layout(test::scratch_dir("vulkan_forward_rows"), "rows",
                              {{"llama", QuantType::Q4_K}, {"qwen3", QuantType::F16}, {"qwen3moe", QuantType::Q4_0},
                               {"mistral", QuantType::IQ3_S}});
}

// One token's Q8_0, Q4_0, Q4_K and Q6_K products by a subgroup per row (GPUs whose
// subgroups pass the probe; lavapipe when asked): the CPU's logits through
// whole models, the units of wo and w_down and a mixture of experts too.
TEST(VulkanForward, OneTokenProductsBySubgroupsGiveTheCpuLogits) {
    {
        VulkanContext context(test::vulkan_device_index());
        if (!context.subgroup_mismatch().empty()) GTEST_SKIP() << context.info().name << ": " << context.subgroup_mismatch();
    }
    expect_families_in_layout(test::scratch_dir("vulkan_forward_subgroups"), "subgroups",
                              {{"llama", QuantType::Q4_K}, {"qwen3", QuantType::Q8_0}, {"mistral", QuantType::Q4_0},
                               {"qwen3moe", QuantType::Q4_K}, {"phi3", QuantType::Q6_K}});
}

// Block products in tiles of dots and tokens (GPUs' prompts; every block
// product when asked, one token's and the experts' too): the CPU's logits
// through whole models, with units, experts, K-, I- and legacy quants, on
// prompts in one batch of 64 (a tile's tokens split at its edges).
TEST(VulkanForward, ProductsInTilesGiveTheCpuLogits) {
    expect_families_in_layout(test::scratch_dir("vulkan_forward_tiles"), "tiles",
                              {{"llama", QuantType::Q4_K}, {"qwen3", QuantType::Q8_0}, {"mistral", QuantType::Q4_0},
                               {"qwen3moe", QuantType::Q6_K}, {"llama", QuantType::IQ3_S}, {"gemma2", QuantType::Q5_1}});
    // Another tile shape (TESSERA_VULKAN_TILE): tiles of 3 dots by 5 tokens
    // split rows, units and the 64-token prompt unevenly.
    setenv("TESSERA_VULKAN_TILE", "3x5", 1);
    expect_families_in_layout(test::scratch_dir("vulkan_forward_tiles_3x5"), "tiles",
                              {{"llama", QuantType::Q4_K}, {"qwen3moe", QuantType::Q8_0}});
    unsetenv("TESSERA_VULKAN_TILE");
}

// The block products' integer sums by packed dot instructions (the
// default where the device has them, as lavapipe does) and byte by byte
// (TESSERA_VULKAN_DOT=plain, for devices without them) are the same exact
// sums: the CPU's logits, in both layouts of the products, on a prompt in
// batches and in one, and through a mixture of experts.
TEST(VulkanForward, PackedAndPlainIntegerSumsGiveTheCpuLogits) {
    {
        VulkanContext context(test::vulkan_device_index());
        if (!context.info().integer_dot) GTEST_SKIP() << context.info().name << " has no integer dot products";
    }
    const std::string dir = test::scratch_dir("vulkan_forward_idot");
    {
        // Packed by default, plain when asked.
        const std::string stories = test::stories260k();
        const LlamaModel model(stories);
        ForwardConfig config;
        config.n_ctx = 32;
        VulkanDecoder gpu(model, config, test::vulkan_device_index(), INT_MAX, 2);
        ASSERT_NE(gpu.forward().device_part(), nullptr);
        EXPECT_TRUE(gpu.forward().device_part()->packed_dots());
        setenv("TESSERA_VULKAN_DOT", "plain", 1);
        VulkanDecoder plain(model, config, test::vulkan_device_index(), INT_MAX, 2);
        EXPECT_FALSE(plain.forward().device_part()->packed_dots());
    }
    // Plain in both layouts, packed in the GPUs' (the other tests run packed
    // sums an invocation per dot).
    for (const auto& [dot, layout] : std::vector<std::pair<const char*, const char*>>{
             {"plain", "dots"}, {"plain", "rows"}, {"packed", "rows"}}) {
        setenv("TESSERA_VULKAN_DOT", dot, 1);
        setenv("TESSERA_VULKAN_PRODUCTS", layout, 1);
        for (const auto& [family, type] : std::vector<std::pair<std::string, QuantType>>{
                 {"llama", QuantType::Q8_0}, {"llama", QuantType::Q4_0}, {"llama", QuantType::Q4_K},
                 {"llama", QuantType::Q6_K}, {"qwen3moe", QuantType::Q4_K}, {"llama", QuantType::Q4_1},
                 {"llama", QuantType::Q5_0}, {"llama", QuantType::Q5_1}, {"llama", QuantType::IQ4_NL},
                 {"llama", QuantType::MXFP4}, {"llama", QuantType::Q2_K}, {"llama", QuantType::Q3_K},
                 {"llama", QuantType::Q5_K}, {"llama", QuantType::IQ4_XS}, {"llama", QuantType::IQ2_XXS},
                 {"llama", QuantType::IQ2_XS}, {"llama", QuantType::IQ2_S}, {"llama", QuantType::IQ3_XXS},
                 {"llama", QuantType::IQ3_S}}) {
            // The types whose codes are packed one by one (block32_types.glsl,
            // kquant_types.glsl, iq_grid_types.glsl): their plain sums an invocation per dot
            // (EveryWeightTypeGivesTheCpuLogits runs them packed).
            const bool by_code = type != QuantType::Q8_0 && type != QuantType::Q4_0 && type != QuantType::Q4_K &&
                                 type != QuantType::Q6_K;
            if (by_code && std::string(dot) == "packed") continue;
            RandomModelSpec spec = small_spec(type);
            apply_model_preset(spec, family);
            if (by_code && std::string(layout) == "rows") continue;
            const std::string path = dir + "/" + family + "-" + quant_type_name(type) + ".gguf";
            if (std::string(dot) == "plain" && std::string(layout) == "dots") write_random_model(spec, path);
            const bool rowwise = type == QuantType::Q4_0 || type == QuantType::Q6_K || type == QuantType::Q5_0 ||
                                 type == QuantType::Q3_K;
            EXPECT_EQ(compare(path, rowwise ? 16 : 64, QuantType::F16, 20, 3), "")
                << family << " " << quant_type_name(type) << ", " << dot << ", " << layout
                << (rowwise ? ", batches of 16" : "");
        }
    }
    unsetenv("TESSERA_VULKAN_PRODUCTS");
    unsetenv("TESSERA_VULKAN_DOT");
}

// TESSERA_VULKAN_DOT and TESSERA_VULKAN_SUBGROUPS: a wrong value, or a
// path the device cannot run, is an Error naming it, before any upload.
TEST(VulkanForward, WrongProductVariantsAreRefusedByName) {
    const LlamaModel model(test::stories260k());
    ForwardConfig config;
    config.n_ctx = 32;
    const auto error_of = [&] {
        try {
            VulkanDecoder gpu(model, config, test::vulkan_device_index(), INT_MAX, 2);
        } catch (const Error& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    setenv("TESSERA_VULKAN_DOT", "fast", 1);
    EXPECT_NE(error_of().find("TESSERA_VULKAN_DOT=fast: packed (the integer dot instructions) or plain"),
              std::string::npos);
    unsetenv("TESSERA_VULKAN_DOT");
    setenv("TESSERA_VULKAN_PRODUCTS", "rows", 1);  // the layout the trees serve
    setenv("TESSERA_VULKAN_SUBGROUPS", "maybe", 1);
    EXPECT_NE(error_of().find("TESSERA_VULKAN_SUBGROUPS=maybe: on (shuffles) or off"), std::string::npos);
    VulkanContext context(test::vulkan_device_index());
    const VulkanDeviceInfo& info = context.info();
    setenv("TESSERA_VULKAN_SUBGROUPS", "on", 1);
    if (!info.subgroup_shuffle || info.subgroup_size < 16 || 64 % info.subgroup_size != 0) {  // lavapipe at 256 bits
        EXPECT_NE(error_of().find("has subgroups of " + std::to_string(info.subgroup_size)), std::string::npos)
            << error_of();
    } else {
        EXPECT_EQ(error_of(), "no error");
    }
    unsetenv("TESSERA_VULKAN_SUBGROUPS");
    unsetenv("TESSERA_VULKAN_PRODUCTS");
    if (!info.integer_dot) {
        setenv("TESSERA_VULKAN_DOT", "packed", 1);
        EXPECT_NE(error_of().find("has no integer dot products"), std::string::npos) << error_of();
        unsetenv("TESSERA_VULKAN_DOT");
    }
}

// Several sequences in one batch (serve --parallel's continuous batching):
// prompts beside decoding sequences, each run attending to its own cache,
// a run longer than 32 rows as a prompt, give the CPU's rows bit for bit.
TEST(VulkanForward, SequencesBatchedTogetherGiveTheCpuLogits) {
    const std::string dir = test::scratch_dir("vulkan_forward_sequences");
    const std::string path = dir + "/model.gguf";
    write_random_model(small_spec(QuantType::Q4_K), path);
    const LlamaModel model(path);
    ForwardConfig config;
    config.n_ctx = 96;
    config.n_batch = 64;
    config.n_seq = 3;
    LocalDecoder cpu(model, config, 2);
    VulkanDecoder gpu(model, config, test::vulkan_device_index(), INT_MAX, 2);
    ASSERT_EQ(gpu.n_seq(), 3);
    const int n_vocab = model.hparams().n_vocab;
    std::vector<int32_t> tokens;
    for (int i = 0; i < 120; ++i) tokens.push_back((i * 53 + 7) % n_vocab);
    const auto span = [&](int first, int n) { return std::span<const int32_t>(tokens.data() + first, static_cast<size_t>(n)); };
    // Step by step: (sequence, position, tokens) per eval.
    const std::vector<std::vector<SeqEval>> steps = {
        {{0, 0, span(0, 40), false}, {1, 0, span(40, 5), false}},
        {{2, 0, span(50, 12), true}, {0, 40, span(90, 1), false}, {1, 5, span(91, 1), false}},
        {{0, 41, span(92, 1), false}, {1, 6, span(93, 3), true}, {2, 12, span(96, 1), false}},
        {{2, 13, span(100, 20), false}, {0, 42, span(97, 1), false}}};
    for (size_t i = 0; i < steps.size(); ++i) {
        size_t rows = 0;
        for (const SeqEval& e : steps[i]) rows += e.all ? e.tokens.size() : 1;
        const float* want = cpu.eval_seqs(steps[i]);
        const std::vector<float> w(want, want + rows * static_cast<size_t>(n_vocab));
        const float* got = gpu.eval_seqs(steps[i]);
        EXPECT_EQ(std::memcmp(w.data(), got, w.size() * 4), 0) << "step " << i;
    }
}

// A context shift and an eviction (Decoder::compact_context): the kept keys
// re-rotated to their new positions as the CPU rotates them; the logits after
// it equal the CPU's.
// (With sparse attention the moved blocks' landmarks are recomputed.)
TEST(VulkanForward, CompactedContextsGiveTheCpuLogits) {
    const std::string dir = test::scratch_dir("vulkan_forward_compact");
    const std::string path = dir + "/model.gguf";
    write_random_model(small_spec(QuantType::Q8_0), path);
    for (const auto& [kv, sparse] : {std::pair{KvCacheTypes(QuantType::F16), SparseOptions()},
                                     std::pair{KvCacheTypes(QuantType::F32, QuantType::Q8_0), SparseOptions()},
                                     std::pair{KvCacheTypes(QuantType::F16), small_sparse(LandmarkMode::kAll)}}) {
        const LlamaModel model(path);
        ForwardConfig config;
        config.n_ctx = 64;
        config.n_batch = 64;
        config.kv_types = kv;
        config.sparse = sparse;
        LocalDecoder cpu(model, config, 2);
        VulkanDecoder gpu(model, config, test::vulkan_device_index(), INT_MAX, 2);
        const int n_vocab = model.hparams().n_vocab;
        std::vector<int32_t> tokens;
        for (int i = 0; i < 60; ++i) tokens.push_back((i * 29 + 3) % n_vocab);
        const std::span<const int32_t> all(tokens);
        cpu.eval(all.subspan(0, 40), 0);
        gpu.eval(all.subspan(0, 40), 0);
        cpu.shift_context(0, 4, 16, 40);  // keep 4, drop 16: 24 left
        gpu.shift_context(0, 4, 16, 40);
        std::vector<int> kept;  // then an eviction of every third
        for (int p = 0; p < 24; ++p) {
            if (p % 3 != 1) kept.push_back(p);
        }
        cpu.compact_context(0, kept, 24);
        gpu.compact_context(0, kept, 24);
        const int pos = static_cast<int>(kept.size());
        const float* want = cpu.eval(all.subspan(40, 6), pos);
        const std::vector<float> w(want, want + n_vocab);
        const float* got = gpu.eval(all.subspan(40, 6), pos);
        EXPECT_EQ(std::memcmp(w.data(), got, w.size() * 4), 0)
            << quant_type_name(kv.k) << "/" << quant_type_name(kv.v) << ", " << describe(sparse);
    }
}

// Heavy-hitter eviction's ranking (--context-full evict): the attention
// each position received, summed over layers and heads in fixed point, is
// the CPU's integer for integer, through a compaction too.
// (Sparse attention's landmarks spread their weight over their blocks.)
TEST(VulkanForward, TrackedAttentionEqualsTheCpus) {
    const std::string path = test::scratch_dir("vulkan_forward_mass") + "/model.gguf";
    write_random_model(small_spec(QuantType::Q4_0), path);
    const LlamaModel model(path);
    for (const SparseOptions& sparse : {SparseOptions(), small_sparse(LandmarkMode::kAll)}) {
        ForwardConfig config;
        config.n_ctx = 64;
        config.n_batch = 64;
        config.track_attention = true;
        config.sparse = sparse;
        LocalDecoder cpu(model, config, 2);
        VulkanDecoder gpu(model, config, test::vulkan_device_index(), INT_MAX, 2);
        std::vector<int32_t> tokens;
        for (int i = 0; i < 50; ++i) tokens.push_back((i * 31 + 5) % model.hparams().n_vocab);
        const std::span<const int32_t> all(tokens);
        const auto masses = [&](Decoder& d, int n) {
            std::vector<int64_t> m(static_cast<size_t>(n), 0);
            d.add_attention_mass(0, n, m.data());
            return m;
        };
        for (Decoder* d : {static_cast<Decoder*>(&cpu), static_cast<Decoder*>(&gpu)}) {
            d->eval(all.subspan(0, 40), 0);  // as a prompt
            for (int p = 40; p < 44; ++p) d->eval(all.subspan(static_cast<size_t>(p), 1), p);  // then rowwise
        }
        EXPECT_EQ(masses(cpu, 44), masses(gpu, 44)) << describe(sparse);
        std::vector<int> kept;
        for (int p = 0; p < 44; p += 2) kept.push_back(p);
        cpu.compact_context(0, kept, 44);
        gpu.compact_context(0, kept, 44);
        EXPECT_EQ(masses(cpu, 22), masses(gpu, 22)) << describe(sparse);
    }
}

TEST(VulkanForward, Stories260kGivesTheCpuLogits) {
    EXPECT_EQ(compare(test::stories260k(), 64, QuantType::F16, 60, 20), "");
    EXPECT_EQ(compare(test::stories260k(), 512, QuantType::F16, 5, 60, 512), "");
}

// A tensor-parallel rank's share on the device: its exact partials (doubles)
// and its rows of the head equal a CPU rank's with the same share, for a
// prompt run as a batch and a position decoding after it.
TEST(VulkanForward, ATensorParallelShareGivesTheCpuPartials) {
    const std::string dir = test::scratch_dir("vulkan_forward_share");
    for (QuantType type : {QuantType::Q4_0, QuantType::Q8_0, QuantType::F16}) {
        const std::string path = dir + "/model-" + quant_type_name(type) + ".gguf";
        write_random_model(small_spec(type), path);
        const LlamaModel model(path);
        const ModelHParams& hp = model.hparams();
        Slice share = full_slice(hp);
        share.kv_head_begin = 1;  // the second of two KV heads
        share.ffn_begin = 256;    // the second half of the channels
        share.vocab_begin = 100;
        share.vocab_end = 200;
        share.embeds = false;
        share.outputs = false;
        ForwardConfig config;
        config.n_ctx = 96;
        config.n_batch = 64;
        ThreadPool pool(2);
        SliceForward cpu(model, share, config, pool);
        VulkanSliceForward gpu(model, share, config, test::vulkan_device_index());
        const size_t n_embd = static_cast<size_t>(hp.n_embd);
        std::vector<float> x(40 * n_embd);
        for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i)) * 0.8f;
        for (const SeqRun run : {SeqRun{0, 0, 40}, SeqRun{0, 40, 1}}) {
            const size_t n = static_cast<size_t>(run.n_tok) * n_embd;
            std::vector<double> want(n), got(n);
            for (int layer = 0; layer < hp.n_layer; ++layer) {
                cpu.attention_partial_of(layer, x.data(), std::span<const SeqRun>(&run, 1), want.data());
                gpu.attention_partial_of(layer, x.data(), std::span<const SeqRun>(&run, 1), got.data());
                EXPECT_EQ(std::memcmp(want.data(), got.data(), n * 8), 0)
                    << quant_type_name(type) << " attention, layer " << layer << ", " << run.n_tok << " rows";
                cpu.ffn_partial_of(layer, x.data(), run.n_tok, want.data());
                gpu.ffn_partial_of(layer, x.data(), run.n_tok, got.data());
                EXPECT_EQ(std::memcmp(want.data(), got.data(), n * 8), 0)
                    << quant_type_name(type) << " FFN, layer " << layer << ", " << run.n_tok << " rows";
            }
        }
        std::vector<float> want(3 * 100), got(3 * 100);
        cpu.head_rows(x.data(), 3, want.data(), 100);
        gpu.head_rows(x.data(), 3, got.data(), 100);
        EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size() * 4), 0) << quant_type_name(type) << " head rows";
    }
}

// A tensor-parallel rank's share of a mixture of experts, split by channels
// (a share of every expert) and by experts (whole ones): its FFN partials
// equal a CPU rank's with the same share.
TEST(VulkanForward, AShareOfExpertsGivesTheCpuPartials) {
    const std::string dir = test::scratch_dir("vulkan_forward_expert_share");
    for (const std::string family : {"qwen3moe", "gpt-oss"}) {
        RandomModelSpec spec = small_spec(QuantType::Q8_0);
        apply_model_preset(spec, family);
        const std::string path = dir + "/" + family + ".gguf";
        write_random_model(spec, path);
        const LlamaModel model(path);
        const ModelHParams& hp = model.hparams();
        Slice by_channels = full_slice(hp), by_experts = full_slice(hp);
        by_channels.ffn_begin = hp.n_ff / 2;  // the second half of every expert's channels
        by_experts.expert_begin = 1;          // experts [1, n - 1), every channel
        by_experts.expert_end = hp.n_expert - 1;
        for (Slice share : {by_channels, by_experts}) {
            share.embeds = false;
            share.outputs = false;
            share.vocab_end = 0;
            ForwardConfig config;
            config.n_ctx = 64;
            config.n_batch = 64;
            ThreadPool pool(2);
            SliceForward cpu(model, share, config, pool);
            VulkanSliceForward gpu(model, share, config, test::vulkan_device_index());
            const size_t n_embd = static_cast<size_t>(hp.n_embd);
            std::vector<float> x(20 * n_embd);
            for (size_t i = 0; i < x.size(); ++i) x[i] = std::cos(0.21f * static_cast<float>(i)) * 0.9f;
            for (const int n_tok : {20, 1}) {
                std::vector<double> want(static_cast<size_t>(n_tok) * n_embd), got(want.size());
                for (int layer = 0; layer < hp.n_layer; ++layer) {
                    cpu.ffn_partial_of(layer, x.data(), n_tok, want.data());
                    gpu.ffn_partial_of(layer, x.data(), n_tok, got.data());
                    EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size() * 8), 0)
                        << family << " " << describe_slice(share) << ", layer " << layer << ", " << n_tok << " rows";
                }
            }
        }
        // The mixed split (two parts, or some channels of some experts) and
        // the balanced one (a part dealt per token): refused by name, so a
        // plan gives such a rank another split.
        Slice mixed = full_slice(hp);
        mixed.embeds = mixed.outputs = false;
        mixed.vocab_end = 0;
        mixed.expert_end = hp.n_expert / 2;
        mixed.ffn_end = hp.n_ff / 2;
        ForwardConfig config;
        config.n_ctx = 64;
        const auto expect_refused = [&](const Slice& s) {
            try {
                VulkanSliceForward gpu(model, s, config, test::vulkan_device_index());
                FAIL() << family << ": " << describe_slice(s) << " was taken";
            } catch (const Error& e) {
                EXPECT_NE(std::string(e.what()).find("the mixed or balanced split of a mixture of experts"),
                          std::string::npos)
                    << e.what();
            }
        };
        expect_refused(mixed);
        mixed.tails.push_back({hp.n_expert / 2, hp.n_expert, 0, hp.n_ff / 2});
        expect_refused(mixed);
        Slice balanced = full_slice(hp);
        balanced.embeds = balanced.outputs = false;
        balanced.vocab_end = 0;
        balanced.ffn_end = hp.n_ff / 2;
        balanced.tails.push_back({0, hp.n_expert, hp.n_ff / 2, hp.n_ff, 2, 1});
        expect_refused(balanced);
    }
}

// A model larger than the device's memory (lavapipe offers 2 GiB): refused
// before anything is uploaded, naming the device and the bytes. The file is
// sparse (zero weights), so it costs no disk.
TEST(VulkanForward, AModelLargerThanTheDeviceIsAClearError) {
    const VulkanContext context(test::vulkan_device_index());
    const uint64_t heap = context.info().device_local_bytes;
    RandomModelSpec spec;
    spec.n_embd = 4096;
    spec.n_head = 32;
    spec.n_head_kv = 8;
    spec.n_ff = 14336;
    spec.n_vocab = 32000;
    spec.type = QuantType::Q4_0;
    spec.zero_weights = true;
    const uint64_t layer_bytes = (2ull * 4096 * 4096 + 2ull * 4096 * 1024 + 3ull * 4096 * 14336) / 32 * 18;
    if (heap / layer_bytes + 2 > 64) GTEST_SKIP() << "a device of " << heap << " bytes";
    spec.n_layer = static_cast<int32_t>(heap / layer_bytes + 2);
    const std::string path = test::scratch_dir("vulkan_forward_too_large") + "/large.gguf";
    write_random_model(spec, path);
    const LlamaModel model(path);
    ForwardConfig config;
    config.n_ctx = 256;
    try {
        VulkanDecoder gpu(model, config, test::vulkan_device_index());
        FAIL() << "a model of " << spec.n_layer << " layers was taken by a device of " << heap << " bytes";
    } catch (const Error& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("MiB of device memory"), std::string::npos) << what;
        EXPECT_NE(what.find(context.info().name), std::string::npos) << what;
        EXPECT_NE(what.find(std::to_string(heap) + " bytes"), std::string::npos) << what;
    }
}

TEST(VulkanForward, WhatTheDeviceDoesNotRunIsRefusedByName) {
    const std::string dir = test::scratch_dir("vulkan_forward_refused");
    RandomModelSpec spec = small_spec(QuantType::Q4_0);
    ForwardConfig config;
    config.n_ctx = 64;
    // A block cache's row is quantized by one invocation, in a buffer of
    // 256 values.
    spec.n_embd = 512;
    spec.n_head = 1;
    spec.n_head_kv = 1;
    const std::string wide = dir + "/wide.gguf";
    write_random_model(spec, wide);
    const LlamaModel wide_model(wide);
    config.kv_types = KvCacheTypes(QuantType::Q4_0, QuantType::F16);
    try {
        VulkanDecoder gpu(wide_model, config, test::vulkan_device_index());
        FAIL() << "Q4_0 keys of 512-wide heads were taken";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("KV caches of heads wider than 256"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace tessera
