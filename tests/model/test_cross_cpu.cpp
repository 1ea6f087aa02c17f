// The same bits on every CPU (issue 25): a generated model of each weight
// type, run over a prompt (in batches) and then greedily, gives the same
// logits byte for byte on every SIMD target this build runs on this CPU
// (AVX-512 VNNI, AVX-512, AVX2, SSE4, SSSE3, the portable fallback on x86;
// NEON on ARM). The exact distributed modes rest on it: a node's partials
// must not depend on its CPU kind.
//
// With TESSERA_LOGITS_DIGEST=FILE the test also writes one line per type,
// "TYPE DIGEST" (FNV-1a over the logits' bytes), so that scripts/test --arm64
// can compare an ARM build's bits with this machine's.
#include "model/llama_model.h"
#include "model/local_decoder.h"
#include "model/random_model.h"
#include "ops/int8_dot_extension.h"
#include "ops/dot_kernels.h"
#include "test_paths.h"

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace tessera {

namespace {

// A 40-token prompt in batches of 16, then 8 greedy steps: every step's logits.
std::vector<float> logits_of(const std::string& path, KvCacheTypes kv_types = KvCacheTypes()) {
    const LlamaModel model(path);
    const int n_vocab = model.hparams().n_vocab;
    ForwardConfig config;
    config.kv_types = kv_types;
    config.n_ctx = 64;
    config.n_batch = 16;
    LocalDecoder decoder(model, config, 2);
    std::vector<int32_t> prompt;
    for (int i = 0; i < 40; ++i) prompt.push_back((i * 37 + 11) % n_vocab);
    std::vector<float> out;
    const float* logits = decoder.eval(prompt, 0);
    for (int s = 0; s < 8; ++s) {
        out.insert(out.end(), logits, logits + n_vocab);
        int32_t best = 0;
        for (int v = 1; v < n_vocab; ++v) {
            if (logits[v] > logits[best]) best = v;
        }
        logits = decoder.eval(std::span<const int32_t>(&best, 1), static_cast<int>(prompt.size()) + s);
    }
    return out;
}

uint64_t fnv1a(const std::vector<float>& v) {
    uint64_t h = 1469598103934665603ull;
    const auto* p = reinterpret_cast<const uint8_t*>(v.data());
    for (size_t i = 0; i < v.size() * sizeof(float); ++i) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

// A generated model of that type, as the two tests below use it.
std::string write_model(const std::string& dir, QuantType type) {
    RandomModelSpec spec;
    spec.n_embd = 256;
    spec.n_layer = 2;
    spec.n_head = 4;
    spec.n_head_kv = 2;
    spec.n_ff = 512;
    spec.n_vocab = 300;
    spec.type = type;
    const std::string path = dir + "/model-" + quant_type_name(type) + ".gguf";
    write_random_model(spec, path);
    return path;
}

// The model's logits (with these caches) on every target this build runs on
// this CPU, AVX2 and NEON also with their int8 dot extension where the CPU
// has it (ops/int8_dot_extension.h): each must equal the first's. Returns
// the first's logits' digest.
uint64_t expect_every_target_agrees(const std::string& path, KvCacheTypes kv, const std::string& label) {
    const std::vector<int64_t> targets = simd_block_targets();
    EXPECT_FALSE(targets.empty());
    std::vector<float> want;
    std::string first;
    for (int64_t target : targets) {
        for (const bool with_dot : {true, false}) {
            if (with_dot && !((target == HWY_AVX2 || target == HWY_NEON) && int8_dot_extension_supported())) continue;
            hwy::SetSupportedTargetsForTest(target);
            allow_int8_dot_extension(with_dot);
            const std::vector<float> got = logits_of(path, kv);
            const std::string name = std::string(hwy::TargetName(target)) + (with_dot ? "+dot" : "");
            if (first.empty()) {
                first = name;
                want = got;
                continue;
            }
            EXPECT_EQ(got.size(), want.size());
            EXPECT_TRUE(got.size() == want.size() && std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0)
                << label << ": " << name << " != " << first;
        }
    }
    hwy::SetSupportedTargetsForTest(0);
    allow_int8_dot_extension(true);
    std::fprintf(stderr, "%s: %zu target(s) from %s, digest %016" PRIx64 "\n", label.c_str(), targets.size(),
                 first.c_str(), fnv1a(want));
    return fnv1a(want);
}

// With TESSERA_LOGITS_DIGEST set: FILE + suffix, to write one line per case.
std::ofstream digest_file(const char* suffix) {
    const char* file = std::getenv("TESSERA_LOGITS_DIGEST");
    std::ofstream out;
    if (file != nullptr && *file != '\0') out.open(std::string(file) + suffix);
    return out;
}

}  // namespace

TEST(CrossCpu, EveryTargetGivesTheSameLogits) {
    const std::string dir = test::scratch_dir("cross_cpu");
    std::ofstream digests = digest_file("");
    for (QuantType type : {QuantType::F32, QuantType::F16, QuantType::Q8_0, QuantType::Q4_0, QuantType::Q4_K,
                           QuantType::Q6_K, QuantType::Q5_K, QuantType::IQ4_XS, QuantType::MXFP4, QuantType::IQ2_XXS,
                           QuantType::IQ3_S, QuantType::IQ1_S, QuantType::Q1_0, QuantType::NVFP4, QuantType::Q2_0,
                           QuantType::TQ1_0, QuantType::TQ2_0, QuantType::BF16}) {
        const uint64_t digest = expect_every_target_agrees(write_model(dir, type), KvCacheTypes(), quant_type_name(type));
        if (digests.is_open()) digests << quant_type_name(type) << " " << std::hex << digest << std::dec << "\n";
    }
}

// The cache types too: attention over block keys (the query quantized to
// Q8_0, integer sums per block) and the weighted sums over block values give
// the same bits on every target, prompt and decode alike. With
// TESSERA_LOGITS_DIGEST=FILE, one line per cache type goes to FILE.kv.
TEST(CrossCpu, EveryTargetGivesTheSameLogitsOverEveryCacheType) {
    const std::string dir = test::scratch_dir("cross_cpu");
    std::ofstream digests = digest_file(".kv");
    const std::string path = write_model(dir, QuantType::Q8_0);
    for (const KvCacheTypes kv : {KvCacheTypes(QuantType::Q8_0), KvCacheTypes(QuantType::Q4_0),
                                  KvCacheTypes(QuantType::Q8_0, QuantType::F16), KvCacheTypes(QuantType::F32),
                                  KvCacheTypes(QuantType::Q4_0, QuantType::F16), KvCacheTypes(QuantType::F16, QuantType::Q8_0),
                                  KvCacheTypes(QuantType::F16), KvCacheTypes(QuantType::Q8_0, QuantType::F32),
                                  KvCacheTypes(QuantType::F32, QuantType::F16)}) {
        const std::string kv_name = std::string(quant_type_name(kv.k)) + "/" + quant_type_name(kv.v);
        const uint64_t digest = expect_every_target_agrees(path, kv, "cache " + kv_name);
        if (digests.is_open()) digests << kv_name << " " << std::hex << digest << std::dec << "\n";
    }
}

}  // namespace tessera
