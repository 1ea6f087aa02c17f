// `tessera run` held to a JSON schema or a GBNF grammar: on a random-weight
// model the text is JSON of the schema, the same bits on one node,
// `--local 2 --exact` and a 2-stage pipeline (greedy and sampled), and a bad
// schema or grammar is an error naming its flag.
#include "tessera_cli.h"
#include "test_paths.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace tessera {
namespace {

const char* const kSchema = R"({"type": "object", "properties": {"name": {"type": "string", "maxLength": 20},
  "size": {"type": "integer"}, "parts": {"type": "array", "items": {"enum": ["wheel", "door"]}, "maxItems": 4}},
  "required": ["name", "size", "parts"]})";

nlohmann::json structured_json(const std::string& model, const std::vector<std::string>& extra) {
    std::vector<std::string> args =
        test::tessera_cmd({"run", "-m", model, "-p", "A car:", "-n", "150", "--json", "--json-schema", kSchema});
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = test::run_process(args, 120);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json();
}

TEST(StructuredCli, SchemaOutputIsTheSameOnEveryPlan) {
    const std::string model = test::write_small_model(test::test_dir("structured_cli"), "model.gguf", 4);
    std::unique_ptr<test::BackgroundProcess> worker;
    const std::string stage = test::start_worker(worker, model);
    for (const std::vector<std::string>& sampling : {std::vector<std::string>{"--temp", "0"},
                                                    std::vector<std::string>{"--temp", "1", "-s", "7"}}) {
        const nlohmann::json single = structured_json(model, sampling);
        ASSERT_TRUE(single.contains("text"));
        const std::string text = single["text"];
        nlohmann::json value;
        ASSERT_NO_THROW(value = nlohmann::json::parse(text)) << text;
        EXPECT_TRUE(value["size"].is_number_integer()) << text;
        EXPECT_TRUE(value["parts"].is_array()) << text;
        std::vector<std::string> local = sampling;
        local.insert(local.end(), {"--local", "2", "--exact"});
        EXPECT_EQ(structured_json(model, local)["tokens"], single["tokens"]);
        if (sampling[1] == "0") {
            std::vector<std::string> pipeline = sampling;
            pipeline.insert(pipeline.end(), {"--stages", "root/" + stage});
            EXPECT_EQ(structured_json(model, pipeline)["tokens"], single["tokens"]);
        }
    }
}

TEST(StructuredCli, BadSchemasAndGrammarsNameTheirFlag) {
    const std::string model = test::write_small_model(test::test_dir("structured_cli_errors"), "model.gguf", 4);
    const std::pair<std::vector<std::string>, std::string> cases[] = {
        {{"--json-schema", "{\"type\": \"object\", \"minProperties\": 1}"}, "--json-schema: json schema: the schema: the keyword 'minProperties'"},
        {{"--json-schema", "{not json"}, "--json-schema: not valid JSON"},
        {{"--grammar", "root ::= \"a\" root"}, "--grammar: the grammar matches no text"},
        {{"--grammar-file", "/nonexistent.gbnf"}, "--grammar-file /nonexistent.gbnf: cannot read the file"},
        {{"--grammar", "root ::= \"a\"", "--json-schema", "{}"}, "give one of --grammar"},
    };
    for (const auto& [flags, expected] : cases) {
        std::vector<std::string> args = test::tessera_cmd({"run", "-m", model, "-p", "x", "-n", "4"});
        args.insert(args.end(), flags.begin(), flags.end());
        const auto r = test::run_process(args, 60);
        EXPECT_NE(r.exit_code, 0);
        EXPECT_NE(r.err.find(expected), std::string::npos) << r.err;
    }
}

}  // namespace
}  // namespace tessera
