// KV caches of Q8_0 and Q4_0 rows (and mixed with F16): attention over them
// equals the textbook formula over the rows as they read back, with the
// query rounded to Q8_0 where the keys are block-quantized (one position, the
// cache read in place) or exact (a batch, the history converted); and the
// whole result stays near attention over the unrounded values, nearer for
// Q8_0 than Q4_0. Head widths of one and several blocks; multi-query shapes.
#include "attn/attention.h"
#include "ops/quant_traits.h"
#include "util/error.h"
#include "util/rng.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace tessera {
namespace {

// softmax(q . K / sqrt(hd)) . V for one query head over rows [0, n).
std::vector<double> textbook(const float* q, const std::vector<float>& k, const std::vector<float>& v, int n, int hd) {
    std::vector<double> s(n);
    double max = -1e300, sum = 0.0;
    for (int p = 0; p < n; ++p) {
        double d = 0.0;
        for (int i = 0; i < hd; ++i) d += static_cast<double>(q[i]) * k[static_cast<size_t>(p) * hd + i];
        s[p] = d / std::sqrt(static_cast<double>(hd));
        max = std::max(max, s[p]);
    }
    for (double& x : s) sum += (x = std::exp(x - max));
    std::vector<double> out(hd, 0.0);
    for (int p = 0; p < n; ++p) {
        for (int i = 0; i < hd; ++i) out[i] += s[p] / sum * v[static_cast<size_t>(p) * hd + i];
    }
    return out;
}

// The query as the keys' dot product reads it.
std::vector<float> as_dot_operand(const float* q, int hd, QuantType k_type) {
    std::vector<float> out(q, q + hd);
    const QuantType dot = scalar_traits(k_type)->vec_dot_type;
    if (dot == QuantType::F32) return out;
    std::vector<uint8_t> packed(quant_row_bytes(dot, hd));
    scalar_traits(dot)->from_float(q, packed.data(), hd);
    scalar_traits(dot)->to_float(packed.data(), out.data(), hd);
    return out;
}

}  // namespace

