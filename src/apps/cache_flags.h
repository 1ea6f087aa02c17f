// The KV cache type flags of every model-running command, as llama.cpp names
// them: -ctk/--cache-type-k and -ctv/--cache-type-v (f32, f16, q8_0, q4_0),
// and --cache-type for both at once.
#pragma once

#include "attn/kv_cache.h"

#include <CLI/CLI.hpp>

#include <string>

namespace tessera {

struct CacheTypeFlags {
    std::string both;  // --cache-type: K and V, unless one is named on its own
    std::string k;
    std::string v;
};

void add_cache_type_flags(CLI::App* cmd, CacheTypeFlags& flags);

// llama.cpp's names -ctk and -ctv (CLI11 takes only one-letter names after a
// single dash): the long name for an argument that is one, else nullptr.
const char* long_name_of_llama_short_option(const char* arg);

// The types the flags name (f16 for those not given); a name that is not a
// cache type is an error naming its flag.
KvCacheTypes resolve_cache_types(const CacheTypeFlags& flags);

}  // namespace tessera
