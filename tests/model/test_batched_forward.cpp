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
void expect_batched_equals_one_by_one(const std::string& path, int n_batch, int threads, double tol, int flips = 0) {
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

    // eval of the whole prompt gives the last row of eval_all (its logits
    // come from a matrix-vector product, eval_all's from a tile: only the
    // summation order differs).
    LocalDecoder last(model, config, threads);
    const float* last_logits = last.eval(tokens, 0);
    for (int v = 0; v < n_vocab; ++v) {
        const float want = batched_logits[(tokens.size() - 1) * n_vocab + v];
        ASSERT_NEAR(last_logits[v], want, 1e-5 * (1.0 + std::fabs(want)));
    }

    config.n_batch = 1;
    LocalDecoder single(model, config, threads);
    // Per position, the largest logit difference. With 8-bit activations a
    // summation-order difference of one ulp can flip the rounding of one
    // activation element at one position (a tie), moving that position's
    // logits by one quantum, and every later position's too (they attend to
    // its keys and values): allow `flips` such onsets, each bounded.
    double max_abs = 0.0;
    std::vector<double> diff(tokens.size(), 0.0);
    for (size_t t = 0; t < tokens.size(); ++t) {
        const float* logits = single.eval(std::span<const int32_t>(tokens).subspan(t, 1), static_cast<int>(t));
        for (int v = 0; v < n_vocab; ++v) {
            const float b = batched_logits[t * n_vocab + v];
            ASSERT_TRUE(std::isfinite(b));
            diff[t] = std::max(diff[t], std::fabs(static_cast<double>(b) - logits[v]));
            max_abs = std::max(max_abs, std::fabs(static_cast<double>(logits[v])));
        }
    }
    EXPECT_GT(max_abs, 0.0);
    int onsets = 0;
    for (size_t t = 0; t < tokens.size(); ++t) {
        const bool over = diff[t] > tol * max_abs;
        if (over && (t == 0 || diff[t - 1] <= tol * max_abs)) ++onsets;
        EXPECT_LE(diff[t], 0.05 * max_abs) << path << " position " << t;
    }
    EXPECT_LE(onsets, flips) << path << " batch " << n_batch << " threads " << threads;
}
}  // namespace

TEST(BatchedForward, Stories260KBatchesEqualOneByOne) {
    const std::string path = test::stories260k();
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
        const bool quantized = type == QuantType::Q8_0 || type == QuantType::Q4_0;
        expect_batched_equals_one_by_one(path, 20, 2, 1e-4, quantized ? 2 : 0);
    }
}

}  // namespace tessera
