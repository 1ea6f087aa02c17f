// Grammars and JSON schemas are what a request's author writes: any bytes
// as GBNF, and any JSON as a schema, end in a grammar or a GrammarError;
// never a crash, a hang or another exception. A grammar that builds is then
// matched against the input's tail byte by byte (the matcher's UTF-8
// handling, its pool bound and its distance kept consistent).
//
// Input: one mode byte ('g': GBNF, anything else: a JSON schema), the
// grammar or schema, a NUL, and the text to match.
#include "grammar/gbnf_parser.h"
#include "grammar/grammar_matcher.h"
#include "grammar/json_schema_grammar.h"

#include <nlohmann/json.hpp>

#include <memory>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const std::string input(reinterpret_cast<const char*>(data) + 1, size - 1);
    const size_t nul = input.find('\0');
    const std::string source = input.substr(0, nul);
    const std::string text = nul == std::string::npos ? "" : input.substr(nul + 1);
    std::shared_ptr<const tessera::Grammar> grammar;
    try {
        std::string gbnf = source;
        if (data[0] != 'g') {
            nlohmann::ordered_json schema;
            try {
                schema = nlohmann::ordered_json::parse(source);
            } catch (const nlohmann::json::exception&) {
                return 0;
            }
            gbnf = tessera::json_schema_to_gbnf(schema);
        }
        grammar = std::make_shared<const tessera::Grammar>(tessera::parse_gbnf(gbnf));
    } catch (const tessera::GrammarError&) {
        return 0;
    }
    try {
        tessera::GrammarMatcher matcher(grammar, 1 << 16);
        tessera::GrammarState state = matcher.start();
        if (state.dead()) __builtin_trap();  // a checked grammar always has somewhere to start
        for (const char c : text) {
            state = matcher.advance_byte(state, static_cast<uint8_t>(c));
            if (state.dead()) break;
            // A live state can always be completed.
            if (matcher.distance(state) == tessera::kNeverEnds) __builtin_trap();
        }
    } catch (const tessera::GrammarError&) {
        // the pool bound: refused, as serve would
    }
    return 0;
}
