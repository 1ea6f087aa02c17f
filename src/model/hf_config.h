// A checkpoint's config.json as convert-hf reads it: each field present, of
// its type and in range, or an Error naming the file and the key; and the
// rope_scaling object, of a kind convert-hf can carry (none, linear, Llama
// 3.1's "llama3", YaRN), or refused by name.
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
// high ones kept, a smooth blend between) or "yarn" (gpt-oss: a blend of
// interpolated and kept frequencies, and a larger magnitude); anything else
// (longrope, dynamic) is refused naming it.
struct HfRopeScaling {
    std::string kind;  // "" (none), "linear", "llama3" or "yarn"
    double factor = 1.0, low_freq_factor = 1.0, high_freq_factor = 4.0, original_context = 8192.0;
    double beta_fast = 32.0, beta_slow = 1.0;  // YaRN's
    // YaRN's "truncate" (gpt-oss says false): whether transformers rounds the
    // blend's ends to whole dimensions. llama.cpp always does (ggml's
    // rope_yarn_corr_dims), so false is carried as true: a small difference
    // from transformers, the one llama.cpp makes too.
    bool truncate = true;
};

HfRopeScaling hf_rope_scaling(const nlohmann::json& scaling, const std::string& path);

// llama.cpp's convert_hf_to_gguf.py (LlamaModel, rope_type llama3): per
// rotated pair, the factor its frequency is divided by (rope_freqs.weight).
std::vector<float> llama3_rope_factors(const HfRopeScaling& r, double theta, int64_t head_dim);

}  // namespace tessera
