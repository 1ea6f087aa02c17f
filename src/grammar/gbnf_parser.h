// llama.cpp's GBNF grammar text read into a Grammar: rules `name ::= ...`,
// "literals", [character classes] with ranges and ^, `.`, ( groups ), and
// the repetitions *, +, ?, {m}, {m,}, {m,n}; # comments. The text is hostile
// input (a request's "grammar" field): its size, the rules and elements it
// expands to and the nesting of groups are bounded, and every error names
// the line and what was expected.
#pragma once

#include "grammar/grammar.h"

#include <string_view>

namespace tessera {

struct GrammarLimits {
    size_t max_text_bytes = 1024 * 1024;
    size_t max_rules = 20000;
    size_t max_elements = 400000;  // after repetitions are expanded
    int max_repetition = 1000;     // the largest m or n of {m,n}
    int max_nesting = 64;          // groups within groups
};

// Parses and checks (check_grammar) a grammar whose start rule is `root`.
// Throws GrammarError.
Grammar parse_gbnf(std::string_view text, const GrammarLimits& limits = {});

}  // namespace tessera
