// Sparse attention over a real cache: against the textbook formula over the
// candidates the rules give (landmarks as the means of what the cache holds),
// for every landmark mode, with and without log-stride and globals, GQA and
// multi-query shapes, F32 and quantized caches; a batch equals its positions
// one at a time bit for bit; a window that reaches position 0 gives dense's
// bits; a rewritten block's landmark follows its new rows.
#include "attn/attention.h"
#include "ops/quant_traits.h"
#include "util/error.h"
#include "util/rng.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace tessera {
namespace {

struct Filled {
    KvCache cache;
    std::vector<float> q;  // [pos][n_q_heads * hd]
};

Filled fill(int n_kv, int q_per_kv, int hd, int n_ctx, int n_pos, KvCacheTypes types, int landmark_block,
            uint64_t seed) {
    Filled f{KvCache(1, n_kv, hd, n_ctx, types), {}};
    if (landmark_block > 0) f.cache.enable_landmarks(landmark_block);
    Rng rng(seed);
    std::vector<float> k(static_cast<size_t>(n_kv) * hd), v(k.size());
    for (int p = 0; p < n_pos; ++p) {
        for (float& x : k) x = rng.next_normal();
        for (float& x : v) x = rng.next_normal();
        f.cache.store(0, p, k.data(), v.data());
    }
    f.q.resize(static_cast<size_t>(n_pos) * n_kv * q_per_kv * hd);
    for (float& x : f.q) x = rng.next_normal();
    return f;
}

// The formula over a query's candidates, reading rows back from the cache.
std::vector<double> reference(const KvCache& cache, int kvh, int pos, const float* qh, const SparseOptions& o) {
    const int hd = cache.head_dim();
    SparseCandidates c;
    sparse_candidates(pos, o, c);
    std::vector<std::vector<float>> keys, values;
    std::vector<float> k(hd), v(hd);
    auto add_token = [&](int p) {
        cache.load_k(0, kvh, p, k.data());
        cache.load_v(0, kvh, p, v.data());
        keys.push_back(k);
        values.push_back(v);
    };
    for (int p = c.window_begin; p <= pos; ++p) add_token(p);
    for (int p : c.tokens) add_token(p);
    for (int b : c.blocks) {
        std::vector<double> mk(hd, 0.0), mv(hd, 0.0);
        for (int p = b * o.block; p < (b + 1) * o.block; ++p) {
            cache.load_k(0, kvh, p, k.data());
            cache.load_v(0, kvh, p, v.data());
            for (int i = 0; i < hd; ++i) {
                mk[i] += k[i];
                mv[i] += v[i];
            }
        }
        for (int i = 0; i < hd; ++i) {
            k[i] = static_cast<float>(mk[i] / o.block);
            v[i] = static_cast<float>(mv[i] / o.block);
        }
        keys.push_back(k);
        values.push_back(v);
    }
    std::vector<double> s(keys.size());
    double max = -1e300, sum = 0.0;
    for (size_t j = 0; j < keys.size(); ++j) {
        double d = 0.0;
        for (int i = 0; i < hd; ++i) d += static_cast<double>(qh[i]) * keys[j][i];
        s[j] = d / std::sqrt(static_cast<double>(hd));
        max = std::max(max, s[j]);
    }
    for (double& x : s) sum += (x = std::exp(x - max));
    std::vector<double> out(hd, 0.0);
    for (size_t j = 0; j < keys.size(); ++j) {
        for (int i = 0; i < hd; ++i) out[i] += s[j] / sum * values[j][i];
    }
    return out;
}

}  // namespace

TEST(SparseAttention, EqualsTheFormulaOverItsCandidates) {
    struct Case {
        int n_kv, q_per_kv, hd;
        SparseOptions o;
    };
    std::vector<Case> cases;
    for (LandmarkMode mode : {LandmarkMode::kAll, LandmarkMode::kLog, LandmarkMode::kOff}) {
        for (bool stride : {true, false}) {
            SparseOptions o;
            o.enabled = true;
            o.window = 16;
            o.block = 8;
            o.globals = stride ? 1 : 3;
            o.log_stride = stride;
            o.landmarks = mode;
            cases.push_back({2, 3, 16, o});
        }
    }
    SparseOptions mqa;
    mqa.enabled = true;
    mqa.window = 20;
    mqa.block = 7;
    cases.push_back({1, 40, 12, mqa});  // more query heads than one tile of scores
    const int n_ctx = 160, n_pos = 150;
    for (const Case& c : cases) {
        const int nq = c.n_kv * c.q_per_kv, width = nq * c.hd;
        const int lm = c.o.landmarks == LandmarkMode::kOff ? 0 : c.o.block;
        Filled f = fill(c.n_kv, c.q_per_kv, c.hd, n_ctx, n_pos, QuantType::F32, lm, 3);
        ThreadPool pool(2);
        Attention attention(n_ctx, c.hd, c.n_kv, pool.size());
        AttentionOptions options;
        options.sparse = c.o;
        std::vector<float> batch(f.q.size()), one(width);
        attention.attend(f.cache, 0, 0, n_pos, f.q.data(), width, nq, c.q_per_kv, batch.data(), width, pool, options);
        for (int pos : {0, c.o.window, c.o.window + 1, 57, 64, n_pos - 1}) {
            const float* q = f.q.data() + static_cast<size_t>(pos) * width;
            attention.attend(f.cache, 0, pos, 1, q, width, nq, c.q_per_kv, one.data(), width, pool, options);
            for (int h = 0; h < nq; ++h) {
                const std::vector<double> want = reference(f.cache, h / c.q_per_kv, pos, q + h * c.hd, c.o);
                for (int i = 0; i < c.hd; ++i) {
                    ASSERT_NEAR(one[h * c.hd + i], want[i], 2e-5) << describe(c.o) << " pos " << pos << " head " << h;
                }
            }
            if (!sparse_is_dense_at(n_pos - 1, c.o)) {
                // Sparse positions of a batch: each as it would be alone.
                for (int i = 0; i < width; ++i) {
                    ASSERT_EQ(batch[static_cast<size_t>(pos) * width + i], one[i]) << describe(c.o) << " pos " << pos;
                }
            }
        }
    }
}