TEST(QuantizedKvCache, AttentionEqualsTheFormulaOverWhatTheCacheHolds) {
    struct Shape {
        int n_kv, q_per_kv, hd;
    };
    const std::vector<KvCacheTypes> type_pairs = {{QuantType::Q8_0, QuantType::Q8_0}, {QuantType::Q4_0, QuantType::Q4_0},
                                                  {QuantType::Q8_0, QuantType::F16}, {QuantType::F16, QuantType::Q4_0},
                                                  {QuantType::Q4_0, QuantType::Q8_0}};
    for (const Shape shape : {Shape{2, 3, 64}, Shape{1, 40, 32}, Shape{2, 1, 128}}) {
        const int n_kv = shape.n_kv, q_per_kv = shape.q_per_kv, hd = shape.hd;
        const int nq = n_kv * q_per_kv, width = nq * hd, n_ctx = 72, n_pos = 67, layer = 1;
        for (const KvCacheTypes types : type_pairs) {
            const std::string what = std::string(quant_type_name(types.k)) + "/" + quant_type_name(types.v) + " " +
                                     std::to_string(n_kv) + "x" + std::to_string(q_per_kv) + "x" + std::to_string(hd);
            KvCache cache(2, n_kv, hd, n_ctx, types);
            EXPECT_EQ(cache.bytes(), 2ull * n_kv * n_ctx *
                                         (quant_row_bytes(types.k, hd) + quant_row_bytes(types.v, hd)));
            Rng rng(41);
            std::vector<float> true_k(static_cast<size_t>(n_pos) * n_kv * hd), true_v(true_k.size());
            for (float& x : true_k) x = rng.next_normal();
            for (float& x : true_v) x = rng.next_normal();
            for (int p = 0; p < n_pos; ++p) {
                cache.store(layer, p, true_k.data() + static_cast<size_t>(p) * n_kv * hd,
                            true_v.data() + static_cast<size_t>(p) * n_kv * hd);
            }
            std::vector<float> q(static_cast<size_t>(n_pos) * width);
            for (float& x : q) x = rng.next_normal();
            ThreadPool pool(2);
            Attention attention(n_ctx, hd, n_kv, pool.size());
            // The last 3 positions one at a time, then the whole prompt as a batch.
            std::vector<float> one(width), batch(q.size());
            attention.attend(cache, layer, 0, n_pos, q.data(), width, nq, q_per_kv, batch.data(), width, pool);
            double worst_vs_true = 0.0;
            for (int h = 0; h < nq; ++h) {
                const int kvh = h / q_per_kv;
                std::vector<float> held_k(static_cast<size_t>(n_pos) * hd), held_v(held_k.size());
                std::vector<float> plain_k(held_k.size()), plain_v(held_k.size());
                cache.load_k_rows(layer, kvh, n_pos, held_k.data());
                cache.load_v_rows(layer, kvh, n_pos, held_v.data());
                for (int p = 0; p < n_pos; ++p) {
                    for (int i = 0; i < hd; ++i) {
                        const size_t at = (static_cast<size_t>(p) * n_kv + kvh) * hd + i;
                        plain_k[static_cast<size_t>(p) * hd + i] = true_k[at];
                        plain_v[static_cast<size_t>(p) * hd + i] = true_v[at];
                    }
                }
                for (int pos = n_pos - 3; pos < n_pos; ++pos) {
                    const float* qh = q.data() + static_cast<size_t>(pos) * width + static_cast<size_t>(h) * hd;
                    attention.attend(cache, layer, pos, 1, q.data() + static_cast<size_t>(pos) * width, width, nq,
                                     q_per_kv, one.data(), width, pool);
                    const std::vector<float> q_read = as_dot_operand(qh, hd, types.k);
                    const std::vector<double> want_one = textbook(q_read.data(), held_k, held_v, pos + 1, hd);
                    const std::vector<double> want_batch = textbook(qh, held_k, held_v, pos + 1, hd);
                    const std::vector<double> exact = textbook(qh, plain_k, plain_v, pos + 1, hd);
                    for (int i = 0; i < hd; ++i) {
                        ASSERT_NEAR(one[static_cast<size_t>(h) * hd + i], want_one[i], 2e-5) << what << " head " << h;
                        ASSERT_NEAR(batch[static_cast<size_t>(pos) * width + h * hd + i], want_batch[i], 2e-5)
                            << what << " head " << h << " (batch)";
                        worst_vs_true = std::max(worst_vs_true, std::abs(one[static_cast<size_t>(h) * hd + i] - exact[i]));
                    }
                }
            }
            // Rounding bounds: Q8_0 keeps ~2 decimal digits, Q4_0 about one.
            const bool has_q4 = types.k == QuantType::Q4_0 || types.v == QuantType::Q4_0;
            EXPECT_LT(worst_vs_true, has_q4 ? 0.25 : 0.03) << what;
            EXPECT_GT(worst_vs_true, 0.0) << what << ": no rounding at all";
        }
    }
}

TEST(QuantizedKvCache, TypesAndWidthsTheBlocksDoNotFitAreRefused) {
    EXPECT_THROW(KvCache(1, 1, 48, 4, QuantType::Q8_0), Error);  // 48 is not a multiple of 32
    EXPECT_THROW(KvCache(1, 1, 64, 4, KvCacheTypes(QuantType::F16, QuantType::Q4_K)), Error);
    EXPECT_THROW(KvCache(1, 1, 64, 4, QuantType::BF16), Error);
    EXPECT_NO_THROW(KvCache(1, 1, 48, 4, KvCacheTypes(QuantType::F16, QuantType::F32)));
    try {
        kv_position_bytes({QuantType::Q4_0, QuantType::F16}, 4, 8);
        ADD_FAILURE() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("multiple of 32 (this model's is 8)"), std::string::npos) << e.what();
    }
    EXPECT_EQ(kv_position_bytes({QuantType::Q8_0, QuantType::Q4_0}, 2, 64), 2u * (2 * 34 + 2 * 18));
}

}  // namespace tessera
