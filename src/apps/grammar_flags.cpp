#include "apps/grammar_flags.h"

#include "grammar/gbnf_parser.h"
#include "grammar/json_schema_grammar.h"
#include "util/error.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

namespace tessera {

void add_grammar_flags(CLI::App* cmd, GrammarFlags& flags) {
    cmd->add_option("--grammar", flags.grammar, "Hold the output to this GBNF grammar (llama.cpp's syntax; start rule 'root')");
    cmd->add_option("--grammar-file", flags.grammar_file, "Hold the output to the GBNF grammar in this file");
    cmd->add_option("-j,--json-schema", flags.json_schema,
                    "Hold the output to JSON that validates against this JSON schema ('{}': any JSON value)");
    cmd->add_option("--json-schema-file", flags.json_schema_file, "Hold the output to the JSON schema in this file");
}

namespace {

std::string read_file(const std::string& path, const char* flag) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw make_error("{} {}: cannot read the file", flag, path);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

}  // namespace

std::shared_ptr<const Grammar> resolve_grammar(const GrammarFlags& flags) {
    const int given = !flags.grammar.empty() + !flags.grammar_file.empty() + !flags.json_schema.empty() +
                      !flags.json_schema_file.empty();
    if (given == 0) return nullptr;
    if (given > 1) throw make_error("give one of --grammar, --grammar-file, --json-schema and --json-schema-file");
    const char* flag = !flags.grammar.empty()        ? "--grammar"
                       : !flags.grammar_file.empty() ? "--grammar-file"
                       : !flags.json_schema.empty()  ? "--json-schema"
                                                     : "--json-schema-file";
    try {
        std::string gbnf;
        if (!flags.grammar.empty()) gbnf = flags.grammar;
        if (!flags.grammar_file.empty()) gbnf = read_file(flags.grammar_file, flag);
        if (!flags.json_schema.empty() || !flags.json_schema_file.empty()) {
            const std::string text = !flags.json_schema.empty() ? flags.json_schema : read_file(flags.json_schema_file, flag);
            nlohmann::ordered_json schema;
            try {
                schema = nlohmann::ordered_json::parse(text);
            } catch (const nlohmann::json::exception& e) {
                throw GrammarError(std::string("not valid JSON: ") + e.what());
            }
            gbnf = json_schema_to_gbnf(schema);
        }
        return std::make_shared<const Grammar>(parse_gbnf(gbnf));
    } catch (const GrammarError& e) {
        throw make_error("{}: {}", flag, e.what());
    }
}

}  // namespace tessera
