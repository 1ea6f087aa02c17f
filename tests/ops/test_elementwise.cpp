// The SIMD elementwise kernels (swiglu, softmax) against their scalar
// references on every compiled target this CPU supports, on random data of
// every small length and a long one, from unaligned addresses.
#include "ops/activation.h"
#include "ops/softmax.h"
#include "util/rng.h"

#include "ops/each_target.h"

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace tessera {

namespace {

std::vector<int64_t> lengths() {
    std::vector<int64_t> n;
    for (int64_t i = 1; i <= 70; ++i) n.push_back(i);
    n.push_back(4099);
    return n;
}

}  // namespace

TEST(Elementwise, SwigluMatchesScalarOnEveryTarget) {
    test::for_each_target([](const char* target) {
        Rng rng(3);
        for (int64_t n : lengths()) {
            for (int offset : {0, 1, 3}) {
                std::vector<float> gate(static_cast<size_t>(n + offset)), up(gate.size());
                for (auto& v : gate) v = rng.next_normal() * 4.0f;
                for (auto& v : up) v = rng.next_normal();
                std::vector<float> want = gate;
                swiglu_scalar(want.data() + offset, up.data() + offset, n);
                swiglu(gate.data() + offset, up.data() + offset, n);
                for (int64_t i = 0; i < n; ++i) {
                    ASSERT_NEAR(gate[offset + i], want[offset + i], 1e-5f * (1.0f + std::fabs(want[offset + i])))
                        << target << " n " << n << " i " << i;
                }
            }
        }
    });
}

TEST(Elementwise, GegluMatchesScalarOnEveryTarget) {
    test::for_each_target([](const char* target) {
        Rng rng(4);
        for (int64_t n : lengths()) {
            for (int offset : {0, 1, 3}) {
                std::vector<float> gate(static_cast<size_t>(n + offset)), up(gate.size());
                for (auto& v : gate) v = rng.next_normal() * 4.0f;
                for (auto& v : up) v = rng.next_normal();
                std::vector<float> want = gate;
                geglu_scalar(want.data() + offset, up.data() + offset, n);
                geglu(gate.data() + offset, up.data() + offset, n);
                for (int64_t i = 0; i < n; ++i) {
                    ASSERT_NEAR(gate[offset + i], want[offset + i], 1e-5f * (1.0f + std::fabs(want[offset + i])))
                        << target << " n " << n << " i " << i;
                }
            }
        }
    });
    // GELU's tanh form at known points: gelu(1) = 0.841192, gelu(-2) = -0.045402.
    float g[2] = {1.0f, -2.0f};
    const float u[2] = {1.0f, 1.0f};
    geglu_scalar(g, u, 2);
    EXPECT_NEAR(g[0], 0.841192f, 1e-5f);
    EXPECT_NEAR(g[1], -0.045402f, 1e-5f);
}

TEST(Elementwise, SwigluOaiMatchesScalarOnEveryTarget) {
    test::for_each_target([](const char* target) {
        Rng rng(5);
        for (int64_t n : lengths()) {
            for (int offset : {0, 1, 3}) {
                // Beyond the clamp at 7 on both sides, and the gate's negative tail.
                std::vector<float> gate(static_cast<size_t>(n + offset)), up(gate.size());
                for (auto& v : gate) v = rng.next_normal() * 8.0f;
                for (auto& v : up) v = rng.next_normal() * 8.0f;
                std::vector<float> want = gate;
                swiglu_oai_scalar(want.data() + offset, up.data() + offset, n);
                swiglu_oai(gate.data() + offset, up.data() + offset, n);
                for (int64_t i = 0; i < n; ++i) {
                    ASSERT_NEAR(gate[offset + i], want[offset + i], 1e-5f * (1.0f + std::fabs(want[offset + i])))
                        << target << " n " << n << " i " << i;
                }
            }
        }
    });
    // The clamps: min(9, 7) * sigmoid(1.702 * 7) * (clamp(-9) + 1) = 7 * 0.99999... * -6.
    float g[2] = {9.0f, 1.0f};
    const float u[2] = {-9.0f, 0.5f};
    swiglu_oai_scalar(g, u, 2);
    EXPECT_NEAR(g[0], -42.0f * (1.0f / (1.0f + std::exp(-11.914f))), 1e-4f);
    EXPECT_NEAR(g[1], 1.5f / (1.0f + std::exp(-1.702f)), 1e-6f);
}

TEST(Elementwise, SoftCapMatchesScalarOnEveryTarget) {
    test::for_each_target([](const char* target) {
        Rng rng(6);
        for (int64_t n : lengths()) {
            std::vector<float> x(static_cast<size_t>(n));
            for (auto& v : x) v = rng.next_normal() * 60.0f;
            std::vector<float> want = x;
            soft_cap_scalar(want.data(), n, 30.0f);
            soft_cap(x.data(), n, 30.0f);
            for (int64_t i = 0; i < n; ++i) {
                ASSERT_NEAR(x[i], want[i], 1e-5f * (1.0f + std::fabs(want[i]))) << target << " n " << n << " i " << i;
                ASSERT_LE(std::fabs(x[i]), 30.0f);
            }
        }
    });
}

TEST(Elementwise, SoftmaxMatchesScalarOnEveryTarget) {
    test::for_each_target([](const char* target) {
        Rng rng(5);
        for (int64_t n : lengths()) {
            for (int offset : {0, 2}) {
                std::vector<float> x(static_cast<size_t>(n + offset));
                for (auto& v : x) v = rng.next_normal() * 6.0f;
                std::vector<float> want = x;
                softmax_scalar(want.data() + offset, n);
                softmax(x.data() + offset, n);
                double sum = 0.0;
                for (int64_t i = 0; i < n; ++i) {
                    ASSERT_NEAR(x[offset + i], want[offset + i], 1e-6f + 1e-5f * want[offset + i])
                        << target << " n " << n << " i " << i;
                    sum += x[offset + i];
                }
                ASSERT_NEAR(sum, 1.0, 1e-5) << target << " n " << n;
            }
        }
    });
}

// The exact modes need a node's elementwise results not to depend on its
// CPU: swiglu and softmax give the bits of the best target on every other one
// (canonical::exp, padded last vectors, the 16-lane sum), geglu and soft_cap
// on every target with FMA; the exp inside stays within a few ulp of std::exp.
TEST(Elementwise, SwigluAndSoftmaxGiveTheSameBitsOnEveryTarget) {
    Rng rng(9);
    for (int64_t n : lengths()) {
        std::vector<float> gate(static_cast<size_t>(n)), up(gate.size()), scores(gate.size());
        for (size_t i = 0; i < gate.size(); ++i) {
            gate[i] = rng.next_normal() * 4.0f;
            up[i] = rng.next_normal();
            scores[i] = rng.next_normal() * 8.0f;
        }
        // Masked scores (-inf), as causal attention has them.
        if (n > 3) scores[1] = -INFINITY;
        std::vector<float> want_g, want_s;
        std::string first;
        test::for_each_target([&](const char* target) {
            std::vector<float> g = gate, s = scores;
            swiglu(g.data(), up.data(), n);
            softmax(s.data(), n);
            if (first.empty()) {
                first = target;
                want_g = g;
                want_s = s;
                return;
            }
            ASSERT_EQ(0, std::memcmp(g.data(), want_g.data(), g.size() * sizeof(float)))
                << "swiglu n " << n << ": " << target << " != " << first;
            ASSERT_EQ(0, std::memcmp(s.data(), want_s.data(), s.size() * sizeof(float)))
                << "softmax n " << n << ": " << target << " != " << first;
        });
    }
    // silu's exp against std::exp's, in ulp, over a wide range of gates.
    std::vector<float> g, ones;
    for (float v = -80.0f; v <= 80.0f; v += 0.0137f) g.push_back(v);
    ones.assign(g.size(), 1.0f);
    std::vector<float> got = g;
    swiglu(got.data(), ones.data(), static_cast<int64_t>(got.size()));
    for (size_t i = 0; i < g.size(); ++i) {
        const double want = static_cast<double>(g[i]) / (1.0 + std::exp(-static_cast<double>(g[i])));
        ASSERT_NEAR(got[i], want, 4e-7 * std::fabs(want) + 1e-30) << "silu(" << g[i] << ")";
    }
}

}  // namespace tessera
