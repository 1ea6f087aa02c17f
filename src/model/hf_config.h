// A checkpoint's config.json as convert-hf reads it: each field present, of
// its type and in range, or an Error naming the file and the key; and the
// rope_scaling object, of a kind convert-hf can carry (none, linear, Llama
// 3.1's "llama3"), or refused by name.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

struct HfConfig {
    const nlohmann::json& j;
    std::string path;

    bool has(const char* key) const;
    int64_t integer(const char* key, int64_t lo, int64_t hi) const;
    int64_t integer(const char* key, int64_t lo, int64_t hi, int64_t fallback) const;
    double number(const char* key, double fallback) const;
    bool boolean(const char* key, bool fallback) const;
};

// config.json's rope_scaling: none, "linear" (positions divided by the
// factor), "llama3" (Llama 3.1+: low frequencies divided by the factor,
// high ones kept, a smooth blend between); anything else (YaRN, longrope)
// is refused naming it.
struct HfRopeScaling {
    std::string kind;  // "" (none), "linear" or "llama3"
    double factor = 1.0, low_freq_factor = 1.0, high_freq_factor = 4.0, original_context = 8192.0;
};

HfRopeScaling hf_rope_scaling(const nlohmann::json& scaling, const std::string& path);

// llama.cpp's convert_hf_to_gguf.py (LlamaModel, rope_type llama3): per
// rotated pair, the factor its frequency is divided by (rope_freqs.weight).
std::vector<float> llama3_rope_factors(const HfRopeScaling& r, double theta, int64_t head_dim);

}  // namespace tessera
