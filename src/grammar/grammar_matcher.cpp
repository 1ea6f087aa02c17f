#include "grammar/grammar_matcher.h"

#include <algorithm>

namespace tessera {

namespace {

size_t mix(size_t h, uint64_t v) {
    v *= 0x9e3779b97f4a7c15ull;
    v ^= v >> 29;
    return (h ^ static_cast<size_t>(v)) * 0x100000001b3ull;
}

uint32_t add_or_never_ends(uint32_t a, uint32_t b) { return a >= kNeverEnds - b ? kNeverEnds : a + b; }

void sort_unique(std::vector<int32_t>& v) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
}

}  // namespace

size_t GrammarStateHash::operator()(const GrammarState& s) const {
    size_t h = mix(0xcbf29ce484222325ull, (static_cast<uint64_t>(s.partial) << 16) | (s.length << 8) | s.pending);
    for (const int32_t stack : s.stacks) h = mix(h, static_cast<uint32_t>(stack));
    return h;
}

size_t GrammarMatcher::FrameKeyHash::operator()(const FrameKey& k) const {
    size_t h = mix(0xcbf29ce484222325ull, (static_cast<uint64_t>(k.rule) << 32) | k.alt);
    return mix(h, (static_cast<uint64_t>(k.index) << 32) | static_cast<uint32_t>(k.parent));
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar, size_t max_frames, size_t max_stacks)
    : grammar_(std::move(grammar)), max_frames_(max_frames), max_stacks_(max_stacks) {
    if (grammar_->min_length.size() != grammar_->rules.size()) {
        throw GrammarError("internal: the grammar was not checked (check_grammar) before matching");
    }
}

int32_t GrammarMatcher::intern(uint32_t rule, uint32_t alt, uint32_t index, int32_t parent) {
    if (index == grammar_->rules[rule].alternatives[alt].size()) return parent;
    const FrameKey key{rule, alt, index, parent};
    const auto it = interned_.find(key);
    if (it != interned_.end()) return it->second;
    if (frames_.size() >= max_frames_) {
        throw GrammarError("the grammar needs more than " + std::to_string(max_frames_) +
                           " parse positions: it is too ambiguous or nests too deep");
    }
    const uint32_t below = parent == kDone ? 0 : frames_[static_cast<size_t>(parent)].distance;
    const auto id = static_cast<int32_t>(frames_.size());
    frames_.push_back({rule, alt, index, parent, add_or_never_ends(grammar_->suffix[rule][alt][index], below)});
    interned_.emplace(key, id);
    return id;
}

const GrammarElement& GrammarMatcher::top_element(int32_t stack) const {
    const Frame& f = frames_[static_cast<size_t>(stack)];
    return grammar_->rules[f.rule].alternatives[f.alt][f.index];
}

int32_t GrammarMatcher::after_top(int32_t stack) {
    const Frame f = frames_[static_cast<size_t>(stack)];
    return intern(f.rule, f.alt, f.index + 1, f.parent);
}

void GrammarMatcher::expand_into(int32_t stack, std::vector<int32_t>& out, int depth) {
    if (stack == kDone) {
        out.push_back(kDone);
        return;
    }
    const GrammarElement& top = top_element(stack);
    if (top.kind == GrammarElement::Kind::kChars) {
        out.push_back(stack);
        return;
    }
    // check_grammar refused left recursion, so this depth is bounded by the
    // chain of rules that can begin one another; the guard keeps a bug from
    // becoming a stack overflow.
    if (depth > 100000) throw GrammarError("internal: grammar expansion too deep");
    const uint32_t rule = top.rule;
    const int32_t continuation = after_top(stack);
    const size_t n = grammar_->rules[rule].alternatives.size();
    for (size_t a = 0; a < n; ++a) {
        expand_into(intern(rule, static_cast<uint32_t>(a), 0, continuation), out, depth + 1);
    }
}

const std::vector<int32_t>& GrammarMatcher::expand(int32_t stack) {
    const auto it = expanded_.find(stack);
    if (it != expanded_.end()) return it->second;
    std::vector<int32_t> out;
    expand_into(stack, out, 0);
    sort_unique(out);
    return expanded_.emplace(stack, std::move(out)).first->second;
}

