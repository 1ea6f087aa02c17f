// A small, fast, seedable generator with the same sequence on every platform
// (std:: distributions are not portable across standard libraries, and
// "same seed, same output" and "same arguments, same bytes" depend on it).
#pragma once

#include <cmath>
#include <cstdint>

namespace tessera {

class Rng {
public:
    explicit Rng(uint64_t seed) : state_(seed) {}

    // splitmix64: passes BigCrush, one multiply-xorshift chain per draw.
    uint64_t next_u64() {
        uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }

    // Uniform in [0, 1) with 24 bits of precision.
    float next_float() { return static_cast<float>(next_u64() >> 40) * (1.0f / 16777216.0f); }

    // Standard normal via Box-Muller (one value per call; the pair's twin is dropped
    // to keep the sequence a pure function of the draw count).
    float next_normal() {
        const float u1 = (static_cast<float>(next_u64() >> 40) + 1.0f) * (1.0f / 16777217.0f);
        const float u2 = next_float();
        return std::sqrt(-2.0f * std::log(u1)) * std::cos(6.28318530718f * u2);
    }

private:
    uint64_t state_;
};

}  // namespace tessera
