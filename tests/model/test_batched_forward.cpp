// A prompt processed in batches (matrix-matrix kernels, batched causal
// attention) gives the same logits as the same tokens one at a time, on the
// real stories260K model and on a generated GQA model in each weight type.
#include "model/llama_model.h"
#include "model/local_decoder.h"
#include "model/random_model.h"
#include "test_paths.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace tessera {

namespace {
// Max |a - b| over all logits must stay within tol of the largest |logit|.
void expect_batched_equals_one_by_one(const std::string& path, int n_batch, int threads, double tol) {
    const LlamaModel model(path);
    const int n_vocab = model.hparams().n_vocab;
    std::vector<int32_t> tokens;
    for (int i = 0; i < 45; ++i) tokens.push_back((i * 37 + 11) % n_vocab);
    ForwardConfig config;
    config.n_ctx = 64;
    config.n_batch = n_batch;
    LocalDecoder batched(model, config, threads);
    const float* all = batched.eval_all(tokens, 0);
    const std::vector<float> batched_logits(all, all + tokens.size() * n_vocab);

    // eval of the whole prompt gives the last row of eval_all.
    LocalDecoder last(model, config, threads);
    const float* last_logits = last.eval(tokens, 0);
    for (int v = 0; v < n_vocab; ++v) {
        ASSERT_FLOAT_EQ(last_logits[v], batched_logits[(tokens.size() - 1) * n_vocab + v]);
    }

    config.n_batch = 1;
    LocalDecoder single(model, config, threads);
    double max_diff = 0.0, max_abs = 0.0;
    for (size_t t = 0; t < tokens.size(); ++t) {
        const float* logits = single.eval(std::span<const int32_t>(tokens).subspan(t, 1), static_cast<int>(t));
        for (int v = 0; v < n_vocab; ++v) {
            const float b = batched_logits[t * n_vocab + v];
            ASSERT_TRUE(std::isfinite(b));
            max_diff = std::max(max_diff, std::fabs(static_cast<double>(b) - logits[v]));
            max_abs = std::max(max_abs, std::fabs(static_cast<double>(logits[v])));
        }
    }
    EXPECT_GT(max_abs, 0.0);
    EXPECT_LE(max_diff, tol * max_abs) << path << " batch " << n_batch << " threads " << threads;
}
}  // namespace

TEST(BatchedForward, Stories260KBatchesEqualOneByOne) {
    REQUIRE_SHARED_MODELS();
    const std::string path = test::shared_models() + "/stories260K.gguf";
    for (int n_batch : {45, 16, 7}) expect_batched_equals_one_by_one(path, n_batch, 2, 1e-4);
    expect_batched_equals_one_by_one(path, 64, 1, 1e-4);
}

TEST(BatchedForward, GeneratedGqaModelBatchesEqualOneByOne) {
    const std::string dir = test::scratch_dir("batched_forward");
    for (QuantType type : {QuantType::F32, QuantType::F16, QuantType::Q8_0, QuantType::Q4_0}) {
        RandomModelSpec spec;
        spec.n_embd = 128;
        spec.n_layer = 2;
        spec.n_head = 8;
        spec.n_head_kv = 2;
        spec.n_ff = 320;
        spec.n_vocab = 300;
        spec.type = type;
        const std::string path = dir + "/gqa-" + quant_type_name(type) + ".gguf";
        write_random_model(spec, path);
        // Quantized activations are rounded per row either way, so only the
        // summation order differs between the two paths.
        expect_batched_equals_one_by_one(path, 20, 2, 1e-4);
    }
}

}  // namespace tessera
