// The merge loop both BPE flavours share: the text starts as a list of
// characters, and the adjacent pair with the best priority is merged, again
// and again, until no adjacent pair has one. SentencePiece ranks pairs by
// the score of the merged token, GPT-2 by merge rank; both break ties by the
// leftmost pair, so the result does not depend on the queue's internal order.
#pragma once

#include <cstddef>
#include <optional>
#include <queue>
#include <string_view>
#include <vector>

namespace tessera {

// char_length(text, at): bytes of the character starting at `at` (>= 1).
// priority(left, right): how eagerly to merge two adjacent pieces (higher
// first), or nothing if they must not merge. Returns the final pieces.
template <typename CharLength, typename Priority>
std::vector<std::string_view> merge_pairs(std::string_view text, CharLength char_length, Priority priority) {
    // Pieces in a doubly linked list; a piece merged away keeps n == 0.
    struct Symbol {
        int prev;
        int next;
        size_t offset;
        size_t n;
    };
    // `size` is the merged length when queued: if either side changed since, the candidate is stale.
    struct Candidate {
        int left;
        int right;
        double priority;
        size_t size;
    };
    struct Order {
        bool operator()(const Candidate& a, const Candidate& b) const {
            return a.priority < b.priority || (a.priority == b.priority && a.left > b.left);
        }
    };

    std::vector<Symbol> symbols;
    for (size_t at = 0; at < text.size();) {
        const size_t n = char_length(text, at);
        const int index = static_cast<int>(symbols.size());
        symbols.push_back({index - 1, index + 1, at, n});
        at += n;
    }
    if (symbols.empty()) return {};
    symbols.back().next = -1;

    const auto piece = [&](int i) {
        const Symbol& s = symbols[static_cast<size_t>(i)];
        return text.substr(s.offset, s.n);
    };
    std::priority_queue<Candidate, std::vector<Candidate>, Order> queue;
    const auto try_add = [&](int left, int right) {
        if (left < 0 || right < 0) return;
        const std::optional<double> p = priority(piece(left), piece(right));
        if (!p) return;
        queue.push({left, right, *p, symbols[static_cast<size_t>(left)].n + symbols[static_cast<size_t>(right)].n});
    };
    for (int i = 1; i < static_cast<int>(symbols.size()); ++i) try_add(i - 1, i);

    while (!queue.empty()) {
        const Candidate c = queue.top();
        queue.pop();
        Symbol& left = symbols[static_cast<size_t>(c.left)];
        Symbol& right = symbols[static_cast<size_t>(c.right)];
        if (left.n == 0 || right.n == 0 || left.n + right.n != c.size) continue;
        left.n += right.n;
        right.n = 0;
        left.next = right.next;
        if (right.next >= 0) symbols[static_cast<size_t>(right.next)].prev = c.left;
        try_add(left.prev, c.left);
        try_add(c.left, left.next);
    }

    std::vector<std::string_view> pieces;
    for (int i = 0; i >= 0; i = symbols[static_cast<size_t>(i)].next) pieces.push_back(piece(i));
    return pieces;
}

}  // namespace tessera
