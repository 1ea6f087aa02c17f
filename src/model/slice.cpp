#include "model/slice.h"

#include "util/error.h"

namespace tessera {

const char* moe_split_name(MoeSplit split) {
    switch (split) {
        case MoeSplit::kExperts: return "experts";
        case MoeSplit::kMixed: return "mixed";
        case MoeSplit::kChannels: break;
    }
    return "channels";
}

std::optional<MoeSplit> parse_moe_split(const std::string& text) {
    if (text == "channels") return MoeSplit::kChannels;
    if (text == "experts") return MoeSplit::kExperts;
    if (text == "mixed") return MoeSplit::kMixed;
    if (text.empty() || text == "auto") return std::nullopt;
    throw make_error("unknown MoE split '{}' (channels, experts, mixed or auto)", text);
}

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
    s.expert_begin = 0;
    s.expert_end = hp.n_expert;
    s.embeds = true;
    s.outputs = true;
    return s;
}

void validate_slice(const Slice& s, const ModelHParams& hp) {
    const bool ok = 0 <= s.layer_begin && s.layer_begin <= s.layer_end && s.layer_end <= hp.n_layer &&
                    0 <= s.kv_head_begin && s.kv_head_begin <= s.kv_head_end && s.kv_head_end <= hp.n_head_kv &&
                    0 <= s.ffn_begin && s.ffn_begin <= s.ffn_end && s.ffn_end <= hp.n_ff &&
                    0 <= s.vocab_begin && s.vocab_begin <= s.vocab_end && s.vocab_end <= hp.n_vocab &&
                    0 <= s.expert_begin && s.expert_begin <= s.expert_end && s.expert_end <= hp.n_expert;
    if (!ok) {
        throw make_error("slice {} does not fit a model of {} layers, {} KV heads, {} FFN channels, {} vocab rows{}",
                         describe_slice(s), hp.n_layer, hp.n_head_kv, hp.n_ff, hp.n_vocab,
                         hp.has_experts() ? fmt::format(", {} experts", hp.n_expert) : std::string());
    }
    const bool tail_ok = 0 <= s.tail_expert_begin && s.tail_expert_begin <= s.tail_expert_end &&
                         s.tail_expert_end <= hp.n_expert && 0 <= s.tail_ffn_begin &&
                         s.tail_ffn_begin <= s.tail_ffn_end && s.tail_ffn_end <= hp.n_ff;
    if (!tail_ok) {
        throw make_error("slice {} has a second part outside a model of {} experts of {} channels", describe_slice(s),
                         hp.n_expert, hp.n_ff);
    }
    if (hp.has_experts() && s.n_ffn() > 0 && s.n_experts() == 0) {
        throw make_error("slice {} computes FFN channels of no expert", describe_slice(s));
    }
    if (s.has_tail()) {
        // The forward pass finds an expert's part by its expert alone.
        if (!hp.has_experts() || s.n_ffn() == 0 || (s.tail_expert_begin < s.expert_end && s.expert_begin < s.tail_expert_end)) {
            throw make_error("slice {}: a second part needs a mixture of experts, a first part, and experts of its own",
                             describe_slice(s));
        }
    }
}

std::vector<ExpertPart> expert_parts(const Slice& s) {
    std::vector<ExpertPart> parts;
    if (s.n_ffn() > 0 && s.n_experts() > 0) parts.push_back({s.expert_begin, s.expert_end, s.ffn_begin, s.ffn_end});
    if (s.has_tail()) parts.push_back({s.tail_expert_begin, s.tail_expert_end, s.tail_ffn_begin, s.tail_ffn_end});
    return parts;
}

std::string describe_slice(const Slice& s) {
    std::string text = fmt::format("layers [{}, {}), KV heads [{}, {}), FFN channels [{}, {})", s.layer_begin,
                                   s.layer_end, s.kv_head_begin, s.kv_head_end, s.ffn_begin, s.ffn_end);
    if (s.n_experts() > 0) text += fmt::format(", experts [{}, {})", s.expert_begin, s.expert_end);
    if (s.has_tail()) {
        text += fmt::format(" and channels [{}, {}) of experts [{}, {})", s.tail_ffn_begin, s.tail_ffn_end,
                            s.tail_expert_begin, s.tail_expert_end);
    }
    if (s.n_vocab_rows() > 0) text += fmt::format(", vocab rows [{}, {})", s.vocab_begin, s.vocab_end);
    return text;
}

}  // namespace tessera
