// How attention runs, the flags every model-running command shares:
//   - the KV cache types, as llama.cpp names them: -ctk/--cache-type-k and
//     -ctv/--cache-type-v (f32, f16, q8_0, q4_0), --cache-type for both;
//   - sparse attention (attn/sparse_pattern.h): --attention dense|sparse,
//     --sparse-window, --sparse-block, --sparse-globals, --sparse-log-stride
//     on|off, --sparse-landmarks all|log|off.
#pragma once

#include "attn/kv_cache.h"
#include "attn/sparse_pattern.h"

#include <CLI/CLI.hpp>

#include <string>

namespace tessera {

struct AttentionFlags {
    std::string both;  // --cache-type: K and V, unless one is named on its own
    std::string k;
    std::string v;
    std::string attention = "dense";
    SparseOptions sparse;  // window, block, globals as given
    std::string log_stride = "on";
    std::string landmarks = "all";
};

void add_attention_flags(CLI::App* cmd, AttentionFlags& flags);

// llama.cpp's names -ctk and -ctv (CLI11 takes only one-letter names after a
// single dash): the long name for an argument that is one, else nullptr.
const char* long_name_of_llama_short_option(const char* arg);

// The types the flags name (f16 for those not given); a name that is not a
// cache type is an error naming its flag.
KvCacheTypes resolve_cache_types(const AttentionFlags& flags);

// The sparse options the flags name (disabled for --attention dense); a
// value out of range is an error naming its flag.
SparseOptions resolve_sparse(const AttentionFlags& flags);

}  // namespace tessera
