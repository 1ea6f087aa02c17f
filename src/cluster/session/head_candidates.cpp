#include "cluster/session/head_candidates.h"

#include "util/error.h"
#include "util/little_endian.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace tessera {

namespace {

struct Scored {
    float logit;
    uint32_t column;
};
// The sampler's order: the larger logit first, ties to the lower id.
bool better(const Scored& a, const Scored& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.column < b.column);
}

// How many of the need's tokens fall in [first, first + width), and where they start.
std::span<const int32_t> tokens_in(const LogitsNeed& need, int32_t first, int width) {
    const auto begin = std::lower_bound(need.tokens.begin(), need.tokens.end(), first);
    const auto end = std::lower_bound(begin, need.tokens.end(), first + width);
    return {need.tokens.data() + (begin - need.tokens.begin()), static_cast<size_t>(end - begin)};
}

}  // namespace

void HeldNeed::set(const LogitsNeed* need) {
    const bool same = need == nullptr ? !has_ : has_ && need->top_k == need_.top_k && need->tokens == need_.tokens;
    if (same) return;
    has_ = need != nullptr;
    if (need != nullptr) need_ = *need;
    changed_ = true;
}

bool HeldNeed::take_change(std::vector<uint8_t>& payload) {
    if (!changed_) return false;
    encode_logits_need(get(), payload);
    changed_ = false;
    return true;
}

void encode_logits_need(const LogitsNeed* need, std::vector<uint8_t>& out) {
    out.clear();
    append_u32(out, need != nullptr ? static_cast<uint32_t>(need->top_k) : 0);
    append_u32(out, need != nullptr ? static_cast<uint32_t>(need->tokens.size()) : 0);
    if (need == nullptr) return;
    for (const int32_t t : need->tokens) append_u32(out, static_cast<uint32_t>(t));
}

bool decode_logits_need(std::span<const uint8_t> payload, int32_t n_vocab, LogitsNeed& need, const char* peer) {
    if (payload.size() < 8) throw make_error("{}: logits need of {} bytes is truncated", peer, payload.size());
    const uint32_t top_k = load_u32(payload.data()), count = load_u32(payload.data() + 4);
    if (top_k > static_cast<uint32_t>(LogitsNeed::kMaxTopK) || count > LogitsNeed::kMaxTokens ||
        payload.size() != 8 + 4 * static_cast<uint64_t>(count) || (top_k == 0 && count != 0)) {
        throw make_error("{}: logits need of top {} and {} tokens in {} bytes is out of range", peer, top_k, count,
                         payload.size());
    }
    if (top_k == 0) return false;
    need.top_k = static_cast<int>(top_k);
    need.tokens.resize(count);
    for (uint32_t i = 0; i < count; ++i) {
        const auto t = static_cast<int32_t>(load_u32(payload.data() + 8 + 4 * static_cast<size_t>(i)));
        if (t < 0 || t >= n_vocab || (i > 0 && t <= need.tokens[i - 1])) {
            throw make_error("{}: logits need names token {} (after {}; vocabulary of {})", peer, t,
                             i > 0 ? need.tokens[i - 1] : -1, n_vocab);
        }
        need.tokens[i] = t;
    }
    return true;
}

void encode_candidates(const float* rows, int n_tok, int width, int32_t first, const LogitsNeed& need,
                       std::vector<uint8_t>& out) {
    const std::span<const int32_t> named = tokens_in(need, first, width);
    const size_t k = static_cast<size_t>(need.top_k);
    std::vector<Scored> heap;  // the row's best k so far, the worst of them in front
    heap.reserve(k + 1);
    out.clear();
    append_u32(out, static_cast<uint32_t>(n_tok));
    append_u32(out, static_cast<uint32_t>(width));
    for (int t = 0; t < n_tok; ++t) {
        const float* row = rows + static_cast<size_t>(t) * static_cast<size_t>(width);
        heap.clear();
        size_t next_named = 0;
        for (int c = 0; c < width; ++c) {
            if (next_named < named.size() && named[next_named] - first == c) {
                ++next_named;  // sent whatever its rank
                continue;
            }
            const Scored s{row[c], static_cast<uint32_t>(c)};
            if (heap.size() < k) {
                heap.push_back(s);
                std::push_heap(heap.begin(), heap.end(), better);
            } else if (better(s, heap.front())) {
                std::pop_heap(heap.begin(), heap.end(), better);
                heap.back() = s;
                std::push_heap(heap.begin(), heap.end(), better);
            }
        }
        for (const int32_t id : named) heap.push_back({row[id - first], static_cast<uint32_t>(id - first)});
        std::sort(heap.begin(), heap.end(), [](const Scored& a, const Scored& b) { return a.column < b.column; });
        append_u32(out, static_cast<uint32_t>(heap.size()));
        for (const Scored& s : heap) {
            append_u32(out, s.column);
            uint32_t bits;
            std::memcpy(&bits, &s.logit, 4);
            append_u32(out, bits);
        }
    }
}

void place_candidates(std::span<const uint8_t> payload, int n_tok, int width, int32_t first, const LogitsNeed& need,
                      float* logits, size_t stride, const char* peer) {
    if (payload.size() < 8 || load_u32(payload.data()) != static_cast<uint32_t>(n_tok) ||
        load_u32(payload.data() + 4) != static_cast<uint32_t>(width)) {
        throw make_error("{}: candidate logits of {} bytes where {} rows of {} were due", peer, payload.size(), n_tok,
                         width);
    }
    const uint64_t most = std::min<uint64_t>(static_cast<uint64_t>(width),
                                             static_cast<uint64_t>(need.top_k) + tokens_in(need, first, width).size());
    size_t at = 8;
    for (int t = 0; t < n_tok; ++t) {
        float* row = logits + static_cast<size_t>(t) * stride + static_cast<size_t>(first);
        std::fill_n(row, width, -std::numeric_limits<float>::infinity());
        if (payload.size() - at < 4) throw make_error("{}: candidate logits are truncated at row {}", peer, t);
        const uint32_t count = load_u32(payload.data() + at);
        at += 4;
        if (count > most || payload.size() - at < 8 * static_cast<uint64_t>(count)) {
            throw make_error("{}: {} candidate logits in row {} where at most {} were asked (or the frame ends)", peer,
                             count, t, most);
        }
        int64_t last = -1;
        for (uint32_t i = 0; i < count; ++i, at += 8) {
            const uint32_t column = load_u32(payload.data() + at), bits = load_u32(payload.data() + at + 4);
            float value;
            std::memcpy(&value, &bits, 4);
            if (column >= static_cast<uint32_t>(width) || static_cast<int64_t>(column) <= last) {
                throw make_error("{}: candidate logit at column {} of row {} (after column {}, width {}) is refused",
                                 peer, column, t, last, width);
            }
            if (!std::isfinite(value)) {
                throw make_error("{} sent a non-finite value ({} as the logit of column {} of row {}): refusing its "
                                 "result", peer, static_cast<double>(value), column, t);
            }
            row[column] = value;
            last = column;
        }
    }
    if (at != payload.size()) throw make_error("{}: {} bytes after the candidate logits", peer, payload.size() - at);
}

}  // namespace tessera
