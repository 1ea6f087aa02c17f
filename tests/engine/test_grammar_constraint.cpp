// The grammar held over a real vocabulary: the walk's mask equals checking
// every token on its own (the reference), and generation from random logits
// under a JSON schema always ends in JSON that parses and has the schema's
// keys, within the token budget, whatever the budget's room.
#include "engine/grammar_constraint.h"
#include "engine/sampler.h"
#include "grammar/gbnf_parser.h"
#include "grammar/json_schema_grammar.h"
#include "model/gguf_file.h"
#include "model/vocab.h"
#include "test_paths.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <random>

namespace tessera {
namespace {

std::unique_ptr<Tokenizer> tokenizer_of(const std::string& name) {
    const GgufFile file(test::data_dir() + "/vocab/" + name);
    return make_tokenizer(load_vocab(file));
}

std::shared_ptr<const Grammar> grammar_of(const std::string& gbnf) { return std::make_shared<const Grammar>(parse_gbnf(gbnf)); }

const char* const kSchema = R"({"type": "object", "properties": {
    "title": {"type": "string", "maxLength": 40}, "year": {"type": "integer"},
    "genres": {"type": "array", "items": {"enum": ["drama", "comedy", "noir"]}, "maxItems": 3},
    "rating": {"type": ["number", "null"]}, "sequel": {"type": "boolean"}},
    "required": ["title", "year", "genres"]})";

