#include "model/slice.h"

#include "util/error.h"

namespace tessera {

Slice full_slice(const ModelHParams& hp) {
    Slice s;
    s.layer_begin = 0;
    s.layer_end = hp.n_layer;
    s.kv_head_begin = 0;
    s.kv_head_end = hp.n_head_kv;
    s.ffn_begin = 0;
    s.ffn_end = hp.n_ff;
    s.embeds = true;
    s.outputs = true;
    return s;
}

void validate_slice(const Slice& s, const ModelHParams& hp) {
    const bool ok = 0 <= s.layer_begin && s.layer_begin <= s.layer_end && s.layer_end <= hp.n_layer &&
                    0 <= s.kv_head_begin && s.kv_head_begin <= s.kv_head_end && s.kv_head_end <= hp.n_head_kv &&
                    0 <= s.ffn_begin && s.ffn_begin <= s.ffn_end && s.ffn_end <= hp.n_ff;
    if (!ok) {
        throw make_error("slice {} does not fit a model of {} layers, {} KV heads, {} FFN channels", describe_slice(s),
                         hp.n_layer, hp.n_head_kv, hp.n_ff);
    }
}

std::string describe_slice(const Slice& s) {
    return fmt::format("layers [{}, {}), KV heads [{}, {}), FFN channels [{}, {})", s.layer_begin, s.layer_end,
                       s.kv_head_begin, s.kv_head_end, s.ffn_begin, s.ffn_end);
}

}  // namespace tessera