GrammarState GrammarMatcher::start() {
    GrammarState state;
    const uint32_t root = grammar_->root;
    for (size_t a = 0; a < grammar_->rules[root].alternatives.size(); ++a) {
        const std::vector<int32_t>& stacks = expand(intern(root, static_cast<uint32_t>(a), 0, kDone));
        state.stacks.insert(state.stacks.end(), stacks.begin(), stacks.end());
    }
    sort_unique(state.stacks);
    refuse_too_many(state.stacks.size());
    return state;
}

void GrammarMatcher::refuse_too_many(size_t stacks) const {
    if (stacks > max_stacks_) {
        throw GrammarError("the grammar is too ambiguous: more than " + std::to_string(max_stacks_) +
                           " ways to parse the text at one point");
    }
}

void GrammarMatcher::advance_code_point(const GrammarState& state, uint32_t cp, GrammarState& out) {
    scratch_.clear();
    for (const int32_t stack : state.stacks) {
        if (stack == kDone || !top_element(stack).matches(cp)) continue;
        const std::vector<int32_t>& next = expand(after_top(stack));
        scratch_.insert(scratch_.end(), next.begin(), next.end());
    }
    sort_unique(scratch_);
    refuse_too_many(scratch_.size());
    out.stacks.assign(scratch_.begin(), scratch_.end());
    out.partial = 0;
    out.pending = 0;
    out.length = 0;
}

void GrammarMatcher::advance_byte_into(const GrammarState& state, uint8_t byte, GrammarState& out) {
    uint32_t partial = 0;
    uint8_t pending = 0;
    uint8_t length = 0;
    if (state.pending == 0) {
        if (byte < 0x80) {
            advance_code_point(state, byte, out);
            return;
        }
        if (byte >= 0xc2 && byte <= 0xdf) {
            partial = byte & 0x1fu, length = 2;
        } else if (byte >= 0xe0 && byte <= 0xef) {
            partial = byte & 0x0fu, length = 3;
        } else if (byte >= 0xf0 && byte <= 0xf4) {
            partial = byte & 0x07u, length = 4;
        } else {
            out.stacks.clear();  // not the first byte of a UTF-8 character
            return;
        }
        pending = static_cast<uint8_t>(length - 1);
    } else {
        if ((byte & 0xc0) != 0x80) {
            out.stacks.clear();
            return;
        }
        partial = (state.partial << 6) | (byte & 0x3fu);
        pending = static_cast<uint8_t>(state.pending - 1);
        length = state.length;
    }
    // The code points these bytes can still begin, without the overlong
    // forms (a shorter encoding exists), surrogates or values past U+10FFFF
    // that UTF-8 forbids.
    static constexpr uint32_t kLowest[5] = {0, 0, 0x80, 0x800, 0x10000};
    static constexpr uint32_t kHighest[5] = {0, 0, 0x7ff, 0xffff, 0x10ffff};
    const unsigned shift = 6u * pending;
    const uint32_t first = std::max(partial << shift, kLowest[length]);
    const uint32_t last = std::min(partial << shift | ((1u << shift) - 1u), kHighest[length]);
    if (first > last || (first >= 0xd800 && last <= 0xdfff)) {
        out.stacks.clear();
        return;
    }
    if (pending == 0) {
        advance_code_point(state, partial, out);
        return;
    }
    // A character begun: keep the stacks that some character with these
    // first bytes could still satisfy.
    out.stacks.clear();
    for (const int32_t stack : state.stacks) {
        if (stack != kDone && top_element(stack).may_match(first, last)) out.stacks.push_back(stack);
    }
    out.partial = partial;
    out.pending = pending;
    out.length = length;
}

GrammarState GrammarMatcher::advance_byte(const GrammarState& state, uint8_t byte) {
    GrammarState out;
    advance_byte_into(state, byte, out);
    return out;
}

uint32_t GrammarMatcher::distance(const GrammarState& state) const {
    uint32_t best = kNeverEnds;
    for (const int32_t stack : state.stacks) {
        const uint32_t d = stack == kDone ? 0 : frames_[static_cast<size_t>(stack)].distance;
        best = std::min(best, d);
    }
    return best;
}

}  // namespace tessera
