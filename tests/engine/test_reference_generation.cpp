// Golden outputs: stories260K reproduces the reference greedy story of
// tests/data/SOURCES.md token for token, from the GGUF and from the
// llama2.c checkpoint converted here.
#include "engine/generation.h"
#include "model/llama2c_import.h"
#include "model/llama_model.h"
#include "model/local_decoder.h"
#include "model/random_model.h"
#include "model/vocab.h"
#include "test_paths.h"
#include "util/error.h"

#include <gtest/gtest.h>

#include <set>

namespace tessera {

namespace {

const std::vector<int32_t> kReferenceIds = {
    1,   403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338, 401, 396, 267, 337, 410,
    408, 419, 292, 411, 322, 265, 282, 295, 433, 426, 385, 328, 432, 358, 394, 261, 370, 432, 352, 266, 268, 388,
    426, 338, 391, 266, 267, 337, 335, 312, 432, 398, 312, 286, 267, 414, 270, 333, 415, 426, 13,  438, 310};
const char* kReferenceText =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she saw "
    "a big, red ball. She wanted to play with it, but it was too high.\nLily";

struct Run {
    GenerationResult result;
};

GenerationResult greedy(const std::string& model_path, const std::string& prompt, int n_predict, int threads,
                        QuantType kv_types = QuantType::F32) {
    const LlamaModel model(model_path);
    const auto tokenizer = make_tokenizer(load_vocab(model.file()));
    ForwardConfig config;
    config.n_ctx = 256;
    config.kv_types = kv_types;
    LocalDecoder decoder(model, config, threads);
    GenerationParams params;
    params.n_predict = n_predict;
    params.sampler.temperature = 0.0f;
    return generate(decoder, *tokenizer, tokenize_prompt(*tokenizer, prompt, config.n_ctx), params);
}

std::vector<int32_t> all_ids(const GenerationResult& r) {
    std::vector<int32_t> ids = r.prompt_tokens;
    ids.insert(ids.end(), r.tokens.begin(), r.tokens.end());
    return ids;
}

}  // namespace

TEST(ReferenceGeneration, Stories260KFromBos) {
    const GenerationResult r = greedy(test::stories260k(), "", 64, 1);
    EXPECT_EQ(all_ids(r), kReferenceIds);
    EXPECT_EQ(r.text, kReferenceText);
}

TEST(ReferenceGeneration, Stories260KOnceUponATime) {
    for (int threads : {1, 2}) {
        for (QuantType kv : {QuantType::F32, QuantType::F16}) {
            const GenerationResult r = greedy(test::stories260k(), "Once upon a time", 64, threads, kv);
            ASSERT_EQ(r.prompt_tokens, std::vector<int32_t>(kReferenceIds.begin(), kReferenceIds.begin() + 5));
            ASSERT_EQ(r.tokens.size(), 64u);
            // The reference holds 60 tokens after this prompt; all of them must match.
            const std::vector<int32_t> ids = all_ids(r);
            EXPECT_EQ(std::vector<int32_t>(ids.begin(), ids.begin() + 65), kReferenceIds)
                << "threads " << threads << " kv " << quant_type_name(kv);
            EXPECT_EQ("Once upon a time" + r.text.substr(0, std::string(kReferenceText).size() - 16), kReferenceText);
        }
    }
}

TEST(ReferenceGeneration, ConvertedCheckpointGivesTheSameTokens) {
    const std::string dir = test::scratch_dir("reference_converted");
    import_llama2c({test::data_dir() + "/models/stories260K.bin", test::data_dir() + "/models/tok512.bin"},
                   dir + "/stories260K.gguf");
    const GenerationResult from_bin = greedy(dir + "/stories260K.gguf", "Once upon a time", 64, 1);
    const GenerationResult from_gguf = greedy(test::stories260k(), "Once upon a time", 64, 1);
    EXPECT_EQ(from_bin.prompt_tokens, from_gguf.prompt_tokens);
    EXPECT_EQ(from_bin.tokens, from_gguf.tokens);
    EXPECT_EQ(from_bin.text, from_gguf.text);
    EXPECT_EQ(all_ids(greedy(dir + "/stories260K.gguf", "", 64, 1)), kReferenceIds);
}

// A generated GQA model in each weight type runs, stays finite and does not
// collapse into one repeated token.
TEST(ReferenceGeneration, RandomGqaModelsGenerateVariedTokens) {
    const std::string dir = test::scratch_dir("random_generation");
    for (QuantType type : {QuantType::F32, QuantType::F16, QuantType::Q8_0, QuantType::Q4_0}) {
        RandomModelSpec spec;
        spec.n_embd = 128;
        spec.n_layer = 4;
        spec.n_head = 8;
        spec.n_head_kv = 2;
        spec.n_ff = 384;
        spec.n_vocab = 400;
        spec.type = type;
        write_random_model(spec, dir + "/m.gguf");
        const GenerationResult r = greedy(dir + "/m.gguf", "hello world", 32, 2);
        ASSERT_EQ(r.tokens.size(), 32u);
        const std::set<int32_t> distinct(r.tokens.begin(), r.tokens.end());
        EXPECT_GE(distinct.size(), 4u) << quant_type_name(type);
    }
}

TEST(Generation, PromptLongerThanContextIsAClearError) {
    const LlamaModel model(test::stories260k());
    const auto tokenizer = make_tokenizer(load_vocab(model.file()));
    try {
        tokenize_prompt(*tokenizer, "Once upon a time there was a very long prompt", 8);
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("context holds 8"), std::string::npos) << e.what();
    }
}

}  // namespace tessera

namespace tessera {

// A conversation's next turn evaluates only its new tokens (n_past of the
// prompt are in the KV cache from before) and gives the same tokens as
// evaluating the whole prompt afresh; a cancel flag stops after one token.
TEST(Generation, CachedPrefixGivesTheSameTokensAndCancelStops) {
    const LlamaModel model(test::stories260k());
    const auto tokenizer = make_tokenizer(load_vocab(model.file()));
    ForwardConfig config;
    config.n_ctx = 256;
    LocalDecoder decoder(model, config, 1);
    GenerationParams params;
    params.n_predict = 16;
    params.sampler.temperature = 0.0f;
    const std::vector<int32_t> first = tokenize_prompt(*tokenizer, "Once upon a time", config.n_ctx);
    const GenerationResult turn1 = generate(decoder, *tokenizer, first, params);
    // Turn 2's prompt: turn 1's prompt and answer, then more text.
    std::vector<int32_t> second = first;
    second.insert(second.end(), turn1.tokens.begin(), turn1.tokens.end());
    for (const int32_t id : tokenizer->encode(" The dog", false)) second.push_back(id);
    params.n_past = static_cast<int>(first.size() + turn1.tokens.size()) - 1;  // the last answer token was never fed
    const GenerationResult cached = generate(decoder, *tokenizer, second, params);
    EXPECT_EQ(cached.n_evaluated_prompt, static_cast<int>(second.size()) - params.n_past);
    LocalDecoder fresh_decoder(model, config, 1);
    params.n_past = 0;
    const GenerationResult fresh = generate(fresh_decoder, *tokenizer, second, params);
    EXPECT_EQ(cached.tokens, fresh.tokens);
    EXPECT_EQ(fresh.n_evaluated_prompt, static_cast<int>(second.size()));

    std::atomic<bool> cancel{true};
    params.cancel = &cancel;
    const GenerationResult cancelled = generate(fresh_decoder, *tokenizer, first, params);
    EXPECT_EQ(cancelled.stop_reason, "cancelled");
    EXPECT_TRUE(cancelled.tokens.empty());
}

}  // namespace tessera
