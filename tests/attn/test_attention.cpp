#include "attn/dense_attention.h"
#include "util/error.h"
#include "util/rng.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace tessera {

// Grouped-query attention over a filled cache equals the textbook formula,
// for F32 and (within half precision) F16 caches.
TEST(DenseAttention, MatchesNaiveGqa) {
    const int n_kv = 2, q_per_kv = 3, hd = 8, n_ctx = 16, n_pos = 11, layer = 1;
    for (QuantType type : {QuantType::F32, QuantType::F16}) {
        KvCache cache(2, n_kv, hd, n_ctx, type);
        Rng rng(4);
        std::vector<std::vector<float>> ks, vs;
        for (int p = 0; p < n_pos; ++p) {
            std::vector<float> k(n_kv * hd), v(n_kv * hd);
            for (auto& x : k) x = rng.next_normal();
            for (auto& x : v) x = rng.next_normal();
            cache.store(layer, p, k.data(), v.data());
            ks.push_back(k);
            vs.push_back(v);
        }
        std::vector<float> q(n_kv * q_per_kv * hd), out(q.size());
        for (auto& x : q) x = rng.next_normal();
        ThreadPool pool(2);
        DenseAttention attention(n_ctx, pool.size());
        attention.attend(cache, layer, n_pos, q.data(), n_kv * q_per_kv, q_per_kv, out.data(), pool);
        const double tol = type == QuantType::F32 ? 1e-5 : 5e-3;
        for (int h = 0; h < n_kv * q_per_kv; ++h) {
            const int kvh = h / q_per_kv;
            std::vector<double> s(n_pos);
            double max = -1e300, sum = 0.0;
            for (int p = 0; p < n_pos; ++p) {
                double d = 0.0;
                for (int i = 0; i < hd; ++i) d += q[h * hd + i] * ks[p][kvh * hd + i];
                s[p] = d / std::sqrt(static_cast<double>(hd));
                max = std::max(max, s[p]);
            }
            for (auto& x : s) sum += (x = std::exp(x - max));
            for (int i = 0; i < hd; ++i) {
                double o = 0.0;
                for (int p = 0; p < n_pos; ++p) o += s[p] / sum * vs[p][kvh * hd + i];
                EXPECT_NEAR(out[h * hd + i], o, tol) << quant_type_name(type) << " head " << h;
            }
        }
    }
}

TEST(KvCache, RejectsBadShapesAndPositions) {
    EXPECT_THROW(KvCache(1, 1, 8, 0, QuantType::F32), Error);
    EXPECT_THROW(KvCache(1, 1, 8, 4, QuantType::Q4_0), Error);
    KvCache cache(1, 1, 8, 4, QuantType::F32);
    std::vector<float> k(8), v(8);
    EXPECT_THROW(cache.store(0, 4, k.data(), v.data()), Error);
}

}  // namespace tessera