// Reference: the mask bit of each token against a check of its bytes alone.
void expect_mask_matches_each_token(GrammarConstraint& c, const Tokenizer& tokenizer, const VocabularyPieces& v) {
    const std::vector<uint64_t> mask = c.allowed();
    int allowed = 0;
    for (int32_t id = 0; id < v.n_vocab; ++id) {
        const bool bit = (mask[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1;
        allowed += bit ? 1 : 0;
        ASSERT_EQ(bit, c.allows(id)) << "token " << id << " '" << tokenizer.token_to_piece(id) << "'";
    }
    EXPECT_GT(allowed, 0);
}

// Random logits, sampled under the constraint, until it ends or the budget
// runs out; returns the text.
std::string generate_random(GrammarConstraint& c, const Tokenizer& tokenizer, uint64_t seed, int budget,
                            bool check_masks, int* tokens_used) {
    const auto pieces = vocabulary_pieces(tokenizer);
    const VocabularyPieces& v = *pieces;
    SamplerParams params;
    params.seed = seed;
    params.temperature = 1.0f;
    params.top_k = 0;
    params.top_p = 1.0f;
    params.min_p = 0.0f;
    Sampler sampler(params);
    sampler.set_constraint(&c);
    c.set_budget(budget);
    std::mt19937 rng(static_cast<uint32_t>(seed));
    std::normal_distribution<float> normal(0.0f, 3.0f);
    std::vector<float> logits(static_cast<size_t>(v.n_vocab));
    std::string text;
    int used = 0;
    for (; used < budget; ++used) {
        for (float& l : logits) l = normal(rng);
        if (check_masks && used % 7 == 0) expect_mask_matches_each_token(c, tokenizer, v);
        const int32_t token = sampler.sample(logits.data(), v.n_vocab);
        c.accept(token);
        if (v.is_eog(token)) break;
        text += tokenizer.token_to_piece(token);
        if (c.finished()) {
            ++used;
            break;
        }
    }
    *tokens_used = used;
    return text;
}

TEST(GrammarConstraint, MaskEqualsCheckingEveryTokenAlone) {
    for (const char* vocab : {"ggml-vocab-llama-spm.gguf", "ggml-vocab-gpt-2.gguf"}) {
        const auto tokenizer = tokenizer_of(vocab);
        const auto pieces = vocabulary_pieces(*tokenizer);
        const auto grammar = grammar_of(json_schema_to_gbnf(nlohmann::ordered_json::parse(kSchema)));
        GrammarConstraint c(grammar, pieces);
        int used = 0;
        generate_random(c, *tokenizer, 3, 60, true, &used);
        EXPECT_GT(used, 5) << vocab;
    }
}

TEST(GrammarConstraint, RandomLogitsAlwaysGiveJsonOfTheSchemaWithinTheBudget) {
    const auto tokenizer = tokenizer_of("ggml-vocab-llama-spm.gguf");
    const auto pieces = vocabulary_pieces(*tokenizer);
    const auto schema = nlohmann::json::parse(kSchema);
    const auto grammar = grammar_of(json_schema_to_gbnf(nlohmann::ordered_json::parse(kSchema)));
    for (uint64_t seed = 1; seed <= 20; ++seed) {
        // Budgets from roomy to tight: the shortest valid text is about 40
        // characters ({"title":"","year":0,"genres":[]}).
        const int budget = seed % 2 == 0 ? 400 : 45 + static_cast<int>(seed);
        GrammarConstraint c(grammar, pieces);
        int used = 0;
        const std::string text = generate_random(c, *tokenizer, seed, budget, false, &used);
        EXPECT_LE(used, budget);
        nlohmann::json value;
        ASSERT_NO_THROW(value = nlohmann::json::parse(text)) << "seed " << seed << ": " << text;
        for (const auto& key : schema["required"]) EXPECT_TRUE(value.contains(key.get<std::string>())) << text;
        EXPECT_TRUE(value["year"].is_number_integer()) << text;
        EXPECT_LE(value["genres"].size(), 3u) << text;
    }
}

TEST(GrammarConstraint, EndOfGenerationOnlyWhereTheTextIsComplete) {
    const auto tokenizer = tokenizer_of("ggml-vocab-llama-spm.gguf");
    const auto pieces = vocabulary_pieces(*tokenizer);
    const int32_t eos = tokenizer->vocab().eos_id;
    GrammarConstraint c(grammar_of("root ::= \"ab\" \" \"?\n"), pieces);
    EXPECT_FALSE(c.allows(eos));
    EXPECT_TRUE(c.allows(tokenizer->vocab().token_to_id.at("ab")));
    c.accept(tokenizer->vocab().token_to_id.at("ab"));
    EXPECT_TRUE(c.allows(eos));  // complete, though a space may follow
    EXPECT_FALSE(c.finished());
    EXPECT_FALSE(c.allows(tokenizer->vocab().token_to_id.at("ab")));
    c.accept(tokenizer->vocab().token_to_id.at("▁"));
    EXPECT_TRUE(c.finished());
    // A grammar whose text no token of the vocabulary can begin.
    GrammarConstraint none(grammar_of("root ::= [\\U0001F9FF]\n"), pieces);
    EXPECT_NO_THROW(none.allowed());  // byte tokens can spell any character
    const auto gpt2 = tokenizer_of("ggml-vocab-gpt-2.gguf");
    GrammarConstraint control(grammar_of("root ::= \"\\x00\\x01\"\n"), vocabulary_pieces(*gpt2));
    EXPECT_NO_THROW(control.allowed());
}

TEST(GrammarConstraint, TheFastPathDrawsFromTheConstrainedDistribution) {
    // p over 4 tokens; the grammar allows tokens 1 and 3 only. Drawing first
    // unconstrained and redrawing from the allowed ones must give
    // p(t) / P(allowed): 0.2/0.6 and 0.4/0.6.
    const auto tokenizer = tokenizer_of("ggml-vocab-llama-spm.gguf");
    const auto pieces = vocabulary_pieces(*tokenizer);
    const Vocab& vocab = tokenizer->vocab();
    const int32_t a = vocab.token_to_id.at("a"), b = vocab.token_to_id.at("b"), x = vocab.token_to_id.at("x"),
                  y = vocab.token_to_id.at("y");
    std::vector<float> logits(static_cast<size_t>(vocab.size()), -1e9f);
    logits[static_cast<size_t>(a)] = std::log(0.1f);
    logits[static_cast<size_t>(b)] = std::log(0.2f);
    logits[static_cast<size_t>(x)] = std::log(0.3f);
    logits[static_cast<size_t>(y)] = std::log(0.4f);
    const auto grammar = grammar_of("root ::= [by]\n");
    SamplerParams params;
    params.temperature = 1.0f;
    params.top_k = 0;
    params.top_p = 1.0f;
    params.min_p = 0.0f;
    params.seed = 11;
    Sampler sampler(params);
    int count_b = 0, count_y = 0;
    const int n = 4000;
    GrammarConstraint c(grammar, pieces);  // never advanced: every draw is the first token's
    sampler.set_constraint(&c);
    for (int i = 0; i < n; ++i) {
        const int32_t t = sampler.sample(logits.data(), vocab.size());
        ASSERT_TRUE(t == b || t == y) << t;
        (t == b ? count_b : count_y)++;
    }
    EXPECT_NEAR(static_cast<double>(count_b) / n, 1.0 / 3.0, 0.03);
    EXPECT_NEAR(static_cast<double>(count_y) / n, 2.0 / 3.0, 0.03);
}

}  // namespace
}  // namespace tessera
