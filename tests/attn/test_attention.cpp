#include "attn/attention.h"
#include "util/error.h"
#include "util/rng.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace tessera {

// Grouped-query attention of one position over a filled cache (read in
// place) equals the textbook formula, for F32 and (within half precision) F16
// caches; head sizes off the vector width, and more query heads per KV head
// than one block of scores holds (multi-query attention).
TEST(Attention, MatchesNaiveGqa) {
    struct Shape {
        int n_kv, q_per_kv, hd;
    };
    for (const Shape shape : {Shape{2, 3, 8}, Shape{2, 4, 20}, Shape{1, 40, 16}}) {
        const int n_kv = shape.n_kv, q_per_kv = shape.q_per_kv, hd = shape.hd;
        const int n_ctx = 40, n_pos = 37, layer = 1;
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
            Attention attention(n_ctx, hd, n_kv, pool.size());
            const int nq = n_kv * q_per_kv;
            attention.attend(cache, layer, n_pos - 1, 1, q.data(), nq * hd, nq, q_per_kv, out.data(), nq * hd, pool);
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
                    ASSERT_NEAR(out[h * hd + i], o, tol)
                        << quant_type_name(type) << " " << n_kv << "x" << q_per_kv << "x" << hd << " head " << h;
                }
            }
        }
    }
}

// A batch of positions attends causally: query t of a batch starting at pos0
// reads positions [0, pos0 + t], and equals attending one position at a time.
// Batches longer than one block of scores, odd sizes, 1 and 3 threads.
TEST(Attention, BatchIsCausalAndEqualsOneByOne) {
    const int n_kv = 2, q_per_kv = 2, hd = 12, n_ctx = 80, layer = 0;
    const int nq = n_kv * q_per_kv, width = nq * hd;
    for (int threads : {1, 3}) {
        for (int pos0 : {0, 5}) {
            const int n_tok = 70 - pos0;
            KvCache cache(1, n_kv, hd, n_ctx, QuantType::F32);
            Rng rng(17 + pos0);
            for (int p = 0; p < pos0 + n_tok; ++p) {
                std::vector<float> k(n_kv * hd), v(n_kv * hd);
                for (auto& x : k) x = rng.next_normal();
                for (auto& x : v) x = rng.next_normal();
                cache.store(layer, p, k.data(), v.data());
            }
            std::vector<float> q(static_cast<size_t>(n_tok) * width), batch(q.size()), single(width);
            for (auto& x : q) x = rng.next_normal();
            ThreadPool pool(threads);
            Attention attention(n_ctx, hd, n_kv, threads);
            attention.attend(cache, layer, pos0, n_tok, q.data(), width, nq, q_per_kv, batch.data(), width, pool);
            for (int t = 0; t < n_tok; ++t) {
                attention.attend(cache, layer, pos0 + t, 1, q.data() + t * width, width, nq, q_per_kv,
                                 single.data(), width, pool);
                for (int i = 0; i < width; ++i) {
                    ASSERT_NEAR(batch[static_cast<size_t>(t) * width + i], single[i], 1e-5)
                        << "threads " << threads << " pos0 " << pos0 << " t " << t;
                }
            }
        }
    }
}

// One position head by head (what a caller's own region over KV heads runs,
// in any order and with any scratch slot) equals attend for that position bit
// for bit, and a head stored alone equals the head stored by store.
TEST(Attention, OneHeadAtATimeEqualsAttend) {
    const int n_kv = 3, q_per_kv = 4, hd = 20, n_ctx = 50, layer = 1, pos = 33;
    const int nq = n_kv * q_per_kv, width = nq * hd;
    for (QuantType type : {QuantType::F32, QuantType::F16}) {
        KvCache whole(2, n_kv, hd, n_ctx, type), by_head(2, n_kv, hd, n_ctx, type);
        Rng rng(31);
        for (int p = 0; p <= pos; ++p) {
            std::vector<float> k(n_kv * hd), v(n_kv * hd);
            for (auto& x : k) x = rng.next_normal();
            for (auto& x : v) x = rng.next_normal();
            whole.store(layer, p, k.data(), v.data());
            for (int h = n_kv - 1; h >= 0; --h) by_head.store_head(layer, h, p, k.data() + h * hd, v.data() + h * hd);
        }
        for (int h = 0; h < n_kv; ++h) {
            std::vector<float> kw(static_cast<size_t>(pos + 1) * hd), kh(kw.size()), vw(kw.size()), vh(kw.size());
            whole.load_k_rows(layer, h, pos + 1, kw.data());
            by_head.load_k_rows(layer, h, pos + 1, kh.data());
            whole.load_v_rows(layer, h, pos + 1, vw.data());
            by_head.load_v_rows(layer, h, pos + 1, vh.data());
            ASSERT_EQ(kw, kh) << quant_type_name(type) << " head " << h;
            ASSERT_EQ(vw, vh) << quant_type_name(type) << " head " << h;
        }
        std::vector<float> q(width), want(width), got(width, -1.0f);
        for (auto& x : q) x = rng.next_normal();
        ThreadPool pool(2);
        Attention attention(n_ctx, hd, n_kv, pool.size());
        attention.attend(whole, layer, pos, 1, q.data(), width, nq, q_per_kv, want.data(), width, pool);
        for (const int h : {2, 0, 1}) attention.attend_one_head(by_head, layer, pos, q.data(), h, q_per_kv, got.data(), h % 2);
        ASSERT_EQ(got, want) << quant_type_name(type);
        EXPECT_THROW(attention.attend_one_head(by_head, layer, pos, q.data(), n_kv, q_per_kv, got.data(), 0), Error);
        EXPECT_THROW(attention.attend_one_head(by_head, layer, pos, q.data(), 0, q_per_kv, got.data(), 2), Error);
        EXPECT_THROW(attention.attend_one_head(by_head, layer, n_ctx, q.data(), 0, q_per_kv, got.data(), 0), Error);
    }
}

