#include "model/hf_config.h"

#include "util/error.h"

#include <cmath>

namespace tessera {

bool HfConfig::has(const char* key) const {
    const auto it = j.find(key);
    return it != j.end() && !it->is_null();
}

int64_t HfConfig::integer(const char* key, int64_t lo, int64_t hi) const {
    const auto it = j.find(key);
    if (it == j.end() || !it->is_number_integer()) throw make_error("{}: no integer '{}'", path, key);
    const int64_t v = it->get<int64_t>();
    if (v < lo || v > hi) throw make_error("{}: '{}' is {}, outside [{}, {}]", path, key, v, lo, hi);
    return v;
}

int64_t HfConfig::integer(const char* key, int64_t lo, int64_t hi, int64_t fallback) const {
    return has(key) ? integer(key, lo, hi) : fallback;
}

double HfConfig::number(const char* key, double fallback) const {
    if (!has(key)) return fallback;
    const auto it = j.find(key);
    if (!it->is_number()) throw make_error("{}: '{}' is not a number", path, key);
    return it->get<double>();
}

bool HfConfig::boolean(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    const auto it = j.find(key);
    if (!it->is_boolean()) throw make_error("{}: '{}' is not true or false", path, key);
    return it->get<bool>();
}

HfRopeScaling hf_rope_scaling(const nlohmann::json& scaling, const std::string& path) {
    HfRopeScaling r;
    if (scaling.is_null()) return r;
    if (!scaling.is_object()) throw make_error("{}: rope_scaling is not an object", path);
    const HfConfig s{scaling, path + " rope_scaling"};
    const auto type = scaling.find("rope_type") != scaling.end() ? scaling.find("rope_type") : scaling.find("type");
    const std::string kind = type != scaling.end() && type->is_string() ? type->get<std::string>() : "?";
    r.factor = s.number("factor", 1.0);
    if (!(r.factor >= 1.0 && r.factor <= 1024.0)) throw make_error("{}: rope_scaling factor {} out of [1, 1024]", path, r.factor);
    if (kind == "default") return r;
    if (kind == "linear") {
        r.kind = kind;
        return r;
    }
    if (kind == "llama3") {
        r.kind = kind;
        r.low_freq_factor = s.number("low_freq_factor", 1.0);
        r.high_freq_factor = s.number("high_freq_factor", 4.0);
        r.original_context = s.number("original_max_position_embeddings", 8192.0);
        if (!(r.low_freq_factor > 0 && r.high_freq_factor > r.low_freq_factor && r.original_context >= 1)) {
            throw make_error("{}: llama3 rope_scaling with low_freq_factor {}, high_freq_factor {}, original context {}",
                             path, r.low_freq_factor, r.high_freq_factor, r.original_context);
        }
        return r;
    }
    if (kind == "yarn") {
        r.kind = kind;
        r.original_context = s.number("original_max_position_embeddings", 0.0);
        r.beta_fast = s.number("beta_fast", 32.0);
        r.beta_slow = s.number("beta_slow", 1.0);
        if (!(r.original_context >= 1 && r.original_context <= (1 << 24)) || !(r.beta_fast > 0 && r.beta_slow > 0)) {
            throw make_error("{}: yarn rope_scaling needs original_max_position_embeddings in [1, 2^24] and positive "
                             "beta_fast and beta_slow", path);
        }
        // transformers' attention_factor / mscale / mscale_all_dim change the
        // magnitude llama.cpp's graph derives from the factor alone.
        for (const char* key : {"attention_factor", "mscale", "mscale_all_dim"}) {
            if (s.has(key)) throw make_error("{}: yarn rope_scaling with '{}' is not converted yet", path, key);
        }
        r.truncate = s.boolean("truncate", true);
        return r;
    }
    throw make_error("{}: rope_scaling of type '{}' is not converted yet (none, linear, llama3 and yarn are)", path,
                     kind.substr(0, 40));
}

std::vector<float> llama3_rope_factors(const HfRopeScaling& r, double theta, int64_t head_dim) {
    const double pi = 3.14159265358979323846;
    const double low_wavelen = r.original_context / r.low_freq_factor;
    const double high_wavelen = r.original_context / r.high_freq_factor;
    std::vector<float> factors;
    for (int64_t i = 0; i < head_dim; i += 2) {
        const double freq = 1.0 / std::pow(theta, static_cast<double>(i) / static_cast<double>(head_dim));
        const double wavelen = 2 * pi / freq;
        if (wavelen < high_wavelen) {
            factors.push_back(1.0f);
        } else if (wavelen > low_wavelen) {
            factors.push_back(static_cast<float>(r.factor));
        } else {
            const double smooth = (r.original_context / wavelen - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
            factors.push_back(static_cast<float>(1.0 / ((1 - smooth) / r.factor + smooth)));
        }
    }
    return factors;
}

}  // namespace tessera
