// Context shift: after dropping positions [keep, keep + discard), the first
// layer's keys and values (which depend only on each position's token and
// its position) equal a fresh evaluation of the kept tokens at their new
// positions: the keys are re-rotated by the right angle in the right
// direction. Rows before `keep` stay as they were; landmarks follow the moved
// rows; out-of-range shifts are refused.
#include "model/llama_model.h"
#include "model/local_decoder.h"
#include "model/random_model.h"
#include "test_paths.h"
#include "util/error.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace tessera {

namespace {

void expect_first_layer_matches_fresh(const std::string& path, KvCacheTypes types, double tol) {
    const LlamaModel model(path);
    const int n_vocab = model.hparams().n_vocab;
    std::vector<int32_t> all;
    for (int i = 0; i < 40; ++i) all.push_back((i * 53 + 7) % n_vocab);
    const int keep = 5, discard = 12;
    std::vector<int32_t> kept(all.begin(), all.begin() + keep);
    kept.insert(kept.end(), all.begin() + keep + discard, all.end());

    ForwardConfig config;
    config.n_ctx = 64;
    config.kv_types = types;
    LocalDecoder shifted(model, config, 2);
    shifted.eval(all, 0);
    shifted.shift_context(0, keep, discard, static_cast<int>(all.size()));
    LocalDecoder fresh(model, config, 2);
    fresh.eval(kept, 0);

    const KvCache& a = shifted.forward().kv_cache(0);
    const KvCache& b = fresh.forward().kv_cache(0);
    const int hd = a.head_dim();
    std::vector<float> ka(hd), kb(hd), va(hd), vb(hd);
    double max_abs = 0.0, max_diff_k = 0.0, max_diff_v = 0.0;
    for (int h = 0; h < a.n_kv_heads(); ++h) {
        for (int p = 0; p < static_cast<int>(kept.size()); ++p) {
            a.load_k(0, h, p, ka.data());
            b.load_k(0, h, p, kb.data());
            a.load_v(0, h, p, va.data());
            b.load_v(0, h, p, vb.data());
            for (int i = 0; i < hd; ++i) {
                max_abs = std::max(max_abs, std::fabs(static_cast<double>(kb[i])));
                max_diff_k = std::max(max_diff_k, std::fabs(static_cast<double>(ka[i]) - kb[i]));
                max_diff_v = std::max(max_diff_v, std::fabs(static_cast<double>(va[i]) - vb[i]));
            }
        }
    }
    EXPECT_GT(max_abs, 0.0);
    EXPECT_LE(max_diff_k, tol * max_abs) << path << " keys";
    EXPECT_LE(max_diff_v, tol * max_abs) << path << " values";

    // A position's logits after the shift: as the kept context gives them,
    // up to what the dropped tokens left in the later layers' rows.
    const int32_t next[1] = {all[3]};
    const float* after = shifted.eval(next, static_cast<int>(kept.size()));
    for (int v = 0; v < n_vocab; ++v) ASSERT_TRUE(std::isfinite(after[v]));
}

}  // namespace

TEST(ContextShift, Stories260KFirstLayerEqualsAFreshEvaluation) {
    const std::string path = test::stories260k();
    expect_first_layer_matches_fresh(path, QuantType::F32, 1e-5);
    expect_first_layer_matches_fresh(path, QuantType::F16, 2e-3);
}

TEST(ContextShift, QuantizedKeysAndHalvesRopeAndLandmarks) {
    const std::string dir = test::scratch_dir("context_shift");
    RandomModelSpec spec;
    spec.n_embd = 128;
    spec.n_layer = 2;
    spec.n_head = 4;
    spec.n_head_kv = 2;
    spec.n_ff = 256;
    spec.n_vocab = 300;
    const std::string path = dir + "/m.gguf";
    write_random_model(spec, path);
    expect_first_layer_matches_fresh(path, QuantType::F32, 1e-5);
    // Q8_0 keys are re-quantized after the rotation: within its rounding.
    expect_first_layer_matches_fresh(path, QuantType::Q8_0, 2e-2);

    apply_model_preset(spec, "qwen2");  // RoPE over halves (NEOX layout)
    const std::string qwen = dir + "/qwen.gguf";
    write_random_model(spec, qwen);
    expect_first_layer_matches_fresh(qwen, QuantType::F32, 1e-5);

    // Landmarks of the blocks after `keep` are the means of the moved rows.
    const LlamaModel model(path);
    ForwardConfig config;
    config.n_ctx = 64;
    config.sparse.enabled = true;
    config.sparse.window = 4;
    config.sparse.block = 4;
    LocalDecoder d(model, config, 1);
    std::vector<int32_t> tokens(30, 9);
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 31) % 300);
    d.eval(tokens, 0);
    d.shift_context(0, 2, 10, 30);
    const KvCache& cache = d.forward().kv_cache(0);
    std::vector<float> row(cache.head_dim());
    std::vector<double> mean(cache.head_dim(), 0.0);
    for (int p = 8; p < 12; ++p) {
        cache.load_v(1, 1, p, row.data());
        for (int i = 0; i < cache.head_dim(); ++i) mean[i] += row[i] / 4.0;
    }
    for (int i = 0; i < cache.head_dim(); ++i) EXPECT_NEAR(cache.landmark_v(1, 1)[2 * cache.head_dim() + i], mean[i], 1e-5);

    EXPECT_THROW(d.shift_context(0, 10, 30, 20), Error);  // more than it holds
    EXPECT_THROW(d.shift_context(1, 0, 2, 10), Error);    // no sequence 1
    EXPECT_THROW(d.shift_context(0, 0, 0, 10), Error);    // nothing to drop
}

}  // namespace tessera