TEST(KvCache, RejectsBadShapesAndPositions) {
    EXPECT_THROW(KvCache(1, 1, 8, 0, QuantType::F32), Error);
    EXPECT_THROW(KvCache(1, 1, 8, 4, QuantType::Q4_0), Error);
    KvCache cache(1, 2, 8, 4, QuantType::F32);
    std::vector<float> k(16), v(16);
    EXPECT_THROW(cache.store(0, 4, k.data(), v.data()), Error);
    EXPECT_THROW(cache.store_head(0, 0, 4, k.data(), v.data()), Error);
    EXPECT_THROW(cache.store_head(0, 2, 0, k.data(), v.data()), Error);
    EXPECT_THROW(cache.store_head(1, 0, 0, k.data(), v.data()), Error);
}

}  // namespace tessera

namespace tessera {

// Scale, soft cap and sliding window against the textbook formula, one
// position at a time (the cache read in place) and as a batch (the history
// converted), at positions inside and beyond the window.
TEST(Attention, OptionsMatchNaiveFormulaOneByOneAndBatched) {
    const int n_kv = 2, q_per_kv = 2, hd = 16, n_ctx = 64, layer = 0, n_pos = 50;
    const int nq = n_kv * q_per_kv, width = nq * hd;
    KvCache cache(1, n_kv, hd, n_ctx, QuantType::F32);
    Rng rng(29);
    std::vector<float> ks(n_pos * n_kv * hd), vs(ks.size()), qs(n_pos * width);
    for (auto& x : ks) x = rng.next_normal() * 3.0f;  // large scores, so the cap bites
    for (auto& x : vs) x = rng.next_normal();
    for (auto& x : qs) x = rng.next_normal() * 3.0f;
    for (int p = 0; p < n_pos; ++p) cache.store(layer, p, ks.data() + p * n_kv * hd, vs.data() + p * n_kv * hd);
    ThreadPool pool(2);
    Attention attention(n_ctx, hd, n_kv, pool.size());
    for (const AttentionOptions options : {AttentionOptions{0.1f, 0.0f, 0}, AttentionOptions{0.0f, 5.0f, 0},
                                           AttentionOptions{0.0f, 0.0f, 7}, AttentionOptions{0.2f, 4.0f, 16}}) {
        std::vector<float> batched(n_pos * width);
        attention.attend(cache, layer, 0, n_pos, qs.data(), width, nq, q_per_kv, batched.data(), width, pool, options);
        for (int pos : {0, 6, 7, 20, 49}) {
            std::vector<float> one(width);
            attention.attend(cache, layer, pos, 1, qs.data() + pos * width, width, nq, q_per_kv, one.data(), width,
                             pool, options);
            const int first = options.window > 0 ? std::max(0, pos - options.window + 1) : 0;
            const double scale = options.scale > 0 ? options.scale : 1.0 / std::sqrt(static_cast<double>(hd));
            for (int h = 0; h < nq; ++h) {
                const int kvh = h / q_per_kv;
                std::vector<double> s(pos + 1, 0.0);
                double max = -1e300, sum = 0.0;
                for (int p = first; p <= pos; ++p) {
                    double d = 0.0;
                    for (int i = 0; i < hd; ++i) d += qs[pos * width + h * hd + i] * ks[(p * n_kv + kvh) * hd + i];
                    d *= scale;
                    if (options.soft_cap > 0) d = options.soft_cap * std::tanh(d / options.soft_cap);
                    s[p] = d;
                    max = std::max(max, d);
                }
                for (int p = first; p <= pos; ++p) sum += (s[p] = std::exp(s[p] - max));
                for (int i = 0; i < hd; ++i) {
                    double o = 0.0;
                    for (int p = first; p <= pos; ++p) o += s[p] / sum * vs[(p * n_kv + kvh) * hd + i];
                    ASSERT_NEAR(one[h * hd + i], o, 1e-4) << "one, pos " << pos << " window " << options.window;
                    ASSERT_NEAR(batched[pos * width + h * hd + i], o, 1e-4)
                        << "batched, pos " << pos << " window " << options.window;
                }
            }
        }
    }
}

}  // namespace tessera
