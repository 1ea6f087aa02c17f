// What holding generation to a JSON schema costs per token, apart from the
// model: on a real vocabulary, random logits (the worst case: the token drawn
// first is rarely allowed, so most steps need the mask), sampling with and
// without the constraint, alternated in rounds. Prints the microseconds per
// token of each, their ratio, and how often a step needed a walk of the
// vocabulary and how often its mask came from the cache.
//
// `make grammar_bench && ./grammar_bench --vocab FILE [--schema FILE] [--tokens 2000] [--rounds 5] [--temp 1]`
// Not a test: the figures depend on the machine.
#include "engine/grammar_constraint.h"
#include "engine/sampler.h"
#include "grammar/gbnf_parser.h"
#include "grammar/json_schema_grammar.h"
#include "model/gguf_file.h"
#include "model/vocab.h"
#include "util/timer.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>

using namespace tessera;

namespace {

const char* const kDefaultSchema = R"({"type": "object", "properties": {
  "title": {"type": "string"}, "year": {"type": "integer"}, "rating": {"type": "number"},
  "genres": {"type": "array", "items": {"enum": ["drama", "comedy", "noir"]}},
  "director": {"type": "object", "properties": {"name": {"type": "string"}, "born": {"type": "integer"}},
               "required": ["name", "born"]}},
  "required": ["title", "year", "rating", "genres", "director"]})";

struct Run {
    double seconds = 0.0;
    int tokens = 0;
    int walks = 0;
    int hits = 0;
};

// `tokens` steps (a new constraint whenever one ends); logits redrawn each step.
Run sample(const std::shared_ptr<const Grammar>& grammar, const std::shared_ptr<const VocabularyPieces>& pieces,
           int tokens, float temperature, uint64_t seed) {
    std::mt19937 rng(static_cast<uint32_t>(seed));
    std::normal_distribution<float> normal(0.0f, 3.0f);
    std::vector<float> logits(static_cast<size_t>(pieces->n_vocab));
    SamplerParams params;
    params.temperature = temperature;
    params.seed = seed;
    Sampler sampler(params);
    std::unique_ptr<GrammarConstraint> c;
    Run run;
    const double t0 = now_seconds();
    for (int i = 0; i < tokens; ++i) {
        for (float& l : logits) l = normal(rng);
        if (grammar && (!c || c->finished() || c->accepting())) {
            if (c) run.walks += c->walks(), run.hits += c->cache_hits();
            c = std::make_unique<GrammarConstraint>(grammar, pieces);
            c->set_budget(400);
            sampler.set_constraint(c.get());
        }
        const int32_t t = sampler.sample(logits.data(), pieces->n_vocab);
        if (c) c->accept(t);
    }
    run.seconds = now_seconds() - t0;
    if (c) run.walks += c->walks(), run.hits += c->cache_hits();
    run.tokens = tokens;
    return run;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app("The cost of a JSON-schema constraint per sampled token");
    std::string vocab_path, schema_path;
    int tokens = 2000, rounds = 5;
    float temperature = 1.0f;
    app.add_option("--vocab", vocab_path, "A GGUF with a vocabulary (a model or a vocab-only file)")->required();
    app.add_option("--schema", schema_path, "A JSON schema file (default: a nested object)");
    app.add_option("--tokens", tokens, "Tokens per run")->capture_default_str();
    app.add_option("--rounds", rounds, "Rounds of both runs")->capture_default_str();
    app.add_option("--temp", temperature, "Temperature (0: greedy)")->capture_default_str();
    CLI11_PARSE(app, argc, argv);
    try {
        const GgufFile file(vocab_path);
        const auto tokenizer = make_tokenizer(load_vocab(file));
        double t0 = now_seconds();
        const auto pieces = vocabulary_pieces(*tokenizer);
        const double pieces_ms = (now_seconds() - t0) * 1e3;
        std::string schema_text = kDefaultSchema;
        if (!schema_path.empty()) {
            std::ifstream in(schema_path);
            std::ostringstream s;
            s << in.rdbuf();
            schema_text = s.str();
        }
        t0 = now_seconds();
        const auto grammar = std::make_shared<const Grammar>(parse_gbnf(json_schema_to_gbnf(nlohmann::ordered_json::parse(schema_text))));
        const double grammar_ms = (now_seconds() - t0) * 1e3;
        std::printf("vocabulary %s: %d tokens, %zu with text; sorted in %.1f ms; schema to grammar in %.2f ms\n",
                    vocab_path.c_str(), pieces->n_vocab, pieces->pieces.size(), pieces_ms, grammar_ms);
        std::vector<double> plain_us, held_us, ratios;
        Run held_last;
        for (int r = 0; r < rounds; ++r) {
            const Run plain = sample(nullptr, pieces, tokens, temperature, 100 + r);
            const Run held = sample(grammar, pieces, tokens, temperature, 100 + r);
            plain_us.push_back(plain.seconds / plain.tokens * 1e6);
            held_us.push_back(held.seconds / held.tokens * 1e6);
            ratios.push_back(held_us.back() / plain_us.back());
            held_last = held;
        }
        const auto median = [](std::vector<double> v) {
            std::sort(v.begin(), v.end());
            return v[v.size() / 2];
        };
        std::printf("per token: %.1f us sampling alone, %.1f us under the schema (median of %d rounds; ratio %.2f)\n",
                    median(plain_us), median(held_us), rounds, median(ratios));
        std::printf("under the schema, last round: %d of %d steps walked the vocabulary, %d masks from the cache\n",
                    held_last.walks, held_last.tokens, held_last.hits);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
    return 0;
}
