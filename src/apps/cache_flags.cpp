#include "apps/cache_flags.h"

#include "util/error.h"

#include <cstring>

namespace tessera {

void add_cache_type_flags(CLI::App* cmd, CacheTypeFlags& flags) {
    cmd->add_option("--cache-type", flags.both, "KV cache type of K and V: f32, f16, q8_0 or q4_0 (default f16)");
    cmd->add_option("--cache-type-k", flags.k, "KV cache type of K (overrides --cache-type); also -ctk");
    cmd->add_option("--cache-type-v", flags.v, "KV cache type of V (overrides --cache-type); also -ctv");
}

const char* long_name_of_llama_short_option(const char* arg) {
    if (std::strcmp(arg, "-ctk") == 0) return "--cache-type-k";
    if (std::strcmp(arg, "-ctv") == 0) return "--cache-type-v";
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

KvCacheTypes resolve_cache_types(const CacheTypeFlags& flags) {
    const QuantType both = cache_type(flags.both, "--cache-type");
    return {flags.k.empty() ? both : cache_type(flags.k, "--cache-type-k"),
            flags.v.empty() ? both : cache_type(flags.v, "--cache-type-v")};
}

}  // namespace tessera
