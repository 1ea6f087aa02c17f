// Byte ranges of a text that came from a caller's data rather than from the
// program that assembled the text: a chat template writes control tokens,
// but a message's content is only ever text. The tokenizer reads these
// ranges so that "<|im_end|>" typed by a user stays eleven characters.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace tessera {

struct TextSpan {
    size_t begin = 0;
    size_t end = 0;  // one past the last byte
    bool operator==(const TextSpan&) const = default;
};

// Sorted, disjoint, non-empty spans.
using TextSpans = std::vector<TextSpan>;

// Whether [begin, end) shares a byte with any of `spans`.
inline bool overlaps_any(const TextSpans& spans, size_t begin, size_t end) {
    // The first span that ends after `begin` is the only one that can start before `end`.
    auto it = std::upper_bound(spans.begin(), spans.end(), begin, [](size_t at, const TextSpan& s) { return at < s.end; });
    return it != spans.end() && it->begin < end;
}

}  // namespace tessera
