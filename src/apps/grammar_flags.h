// What a generation's output must match, as llama.cpp's flags name it:
// --grammar GBNF, --grammar-file FILE, -j/--json-schema JSON,
// --json-schema-file FILE (at most one of them).
#pragma once

#include "grammar/grammar.h"

#include <CLI/CLI.hpp>

#include <memory>
#include <string>

namespace tessera {

struct GrammarFlags {
    std::string grammar;
    std::string grammar_file;
    std::string json_schema;
    std::string json_schema_file;
};

void add_grammar_flags(CLI::App* cmd, GrammarFlags& flags);

// The grammar the flags give, or null; an Error names the flag and the problem.
std::shared_ptr<const Grammar> resolve_grammar(const GrammarFlags& flags);

}  // namespace tessera
