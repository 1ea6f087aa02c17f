#include "apps/attention_flags.h"

#include "util/error.h"

#include <cstring>

namespace tessera {

void add_attention_flags(CLI::App* cmd, AttentionFlags& flags) {
    cmd->add_option("--cache-type", flags.both, "KV cache type of K and V: f32, f16, q8_0 or q4_0 (default f16)");
    cmd->add_option("--cache-type-k", flags.k, "KV cache type of K (overrides --cache-type); also -ctk");
    cmd->add_option("--cache-type-v", flags.v, "KV cache type of V (overrides --cache-type); also -ctv");
    cmd->add_option("--attention", flags.attention,
                    "dense, or sparse: each query reads a window, global tokens, log-stride positions and block means")
        ->capture_default_str();
    cmd->add_option("--sparse-window", flags.sparse.window, "Sparse: positions before the query read in full")
        ->capture_default_str();
    cmd->add_option("--sparse-block", flags.sparse.block, "Sparse: positions per landmark block")->capture_default_str();
    cmd->add_option("--sparse-globals", flags.sparse.globals, "Sparse: the first N positions every query reads")
        ->capture_default_str();
    cmd->add_option("--sparse-log-stride", flags.log_stride, "Sparse: also read positions 2^k back (on or off)")
        ->capture_default_str();
    cmd->add_option("--sparse-landmarks", flags.landmarks,
                    "Sparse: block means read: all (every block before the window), log (ruvllm's: 2^k blocks back), off")
        ->capture_default_str();
}

const char* long_name_of_llama_short_option(const char* arg) {
    if (std::strcmp(arg, "-ctk") == 0) return "--cache-type-k";
    if (std::strcmp(arg, "-ctv") == 0) return "--cache-type-v";
    if (std::strcmp(arg, "-ngl") == 0) return "--gpu-layers";
    return nullptr;
}

namespace {
QuantType cache_type(const std::string& text, const char* flag) {
    if (text.empty()) return QuantType::F16;
    const std::optional<QuantType> type = parse_quant_type(text);
    if (!type || !is_kv_cache_type(*type)) {
        throw make_error("{} must be f32, f16, q8_0 or q4_0 (got '{}')", flag, text);
    }
    return *type;
}
}  // namespace

KvCacheTypes resolve_cache_types(const AttentionFlags& flags) {
    const QuantType both = cache_type(flags.both, "--cache-type");
    return {flags.k.empty() ? both : cache_type(flags.k, "--cache-type-k"),
            flags.v.empty() ? both : cache_type(flags.v, "--cache-type-v")};
}

SparseOptions resolve_sparse(const AttentionFlags& flags) {
    if (flags.attention != "dense" && flags.attention != "sparse") {
        throw make_error("--attention must be dense or sparse (got '{}')", flags.attention);
    }
    SparseOptions o = flags.sparse;
    o.enabled = flags.attention == "sparse";
    if (flags.log_stride != "on" && flags.log_stride != "off") {
        throw make_error("--sparse-log-stride must be on or off (got '{}')", flags.log_stride);
    }
    o.log_stride = flags.log_stride == "on";
    if (flags.landmarks == "all") {
        o.landmarks = LandmarkMode::kAll;
    } else if (flags.landmarks == "log") {
        o.landmarks = LandmarkMode::kLog;
    } else if (flags.landmarks == "off") {
        o.landmarks = LandmarkMode::kOff;
    } else {
        throw make_error("--sparse-landmarks must be all, log or off (got '{}')", flags.landmarks);
    }
    validate(o);
    return o;
}

}  // namespace tessera
