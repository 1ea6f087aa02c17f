// The whole forward pass on the Vulkan device (lavapipe in CI) against the
// CPU's, bit for bit: generated models of every weight type the device runs
// and of the families it runs, and the bundled stories260K, over a prompt
// (rowwise in batches of at most 32, and as one batched prompt) and greedy
// steps after it, F16 and F32 caches. The CrossCpu protocol
// (tests/model/test_cross_cpu.cpp) with a GPU beside the CPU.
#include "gpu_model/vulkan_decoder.h"
#include "model/llama_model.h"
#include "model/local_decoder.h"
#include "model/random_model.h"
#include "test_paths.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace tessera {
namespace {

int device_index() {
    const char* v = std::getenv("TESSERA_VULKAN_DEVICE");
    return v != nullptr ? std::atoi(v) : 0;
}

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
std::string compare(const std::string& path, int n_batch, KvCacheTypes kv, int n_prompt = 40, int steps = 6,
                    int n_ctx = 96) {
    const LlamaModel model(path);
    ForwardConfig config;
    config.n_ctx = n_ctx;
    config.n_batch = n_batch;
    config.kv_types = kv;
    LocalDecoder cpu(model, config, 2);
    VulkanDecoder gpu(model, config, device_index());
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
    for (QuantType type :
         {QuantType::F32, QuantType::F16, QuantType::Q8_0, QuantType::Q4_0, QuantType::Q4_K, QuantType::Q6_K}) {
        const std::string path = dir + "/model-" + quant_type_name(type) + ".gguf";
        write_random_model(small_spec(type), path);
        // Batches of 16: every row attends rowwise; one batch of 40: as a prompt.
        EXPECT_EQ(compare(path, 16, QuantType::F16), "") << quant_type_name(type) << ", batches of 16";
        EXPECT_EQ(compare(path, 64, QuantType::F16), "") << quant_type_name(type) << ", one batch";
    }
}

TEST(VulkanForward, F32CachesGiveTheCpuLogits) {
    const std::string dir = test::scratch_dir("vulkan_forward_f32_cache");
    const std::string path = dir + "/model.gguf";
    write_random_model(small_spec(QuantType::Q8_0), path);
    EXPECT_EQ(compare(path, 64, QuantType::F32), "");
    EXPECT_EQ(compare(path, 8, KvCacheTypes(QuantType::F32, QuantType::F16)), "");
}

TEST(VulkanForward, FamiliesGiveTheCpuLogits) {
    const std::string dir = test::scratch_dir("vulkan_forward_families");
    // Biases (qwen2), Q/K norms (qwen3), RoPE frequency factors and a tied
    // head (llama3), a sliding window (mistral), fused Q/K/V and gate/up
    // with RoPE in halves (phi3).
    for (const std::string family : {"qwen2", "qwen3", "llama3", "mistral", "phi3"}) {
        RandomModelSpec spec = small_spec(QuantType::Q4_0);
        apply_model_preset(spec, family);
        spec.random_norms = true;
        const std::string path = dir + "/" + family + ".gguf";
        write_random_model(spec, path);
        EXPECT_EQ(compare(path, 16, QuantType::F16), "") << family << ", batches of 16";
        EXPECT_EQ(compare(path, 64, QuantType::F16), "") << family << ", one batch";
    }
}

TEST(VulkanForward, Stories260kGivesTheCpuLogits) {
    EXPECT_EQ(compare(test::stories260k(), 64, QuantType::F16, 60, 20), "");
    EXPECT_EQ(compare(test::stories260k(), 512, QuantType::F16, 5, 60, 512), "");
}

TEST(VulkanForward, WhatTheDeviceDoesNotRunIsRefusedByName) {
    const std::string dir = test::scratch_dir("vulkan_forward_refused");
    RandomModelSpec spec = small_spec(QuantType::Q4_0);
    apply_model_preset(spec, "gemma2");
    const std::string path = dir + "/gemma2.gguf";
    write_random_model(spec, path);
    const LlamaModel model(path);
    ForwardConfig config;
    config.n_ctx = 64;
    try {
        VulkanDecoder gpu(model, config, device_index());
        FAIL() << "a Gemma 2 model was taken";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("does not run"), std::string::npos) << e.what();
    }
    config.kv_types = QuantType::Q8_0;
    write_random_model(small_spec(QuantType::Q4_0), dir + "/llama.gguf");
    const LlamaModel llama(dir + "/llama.gguf");
    try {
        VulkanDecoder gpu(llama, config, device_index());
        FAIL() << "a Q8_0 cache was taken";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("Q8_0 KV caches"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace tessera