TEST(SparseAttention, QuantizedCachesReadTheirOwnRowsAndMeans) {
    SparseOptions o;
    o.enabled = true;
    o.window = 24;
    o.block = 16;
    const int n_kv = 2, q_per_kv = 2, hd = 64, nq = 4, width = nq * hd, n_ctx = 200, n_pos = 190;
    for (const KvCacheTypes types : {KvCacheTypes(QuantType::Q8_0), KvCacheTypes(QuantType::F16, QuantType::Q4_0)}) {
        Filled f = fill(n_kv, q_per_kv, hd, n_ctx, n_pos, types, o.block, 8);
        ThreadPool pool(1);
        Attention attention(n_ctx, hd, n_kv, pool.size());
        AttentionOptions options;
        options.sparse = o;
        std::vector<float> one(width);
        const int pos = n_pos - 1;
        const float* q = f.q.data() + static_cast<size_t>(pos) * width;
        attention.attend(f.cache, 0, pos, 1, q, width, nq, q_per_kv, one.data(), width, pool, options);
        for (int h = 0; h < nq; ++h) {
            const std::vector<double> want = reference(f.cache, h / q_per_kv, pos, q + h * hd, o);
            // Q8_0 keys take the query rounded to Q8_0: within its rounding.
            for (int i = 0; i < hd; ++i) ASSERT_NEAR(one[h * hd + i], want[i], 2e-2) << quant_type_name(types.k);
        }
    }
}

TEST(SparseAttention, AWindowThatReachesTheStartGivesDenseBits) {
    const int n_kv = 2, q_per_kv = 2, hd = 16, nq = 4, width = nq * hd, n_ctx = 80, n_pos = 70;
    Filled f = fill(n_kv, q_per_kv, hd, n_ctx, n_pos, QuantType::F16, 8, 11);
    ThreadPool pool(2);
    Attention attention(n_ctx, hd, n_kv, pool.size());
    AttentionOptions sparse;
    sparse.sparse.enabled = true;
    sparse.sparse.window = n_pos - 1;
    sparse.sparse.block = 8;
    std::vector<float> dense_out(f.q.size()), sparse_out(f.q.size());
    attention.attend(f.cache, 0, 0, n_pos, f.q.data(), width, nq, q_per_kv, dense_out.data(), width, pool, {});
    attention.attend(f.cache, 0, 0, n_pos, f.q.data(), width, nq, q_per_kv, sparse_out.data(), width, pool, sparse);
    EXPECT_EQ(sparse_out, dense_out);
    for (int pos = 0; pos < n_pos; pos += 9) {
        const float* q = f.q.data() + static_cast<size_t>(pos) * width;
        std::vector<float> a(width), b(width);
        attention.attend(f.cache, 0, pos, 1, q, width, nq, q_per_kv, a.data(), width, pool, {});
        attention.attend(f.cache, 0, pos, 1, q, width, nq, q_per_kv, b.data(), width, pool, sparse);
        EXPECT_EQ(a, b) << pos;
    }
}

TEST(SparseAttention, ARewrittenBlocksLandmarkFollowsItsNewRows) {
    const int hd = 8, block = 4;
    KvCache cache(1, 1, hd, 16, QuantType::F32);
    cache.enable_landmarks(block);
    std::vector<float> k(hd), v(hd);
    for (int p = 0; p < 8; ++p) {
        std::fill(k.begin(), k.end(), static_cast<float>(p));
        std::fill(v.begin(), v.end(), static_cast<float>(-p));
        cache.store(0, p, k.data(), v.data());
    }
    EXPECT_FLOAT_EQ(cache.landmark_k(0, 0)[0], 1.5f);        // mean of 0..3
    EXPECT_FLOAT_EQ(cache.landmark_v(0, 0)[hd + 3], -5.5f);  // mean of -(4..7)
    // Positions 4..7 again (a rolled-back draft, a new prompt's tail).
    for (int p = 4; p < 8; ++p) {
        std::fill(k.begin(), k.end(), 10.0f);
        cache.store(0, p, k.data(), v.data());
    }
    EXPECT_FLOAT_EQ(cache.landmark_k(0, 0)[hd], 10.0f);
}

}  // namespace tessera
