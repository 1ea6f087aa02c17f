#include "model/hf_family_keys.h"

#include "model/gguf_writer.h"
#include "util/error.h"

#include <cmath>

namespace tessera {

namespace {

// Gemma 3's sliding-window period: sliding_window_pattern, or the period of
// layer_types (newer configs), whose last layer of each period is global.
int64_t gemma3_window_period(const HfConfig& c, int64_t n_layer) {
    const auto types = c.j.find("layer_types");
    if (types == c.j.end() || types->is_null()) return c.integer("sliding_window_pattern", 1, 4096, 6);
    if (!types->is_array() || static_cast<int64_t>(types->size()) != n_layer) {
        throw make_error("{}: layer_types is not a list of {} layer types", c.path, n_layer);
    }
    int64_t period = 0;
    for (int64_t l = 0; l < n_layer && period == 0; ++l) {
        if ((*types)[static_cast<size_t>(l)] == "full_attention") period = l + 1;
    }
    if (period == 0) period = n_layer + 1;  // no global layer
    for (int64_t l = 0; l < n_layer; ++l) {
        const bool global = l % period == period - 1;
        if ((*types)[static_cast<size_t>(l)] != (global ? "full_attention" : "sliding_attention")) {
            throw make_error("{}: layer_types is not periodic (every {}th layer global), as llama.cpp's gemma3 graph "
                             "needs it: layer {} breaks it", c.path, period, l);
        }
    }
    return period;
}

}  // namespace

// What Gemma's GGUF says beyond Llama's: soft caps, the sliding window and
// (Gemma 3) its period and the local layers' RoPE base. Refuses what
// llama.cpp's gemma graphs cannot compute as HF does.
void write_gemma_keys(const HfConfig& c, const HfDims& d, const HfFamily& family, GgufWriter& w) {
    const std::string p = std::string(family.gguf) + ".";
    const bool gemma3 = family.kind == HfFamilyKind::kGemma3;
    for (const char* key : {"hidden_activation", "hidden_act"}) {
        const auto it = c.j.find(key);
        if (it != c.j.end() && !it->is_null() && *it != "gelu_pytorch_tanh") {
            throw make_error("{}: {} '{}': llama.cpp's gemma graph computes gelu_pytorch_tanh", c.path, key,
                             it->dump().substr(0, 40));
        }
    }
    // The graph scales queries by 1/sqrt(head_dim), or by 1/sqrt(n_embd /
    // n_head) for the 27B shapes it recognizes by their layer count.
    const int64_t wide_layers = gemma3 ? 62 : 46;
    const double used = d.n_layer == wide_layers ? static_cast<double>(d.n_embd / d.n_head) : static_cast<double>(d.head_dim);
    const double scalar = c.number("query_pre_attn_scalar", used);
    if (std::abs(scalar - used) > 1e-6) {
        throw make_error("{}: query_pre_attn_scalar {}: llama.cpp's {} graph scales queries by 1/sqrt({}) for {} layers",
                         c.path, scalar, family.gguf, used, d.n_layer);
    }
    const auto cap = [&](const char* key, double fallback) {
        const double v = c.number(key, fallback);
        if (!(v > 0.0 && v < 1e6)) throw make_error("{}: {} {} is not a usable soft cap", c.path, key, v);
        w.set_f32(p + key, static_cast<float>(v));
    };
    if (!gemma3) {
        // Gemma 2: both caps, a window on every other layer from the first.
        if (!c.has("attn_logit_softcapping") || !c.has("final_logit_softcapping")) {
            throw make_error("{}: a Gemma 2 without attn_logit_softcapping and final_logit_softcapping", c.path);
        }
        cap("attn_logit_softcapping", 50.0);
        cap("final_logit_softcapping", 30.0);
        w.set_u32(p + "attention.sliding_window", static_cast<uint32_t>(c.integer("sliding_window", 1, 1 << 24, 4096)));
        return;
    }
    if (c.has("attn_logit_softcapping")) {
        throw make_error("{}: a Gemma 3 with attn_logit_softcapping (llama.cpp's gemma3 graph has none)", c.path);
    }
    if (c.has("final_logit_softcapping")) cap("final_logit_softcapping", 30.0);
    const int64_t period = gemma3_window_period(c, d.n_layer);
    if (period != 1) {
        w.set_u32(p + "attention.sliding_window", static_cast<uint32_t>(c.integer("sliding_window", 1, 1 << 24)));
        w.set_u32(p + "attention.sliding_window_pattern", static_cast<uint32_t>(period));
        const double local = c.number("rope_local_base_freq", 10000.0);
        if (!(local > 1.0 && local < 1e12)) throw make_error("{}: rope_local_base_freq {} out of (1, 1e12)", c.path, local);
        w.set_f32(p + "rope.freq_base_swa", static_cast<float>(local));
    }
}

// What llama.cpp's gpt-oss graph computes, and the checkpoint must say:
// the clamped SwiGLU at 7, a window on every other layer from the first, the
// experts in MXFP4 (the released form; a dequantized checkpoint keeps its
// experts transposed and is not converted).
void check_gpt_oss(const HfConfig& c, const HfDims& d) {
    if (const double limit = c.number("swiglu_limit", 7.0); limit != 7.0) {
        throw make_error("{}: swiglu_limit {}: llama.cpp's gpt-oss graph clamps at 7", c.path, limit);
    }
    const auto q = c.j.find("quantization_config");
    if (q == c.j.end() || !q->is_object() || q->value("quant_method", "") != "mxfp4") {
        throw make_error("{}: a gpt-oss checkpoint without quantization_config.quant_method \"mxfp4\": convert-hf "
                         "reads the released MXFP4 experts only", c.path);
    }
    if (const auto types = c.j.find("layer_types"); types != c.j.end() && !types->is_null()) {
        if (!types->is_array() || static_cast<int64_t>(types->size()) != d.n_layer) {
            throw make_error("{}: layer_types is not a list of {} layer types", c.path, d.n_layer);
        }
        for (int64_t l = 0; l < d.n_layer; ++l) {
            if ((*types)[static_cast<size_t>(l)] != (l % 2 == 0 ? "sliding_attention" : "full_attention")) {
                throw make_error("{}: layer_types: layer {} breaks the pattern llama.cpp's gpt-oss graph has (a "
                                 "window on every other layer, from the first)", c.path, l);
            }
        }
    }
    if (d.n_embd % 32 != 0 || d.n_ff_expert % 32 != 0) {
        throw make_error("{}: widths {} and {} are not whole MXFP4 blocks of 32", c.path, d.n_embd, d.n_ff_expert);
    }
}

}  // namespace tessera
