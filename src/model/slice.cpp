#include "model/slice.h"

#include "util/error.h"

namespace tessera {

const char* moe_split_name(MoeSplit split) {
    switch (split) {
        case MoeSplit::kExperts: return "experts";
        case MoeSplit::kMixed: return "mixed";
        case MoeSplit::kBalanced: return "balanced";
        case MoeSplit::kChannels: break;
    }
    return "channels";
}

std::optional<MoeSplit> parse_moe_split(const std::string& text) {
    if (text == "channels") return MoeSplit::kChannels;
    if (text == "experts") return MoeSplit::kExperts;
    if (text == "mixed") return MoeSplit::kMixed;
    if (text == "balanced") return MoeSplit::kBalanced;
    if (text.empty() || text == "auto") return std::nullopt;
    throw make_error("unknown MoE split '{}' (channels, experts, mixed, balanced or auto)", text);
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
    if (hp.has_experts() && s.n_ffn() > 0 && s.n_experts() == 0) {
        throw make_error("slice {} computes FFN channels of no expert", describe_slice(s));
    }
    if (s.tails.empty()) return;
    if (!hp.has_experts() || s.n_ffn() == 0 || s.tails.size() + 1 > static_cast<size_t>(kMaxExpertParts)) {
        throw make_error("slice {}: further parts need a mixture of experts and a first part, {} at most",
                         describe_slice(s), kMaxExpertParts);
    }
    const std::vector<ExpertPart> parts = expert_parts(s);
    for (size_t i = 0; i < parts.size(); ++i) {
        const ExpertPart& p = parts[i];
        if (p.expert_begin < 0 || p.expert_begin >= p.expert_end || p.expert_end > hp.n_expert || p.ffn_begin < 0 ||
            p.ffn_begin >= p.ffn_end || p.ffn_end > hp.n_ff) {
            throw make_error("slice {} has an empty part or one outside a model of {} experts of {} channels",
                             describe_slice(s), hp.n_expert, hp.n_ff);
        }
        if (p.deal_count < 1 || p.deal_count > kMaxExpertParts || p.deal_index < 0 || p.deal_index >= p.deal_count) {
            throw make_error("slice {}: a part dealt in {} turns cannot take turn {} (1 to {} turns)", describe_slice(s),
                             p.deal_count, p.deal_index, kMaxExpertParts);
        }
        // Each channel of an expert in one part at most: two parts may hold
        // the same experts only in different channels.
        for (size_t j = 0; j < i; ++j) {
            const ExpertPart& q = parts[j];
            if (p.expert_begin < q.expert_end && q.expert_begin < p.expert_end && p.ffn_begin < q.ffn_end &&
                q.ffn_begin < p.ffn_end) {
                throw make_error("slice {}: two parts hold the same channels of the same experts", describe_slice(s));
            }
        }
    }
}

std::vector<ExpertPart> expert_parts(const Slice& s) {
    std::vector<ExpertPart> parts;
    if (s.n_ffn() > 0 && s.n_experts() > 0) parts.push_back({s.expert_begin, s.expert_end, s.ffn_begin, s.ffn_end});
    parts.insert(parts.end(), s.tails.begin(), s.tails.end());
    return parts;
}

std::string describe_slice(const Slice& s) {
    std::string text = fmt::format("layers [{}, {}), KV heads [{}, {}), FFN channels [{}, {})", s.layer_begin,
                                   s.layer_end, s.kv_head_begin, s.kv_head_end, s.ffn_begin, s.ffn_end);
    if (s.n_experts() > 0) text += fmt::format(", experts [{}, {})", s.expert_begin, s.expert_end);
    for (const ExpertPart& t : s.tails) {
        text += fmt::format(" and channels [{}, {}) of experts [{}, {})", t.ffn_begin, t.ffn_end, t.expert_begin,
                            t.expert_end);
        if (t.dealt()) text += fmt::format(" (turn {} of {})", t.deal_index, t.deal_count);
    }
    if (s.n_vocab_rows() > 0) text += fmt::format(", vocab rows [{}, {})", s.vocab_begin, s.vocab_end);
    return text;
}

}  // namespace tessera
