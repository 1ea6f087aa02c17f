// Where a text stands in a grammar: the set of parse stacks still alive
// after its code points (llama.cpp's pushdown matcher). A stack is a chain of
// positions "next element of this alternative", innermost on top; its top is
// always a character set, or the stack is empty (the text is complete).
// Stacks are hash-consed into one pool of frames, so a stack is one integer,
// pushing and popping allocate nothing once seen, and a set of stacks is a
// short sorted vector: cheap to advance over the thousands of prefixes a
// vocabulary walk tries, and cheap to compare and hash as a cache key.
#pragma once

#include "grammar/grammar.h"

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

namespace tessera {

// The position after some bytes: the live stacks (kDone, -1, stands for a
// complete text) and the UTF-8 character begun but not finished.
struct GrammarState {
    std::vector<int32_t> stacks;  // sorted, unique
    uint32_t partial = 0;         // the bits of the unfinished character so far
    uint8_t pending = 0;          // its continuation bytes still to come
    uint8_t length = 0;           // its length in bytes (2 to 4), while pending

    bool dead() const { return stacks.empty(); }
    bool operator==(const GrammarState&) const = default;
};

struct GrammarStateHash {
    size_t operator()(const GrammarState& s) const;
};

class GrammarMatcher {
public:
    static constexpr int32_t kDone = -1;

    // Fails (GrammarError) when the pool of frames grows past max_frames: a
    // grammar ambiguous enough to need more is refused rather than allowed to
    // take the server's memory.
    // So is a position with more than max_stacks live parses (a grammar
    // whose alternatives overlap that much would make every step slow).
    explicit GrammarMatcher(std::shared_ptr<const Grammar> grammar, size_t max_frames = 1 << 22,
                            size_t max_stacks = 4096);

    // Before any text: the root's alternatives expanded.
    GrammarState start();
    // After one more byte; dead() when no stack accepts it (or the bytes are
    // not UTF-8).
    GrammarState advance_byte(const GrammarState& state, uint8_t byte);
    void advance_byte_into(const GrammarState& state, uint8_t byte, GrammarState& out);
    // True when the text so far is a complete match (generation may end).
    static bool accepting(const GrammarState& state) {
        return state.pending == 0 && !state.stacks.empty() && state.stacks.front() == kDone;
    }
    // True when the text is complete and nothing more may follow.
    static bool finished(const GrammarState& state) {
        return accepting(state) && state.stacks.size() == 1;
    }
    // The fewest code points that complete the text (0 when accepting;
    // kNeverEnds for a dead state); a character begun counts as one.
    uint32_t distance(const GrammarState& state) const;

    const Grammar& grammar() const { return *grammar_; }
    size_t frames() const { return frames_.size(); }

private:
    struct Frame {
        uint32_t rule, alt, index;
        int32_t parent;
        uint32_t distance;  // suffix of this alternative + the parent's distance
    };
    int32_t intern(uint32_t rule, uint32_t alt, uint32_t index, int32_t parent);
    // The stack after its top's element: the next position, or the parent
    // when the alternative ends there (so right recursion does not grow it).
    int32_t after_top(int32_t stack);
    // The stacks a stack expands to until each top is a character set.
    const std::vector<int32_t>& expand(int32_t stack);
    void expand_into(int32_t stack, std::vector<int32_t>& out, int depth);
    void advance_code_point(const GrammarState& state, uint32_t cp, GrammarState& out);
    const GrammarElement& top_element(int32_t stack) const;
    void refuse_too_many(size_t stacks) const;

    std::shared_ptr<const Grammar> grammar_;
    size_t max_frames_;
    size_t max_stacks_;
    std::vector<Frame> frames_;
    struct FrameKey {
        uint32_t rule, alt, index;
        int32_t parent;
        bool operator==(const FrameKey&) const = default;
    };
    struct FrameKeyHash {
        size_t operator()(const FrameKey& k) const;
    };
    std::unordered_map<FrameKey, int32_t, FrameKeyHash> interned_;
    std::unordered_map<int32_t, std::vector<int32_t>> expanded_;
    std::vector<int32_t> scratch_;
};

}  // namespace tessera
