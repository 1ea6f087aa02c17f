// A context-free grammar over Unicode code points, as llama.cpp's GBNF
// describes one: rules of alternatives, each a sequence of character sets and
// references to rules. Repetitions (*, +, ?, {m,n}) are already expanded into
// helper rules, so a sequence holds only those two kinds of element.
#pragma once

#include "util/error.h"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace tessera {

// What a grammar or a JSON schema could not be turned into: an error the
// request's author caused, reported to them (an HTTP 400 in serve).
class GrammarError : public Error {
public:
    explicit GrammarError(const std::string& message) : Error(message) {}
};

struct CodePointRange {
    uint32_t first = 0;
    uint32_t last = 0;  // inclusive
};

struct GrammarElement {
    enum class Kind : uint8_t { kChars, kRule };
    Kind kind = Kind::kChars;
    // kChars: the code points in `ranges`, or (negated) every code point
    // outside them; "." is a negated empty set.
    bool negated = false;
    std::vector<CodePointRange> ranges;
    uint32_t rule = 0;  // kRule: an index into Grammar::rules

    bool matches(uint32_t cp) const;
    // Whether some code point in [first, last] matches: a character whose
    // first UTF-8 bytes are known lies in such a span.
    bool may_match(uint32_t first, uint32_t last) const;
};

using GrammarSequence = std::vector<GrammarElement>;

struct GrammarRule {
    std::string name;
    std::vector<GrammarSequence> alternatives;
};

inline constexpr uint32_t kNeverEnds = std::numeric_limits<uint32_t>::max();

struct Grammar {
    std::vector<GrammarRule> rules;
    uint32_t root = 0;
    // Filled by check_grammar: the fewest code points each rule matches
    // (kNeverEnds for a rule that matches no finite text), and for every
    // alternative the fewest that complete it from each of its elements
    // (suffix[rule][alt][i], i = 0..size; suffix[..][size] = 0).
    std::vector<uint32_t> min_length;
    std::vector<std::vector<std::vector<uint32_t>>> suffix;

    size_t element_count() const;
};

// Checks what the matcher needs and fills min_length and suffix: every
// referenced rule defined, no left recursion (a rule reaching itself before
// any character), and the root able to match some finite text. Throws
// GrammarError naming the rule at fault.
void check_grammar(Grammar& grammar);

// The grammar as GBNF text (one rule per line), for messages and tests.
std::string grammar_to_gbnf(const Grammar& grammar);

}  // namespace tessera
