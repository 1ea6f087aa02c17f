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
    s.vocab_begin = 0;
    s.vocab_end = hp.n_vocab;
    s.embeds = true;
    s.outputs = true;
    return s;
}

void validate_slice(const Slice& s, const ModelHParams& hp) {
    const bool ok = 0 <= s.layer_begin && s.layer_begin <= s.layer_end && s.layer_end <= hp.n_layer &&
                    0 <= s.kv_head_begin && s.kv_head_begin <= s.kv_head_end && s.kv_head_end <= hp.n_head_kv &&
                    0 <= s.ffn_begin && s.ffn_begin <= s.ffn_end && s.ffn_end <= hp.n_ff &&
                    0 <= s.vocab_begin && s.vocab_begin <= s.vocab_end && s.vocab_end <= hp.n_vocab;
    if (!ok) {
        throw make_error("slice {} does not fit a model of {} layers, {} KV heads, {} FFN channels, {} vocab rows",
                         describe_slice(s), hp.n_layer, hp.n_head_kv, hp.n_ff, hp.n_vocab);
    }
}

std::string describe_slice(const Slice& s) {
    std::string text = fmt::format("layers [{}, {}), KV heads [{}, {}), FFN channels [{}, {})", s.layer_begin,
                                   s.layer_end, s.kv_head_begin, s.kv_head_end, s.ffn_begin, s.ffn_end);
    if (s.n_vocab_rows() > 0) text += fmt::format(", vocab rows [{}, {})", s.vocab_begin, s.vocab_end);
    return text;
}

}  // namespace tessera
