// tessera quantize as a library (model/quantize_model.h): types per tensor,
// fallbacks, bytes equal to the reference quantizer, metadata, refusals, and
// that quantized models still load and generate (stories260K's Q8_0 gives
// the reference greedy story token for token).
#include "engine/generation.h"
#include "eval/kl_divergence.h"
#include "eval/perplexity.h"
#include "model/gguf_file.h"
#include "model/importance_matrix.h"
#include "model/llama_model.h"
#include "model/local_decoder.h"
#include "model/quantize_model.h"
#include "model/random_model.h"
#include "model/tokenizer.h"
#include "model/vocab.h"
#include "ops/quant_traits.h"
#include "test_paths.h"
#include "util/error.h"

#include "test_errors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <limits>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace tessera {

using test::error_of;

namespace {

const std::vector<int32_t> kReferenceIds = {
    1,   403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338, 401, 396, 267, 337, 410,
    408, 419, 292, 411, 322, 265, 282, 295, 433, 426, 385, 328, 432, 358, 394, 261, 370, 432, 352, 266, 268, 388,
    426, 338, 391, 266, 267, 337, 335, 312, 432, 398, 312, 286, 267, 414, 270, 333, 415, 426, 13,  438, 310};

std::string stories260k() { return test::stories260k(); }

QuantizeParams params_for(const std::string& target, int threads = 2) {
    QuantizeParams p;
    p.target = *parse_quantize_target(target);
    p.n_threads = threads;
    return p;
}

bool can_write(QuantType t) { return scalar_traits(t) != nullptr && scalar_traits(t)->from_float != nullptr; }

GenerationResult greedy(const std::string& path, int n_predict) {
    const LlamaModel model(path);
    const auto tokenizer = make_tokenizer(load_vocab(model.file()));
    ForwardConfig config;
    config.n_ctx = 128;
    config.kv_types = QuantType::F32;
    LocalDecoder decoder(model, config, 2);
    GenerationParams params;
    params.n_predict = n_predict;
    params.sampler.temperature = 0.0f;
    return generate(decoder, *tokenizer, tokenize_prompt(*tokenizer, "", config.n_ctx), params);
}

// A generated F32 model whose rows are all multiples of 256 (K-quant blocks).
std::string k_shaped_f32_model(const std::string& dir, int layers = 2) {
    RandomModelSpec spec;
    spec.n_embd = 256;
    spec.n_layer = layers;
    spec.n_head = 4;
    spec.n_head_kv = 2;
    spec.n_ff = 768;
    spec.n_vocab = 512;
    write_random_model(spec, dir + "/f32.gguf");
    return dir + "/f32.gguf";
}

// Mean KL divergence of `model` from `base` over two chunks of 64 synthetic tokens.
double kl_from(const std::string& base, const std::string& model, const std::string& dir) {
    std::vector<int32_t> tokens(128);
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(3 + (i * 37) % 500);
    PerplexityParams pp;
    pp.n_ctx = 64;
    const ChunkPlan plan = plan_chunks(tokens.size(), pp);
    ForwardConfig config;
    config.n_ctx = 64;
    {
        const LlamaModel m(base);
        LocalDecoder d(m, config, 2);
        write_kl_base(d, tokens, plan, 1, dir + "/kl.base");
    }
    const LlamaModel m(model);
    LocalDecoder d(m, config, 2);
    return compute_kl_divergence(d, KlBaseFile(dir + "/kl.base"), 1, -1).kld.mean();
}

}  // namespace

TEST(Quantize, TargetsAndFileTypesAsLlamaCpp) {
    EXPECT_EQ(parse_quantize_target("q8_0")->file_type, 7u);
    EXPECT_EQ(parse_quantize_target("Q4_0")->file_type, 2u);
    EXPECT_EQ(parse_quantize_target("f16")->file_type, 1u);
    EXPECT_EQ(parse_quantize_target("F32")->file_type, 0u);
    EXPECT_EQ(parse_quantize_target("Q4_K_M")->file_type, 15u);
    EXPECT_EQ(parse_quantize_target("Q4_K_S")->file_type, 14u);
    EXPECT_EQ(parse_quantize_target("Q6_K")->file_type, 18u);
    EXPECT_EQ(parse_quantize_target("Q4_K")->type, QuantType::Q4_K);
    EXPECT_EQ(parse_quantize_target("Q5_K_M")->file_type, 17u);
    EXPECT_EQ(parse_quantize_target("Q3_K_M")->file_type, 12u);
    EXPECT_EQ(parse_quantize_target("Q2_K")->file_type, 10u);
    EXPECT_EQ(parse_quantize_target("IQ4_XS")->file_type, 30u);
    EXPECT_EQ(parse_quantize_target("IQ4_NL")->file_type, 25u);
    EXPECT_EQ(parse_quantize_target("BF16")->file_type, 32u);
    EXPECT_EQ(parse_quantize_target("MXFP4_MOE")->file_type, 38u);
    // The I-quant mixes, whose names are not their main types.
    EXPECT_EQ(parse_quantize_target("IQ2_XXS")->file_type, 19u);
    EXPECT_EQ(parse_quantize_target("IQ2_S")->type, QuantType::IQ2_XS);
    EXPECT_EQ(parse_quantize_target("IQ2_M")->type, QuantType::IQ2_S);
    EXPECT_EQ(parse_quantize_target("IQ3_XS")->file_type, 22u);
    EXPECT_EQ(parse_quantize_target("IQ3_M")->type, QuantType::IQ3_S);
    EXPECT_EQ(parse_quantize_target("Q2_K_S")->file_type, 21u);
    EXPECT_EQ(parse_quantize_target("IQ1_S")->file_type, 24u);
    EXPECT_EQ(parse_quantize_target("IQ1_M")->file_type, 31u);
    EXPECT_EQ(parse_quantize_target("Q1_0")->file_type, 40u);
    EXPECT_EQ(parse_quantize_target("Q2_0")->file_type, 41u);
    EXPECT_EQ(parse_quantize_target("TQ1_0")->file_type, 36u);
    EXPECT_EQ(parse_quantize_target("tq2_0")->type, QuantType::TQ2_0);
    EXPECT_EQ(parse_quantize_target("NVFP4")->file_type, 39u);
    EXPECT_EQ(parse_quantize_target("nvfp4")->type, QuantType::NVFP4);
    EXPECT_FALSE(parse_quantize_target("Q8_1").has_value());
    EXPECT_FALSE(parse_quantize_target("Q8").has_value());
}

TEST(Quantize, Stories260KToQ8_0LoadsAndGivesTheReferenceStory) {
    const std::string dir = test::scratch_dir("quantize_q8");
    const QuantizeSummary s = quantize_model(stories260k(), dir + "/q8.gguf", params_for("Q8_0", 3));
    EXPECT_LT(s.file_bytes_out, s.file_bytes_in / 2);
    EXPECT_FALSE(std::filesystem::exists(dir + "/q8.gguf.partial"));

    const GgufFile in(stories260k());
    const GgufFile out(dir + "/q8.gguf");
    ASSERT_EQ(out.tensors().size(), in.tensors().size());
    const QuantTraits& q8 = *scalar_traits(QuantType::Q8_0);
    for (size_t i = 0; i < in.tensors().size(); ++i) {
        const GgufTensorInfo& a = in.tensors()[i];
        const GgufTensorInfo& b = out.tensors()[i];
        EXPECT_EQ(a.name, b.name);
        EXPECT_EQ(a.n_dims, b.n_dims);
        EXPECT_EQ(std::vector<int64_t>(a.ne, a.ne + 4), std::vector<int64_t>(b.ne, b.ne + 4));
        EXPECT_EQ(b.offset % out.alignment(), 0u);
        if (a.n_dims == 1) {
            EXPECT_EQ(b.type, QuantType::F32) << a.name;
            EXPECT_EQ(std::memcmp(a.data, b.data, a.n_bytes), 0) << a.name;
        } else if (a.ne[0] % 32 != 0) {
            // ffn_down's rows of 172 do not split into blocks of 32.
            EXPECT_EQ(b.type, QuantType::F16) << a.name;
            EXPECT_NE(a.name.find("ffn_down"), std::string::npos);
        } else {
            EXPECT_EQ(b.type, QuantType::Q8_0) << a.name;
            // Bytes as the reference quantizer makes them, whatever the thread split.
            std::vector<uint8_t> expected(b.n_bytes);
            q8.from_float(reinterpret_cast<const float*>(a.data), expected.data(), a.n_elements());
            EXPECT_EQ(std::memcmp(expected.data(), b.data, b.n_bytes), 0) << a.name;
        }
    }
    // Metadata copied, in order, with the file type updated.
    EXPECT_EQ(out.get_int("general.file_type"), 7);
    EXPECT_EQ(out.get_int("general.quantization_version"), 2);
    for (const auto& kv : in.metadata()) {
        if (kv.key == "general.file_type") continue;
        const GgufValue* v = out.find(kv.key);
        ASSERT_NE(v, nullptr) << kv.key;
        EXPECT_EQ(v->type, kv.value.type) << kv.key;
    }
    EXPECT_EQ(out.get_string("tokenizer.ggml.model"), in.get_string("tokenizer.ggml.model"));

    const GenerationResult r = greedy(dir + "/q8.gguf", 64);
    std::vector<int32_t> ids = r.prompt_tokens;
    ids.insert(ids.end(), r.tokens.begin(), r.tokens.end());
    EXPECT_EQ(ids, kReferenceIds);
}

TEST(Quantize, Stories260KToQ4_0AndF16Generate) {
    const std::string dir = test::scratch_dir("quantize_q4");
    quantize_model(stories260k(), dir + "/q4.gguf", params_for("Q4_0"));
    const GgufFile q4(dir + "/q4.gguf");
    EXPECT_EQ(q4.get_int("general.file_type"), 2);
    EXPECT_EQ(q4.find_tensor("blk.0.attn_q.weight")->type, QuantType::Q4_0);
    EXPECT_EQ(q4.find_tensor("blk.0.ffn_down.weight")->type, QuantType::F16);
    // llama.cpp's mix gives output.weight Q6_K; its 64 columns are not a
    // multiple of 256, so that falls back to Q8_0 (Q4_0 in a build without Q6_K).
    EXPECT_EQ(q4.find_tensor("output.weight")->type, can_write(QuantType::Q6_K) ? QuantType::Q8_0 : QuantType::Q4_0);
    QuantizeParams pure = params_for("Q4_0");
    pure.pure = true;
    quantize_model(stories260k(), dir + "/q4p.gguf", pure);
    EXPECT_EQ(GgufFile(dir + "/q4p.gguf").find_tensor("output.weight")->type, QuantType::Q4_0);

    const GenerationResult r = greedy(dir + "/q4.gguf", 48);
    ASSERT_EQ(r.tokens.size(), 48u);
    // Quantization noise changes the story, not its start.
    EXPECT_EQ(std::vector<int32_t>(r.tokens.begin(), r.tokens.begin() + 8),
              std::vector<int32_t>(kReferenceIds.begin() + 1, kReferenceIds.begin() + 9));

    quantize_model(stories260k(), dir + "/f16.gguf", params_for("F16"));
    const GgufFile f16(dir + "/f16.gguf");
    EXPECT_EQ(f16.get_int("general.file_type"), 1);
    EXPECT_EQ(f16.find_tensor("blk.0.ffn_down.weight")->type, QuantType::F16);
    EXPECT_EQ(f16.find_tensor("blk.0.attn_norm.weight")->type, QuantType::F32);
    std::vector<int32_t> ids = greedy(dir + "/f16.gguf", 64).tokens;
    ids.insert(ids.begin(), 1);
    EXPECT_EQ(ids, kReferenceIds);
}

TEST(Quantize, RequantizingNeedsToBeAskedFor) {
    const std::string dir = test::scratch_dir("quantize_requant");
    quantize_model(stories260k(), dir + "/q8.gguf", params_for("Q8_0"));
    const std::string err = error_of([&] { quantize_model(dir + "/q8.gguf", dir + "/q4.gguf", params_for("Q4_0")); });
    EXPECT_NE(err.find("already Q8_0"), std::string::npos) << err;
    EXPECT_NE(err.find("--allow-requantize"), std::string::npos) << err;
    EXPECT_FALSE(std::filesystem::exists(dir + "/q4.gguf"));

    QuantizeParams allowed = params_for("Q4_0");
    allowed.allow_requantize = true;
    quantize_model(dir + "/q8.gguf", dir + "/q4.gguf", allowed);
    EXPECT_EQ(GgufFile(dir + "/q4.gguf").find_tensor("blk.1.attn_k.weight")->type, QuantType::Q4_0);

    // Same type: bytes copied; back to F32: a lossless widening, no flag needed.
    quantize_model(dir + "/q8.gguf", dir + "/q8b.gguf", params_for("Q8_0"));
    const GgufFile a(dir + "/q8.gguf");
    const GgufFile b(dir + "/q8b.gguf");
    for (size_t i = 0; i < a.tensors().size(); ++i) {
        ASSERT_EQ(a.tensors()[i].n_bytes, b.tensors()[i].n_bytes);
        EXPECT_EQ(std::memcmp(a.tensors()[i].data, b.tensors()[i].data, a.tensors()[i].n_bytes), 0);
    }
    quantize_model(dir + "/q8.gguf", dir + "/f32.gguf", params_for("F32"));
    EXPECT_EQ(GgufFile(dir + "/f32.gguf").find_tensor("token_embd.weight")->type, QuantType::F32);
}

TEST(Quantize, ClearErrors) {
    const std::string dir = test::scratch_dir("quantize_errors");
    const std::string missing = error_of([&] { quantize_model(dir + "/nope.gguf", dir + "/o.gguf", params_for("Q8_0")); });
    EXPECT_NE(missing.find("nope.gguf"), std::string::npos) << missing;
    {
        const std::string same = error_of([&] { quantize_model(stories260k(), stories260k(), params_for("Q8_0")); });
        EXPECT_NE(same.find("overwrite the input"), std::string::npos) << same;
    }
    for (const char* t : {"Q4_K", "Q6_K"}) {
        const QuantType type = parse_quantize_target(t)->type;
        if (can_write(type)) continue;
        const std::string err = error_of([&] { quantize_model(k_shaped_f32_model(dir), dir + "/k.gguf", params_for(t)); });
        EXPECT_NE(err.find("cannot write"), std::string::npos) << err;
    }
}

// K-quants on a generated model whose rows are multiples of 256.
TEST(Quantize, KQuantsOfAGeneratedModel) {
    if (!can_write(QuantType::Q4_K) || !can_write(QuantType::Q6_K)) {
        GTEST_SKIP() << "this build has no Q4_K/Q6_K quantizer yet";
    }
    const std::string dir = test::scratch_dir("quantize_k");
    const std::string f32 = k_shaped_f32_model(dir);
    for (const char* t : {"Q4_K", "Q6_K"}) {
        QuantizeParams p = params_for(t);
        quantize_model(f32, dir + "/" + t + ".gguf", p);
        const GgufFile f(dir + "/" + t + ".gguf");
        const QuantType type = p.target.type;
        for (const auto& tensor : f.tensors()) {
            if (tensor.n_dims == 1) {
                EXPECT_EQ(tensor.type, QuantType::F32) << tensor.name;
            } else if (tensor.name == "output.weight") {
                EXPECT_EQ(tensor.type, QuantType::Q6_K) << tensor.name;  // llama.cpp's mix
            } else {
                EXPECT_EQ(tensor.type, type) << t << " " << tensor.name;
            }
        }
        EXPECT_EQ(f.get_int("general.file_type"), p.target.file_type);
        const double kl = kl_from(f32, dir + "/" + t + ".gguf", dir);
        EXPECT_GT(kl, 0.0) << t;
        EXPECT_LT(kl, type == QuantType::Q6_K ? 0.01 : 0.05) << t;
    }
}

// gen-model's K-quant models run and do not collapse into one repeated token.
TEST(Quantize, GeneratedKQuantModelsGenerateVariedTokens) {
    if (compute_traits(QuantType::Q4_K) == nullptr || compute_traits(QuantType::Q6_K) == nullptr) {
        GTEST_SKIP() << "this build has no Q4_K/Q6_K kernels yet";
    }
    const std::string dir = test::scratch_dir("random_k_generation");
    for (QuantType type : {QuantType::Q4_K, QuantType::Q6_K}) {
        RandomModelSpec spec;
        spec.n_embd = 256;
        spec.n_layer = 4;
        spec.n_head = 8;
        spec.n_head_kv = 2;
        spec.n_ff = 768;
        spec.n_vocab = 400;
        spec.type = type;
        write_random_model(spec, dir + "/m.gguf");
        const GenerationResult r = greedy(dir + "/m.gguf", 32);
        ASSERT_EQ(r.tokens.size(), 32u);
        const std::set<int32_t> distinct(r.tokens.begin(), r.tokens.end());
        EXPECT_GE(distinct.size(), 4u) << quant_type_name(type);
    }
}

// llama.cpp's Q4_K_M: Q6_K for output.weight and for attn_v / ffn_down of
// the layers use_more_bits picks (first and last eighth, every third between).
TEST(Quantize, Q4_K_MMixAsLlamaCpp) {
    if (!can_write(QuantType::Q4_K) || !can_write(QuantType::Q6_K)) {
        GTEST_SKIP() << "this build has no Q4_K/Q6_K quantizer yet";
    }
    const std::string dir = test::scratch_dir("quantize_mix");
    const GgufFile f32(k_shaped_f32_model(dir, 16));
    const std::vector<TensorQuantPlan> plans = plan_quantization(f32, params_for("Q4_K_M"));
    // use_more_bits(i, 16): i < 2, i >= 14, or (i - 2) % 3 == 2 -> 0, 1, 4, 7, 10, 13, 14, 15.
    const std::set<int> more = {0, 1, 4, 7, 10, 13, 14, 15};
    for (const auto& p : plans) {
        if (p.ne.size() == 1) continue;
        QuantType expected = QuantType::Q4_K;
        if (p.name == "output.weight") expected = QuantType::Q6_K;
        for (int l = 0; l < 16; ++l) {
            if ((p.name == fmt::format("blk.{}.attn_v.weight", l) || p.name == fmt::format("blk.{}.ffn_down.weight", l)) &&
                more.count(l)) {
                expected = QuantType::Q6_K;
            }
        }
        EXPECT_EQ(p.to, expected) << p.name;
    }
}

// stories260K's rows (64, 172) are not multiples of 256: a K-quant falls back
// to a type of at least its quality whose block fits.
TEST(Quantize, KQuantsFallBackOnStories260K) {
    if (!can_write(QuantType::Q4_K) || !can_write(QuantType::Q6_K)) {
        GTEST_SKIP() << "this build has no Q4_K/Q6_K quantizer yet";
    }
    const GgufFile in(stories260k());
    for (const char* t : {"Q4_K", "Q6_K", "Q4_K_M"}) {
        for (const auto& p : plan_quantization(in, params_for(t))) {
            if (p.ne.size() == 1) continue;
            if (p.name == "output.weight") {
                // llama.cpp's output rule itself picks Q8_0 when rows do not split into the target's blocks.
                EXPECT_EQ(p.to, QuantType::Q8_0) << t;
                continue;
            }
            EXPECT_TRUE(p.fell_back()) << p.name;
            const QuantType expected = p.ne[0] % 32 != 0 ? QuantType::F16
                                       : can_write(QuantType::Q5_0) && p.wanted == QuantType::Q4_K ? QuantType::Q5_0
                                                                                                  : QuantType::Q8_0;
            EXPECT_EQ(p.to, expected) << t << " " << p.name;
        }
    }
}

}  // namespace tessera

namespace tessera {

// Every named target's mix, tensor for tensor, as llama-quantize chose for
// files of the same shapes (tests/data/quant/mixes.txt: two 16-layer models,
// grouped-query factor 4 and 1).
TEST(Quantize, EveryMixAsLlamaQuantizeChose) {
    std::map<std::string, std::map<std::string, std::string>> exceptions;  // "g4 Q4_K_M" -> tensor -> type
    // The targets llama-quantize was run with (Q6_K's and Q8_0's files had no exceptions), and with an
    // importance matrix (models g4i, g1i: the mixes' rules for one differ, and some targets need one).
    const std::set<std::string> targets = {"Q2_K",   "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S", "Q4_K_M", "Q5_K_S", "Q5_K_M",
                                           "Q6_K",   "IQ4_NL", "IQ4_XS", "Q5_0",   "Q5_1",   "Q8_0",   "Q4_0",
                                           "IQ3_S",  "IQ3_M",  "Q1_0",   "Q2_0",   "TQ1_0",  "TQ2_0"};
    const std::set<std::string> importance_targets = {"IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ2_M",  "IQ3_XXS", "IQ3_XS",
                                                      "Q2_K_S",  "Q4_0",   "Q5_0",  "IQ4_XS", "IQ4_NL"};
    {
        std::istringstream in(test::read_text(test::data_dir() + "/quant/mixes.txt"));
        std::string line;
        while (std::getline(in, line)) {
            if (line.empty() || line[0] == '#') continue;
            std::istringstream fields(line);
            std::string model, target, tensor, type;
            fields >> model >> target >> tensor >> type;
            exceptions[model + " " + target][tensor] = type;
        }
    }
    ASSERT_EQ(exceptions.size(), 2u * 19u + 2u * 11u);
    const std::string dir = test::scratch_dir("quantize_every_mix");
    for (const auto& [model, kv_heads] : {std::pair<std::string, int>{"g4", 2}, {"g1", 8}}) {
        RandomModelSpec spec;
        spec.n_embd = 256;
        spec.n_layer = 16;
        spec.n_head = 8;
        spec.n_head_kv = kv_heads;
        spec.n_ff = 512;
        spec.n_vocab = 512;
        spec.type = QuantType::Q8_0;  // (the plan reads names and shapes only: a smaller file)
        write_random_model(spec, dir + "/" + model + ".gguf");
        const GgufFile file(dir + "/" + model + ".gguf");
        // The plan needs an importance matrix's presence and sizes: one of ones.
        ImportanceMatrix ones;
        ones.path = "ones";
        for (const GgufTensorInfo& t : file.tensors()) {
            if (t.n_dims == 2) ones.entries[t.name].assign(static_cast<size_t>(t.ne[0]), 1.0f);
        }
        for (const bool with_importance : {false, true}) {
            const std::string name = model + (with_importance ? "i" : "");
            for (const std::string& target : with_importance ? importance_targets : targets) {
                QuantizeParams params = params_for(target);
                params.allow_requantize = true;
                if (with_importance) params.importance = &ones;
                const auto& expected_exceptions = exceptions[name + " " + target];
                int matrices = 0;
                for (const auto& p : plan_quantization(file, params)) {
                    if (p.ne.size() != 2) continue;
                    ++matrices;
                    const auto it = expected_exceptions.find(p.name);
                    const std::string expected = it != expected_exceptions.end() ? it->second : quant_type_name(params.target.type);
                    EXPECT_EQ(quant_type_name(p.to), expected) << name << " " << target << " " << p.name;
                }
                EXPECT_EQ(matrices, 2 + 16 * 7);
            }
        }
    }
}

// gpt-oss's mix as llama-quantize makes it: every expert's stacked (3-D)
// tensor MXFP4, every other matrix Q8_0, the router kept F32.
namespace {
// A small F32 mixture of experts of the family: 2 layers, 4 experts of 256 channels, 2 chosen.
void write_small_moe(const char* family, const std::string& path) {
    RandomModelSpec spec;
    apply_model_preset(spec, family);
    spec.n_embd = 256;
    spec.n_layer = 2;
    spec.n_head = 4;
    spec.n_head_kv = 2;
    spec.n_ff = 256;
    spec.n_vocab = 512;
    spec.n_expert = 4;
    spec.n_expert_used = 2;
    spec.type = QuantType::F32;
    write_random_model(spec, path);
}
}  // namespace

TEST(Quantize, Mxfp4MoeMixPutsTheExpertsInMxfp4) {
    const std::string dir = test::scratch_dir("quantize_mxfp4_moe");
    write_small_moe("gpt-oss", dir + "/f32.gguf");
    const GgufFile file(dir + "/f32.gguf");
    int experts = 0, others = 0;
    for (const auto& p : plan_quantization(file, params_for("MXFP4_MOE"))) {
        if (p.ne.size() == 1) continue;
        if (p.name.ends_with(".bias")) {  // the experts' biases (2-D) are copied
            EXPECT_EQ(p.to, QuantType::F32) << p.name;
        } else if (p.name.find("ffn_gate_inp") != std::string::npos) {
            EXPECT_EQ(p.to, QuantType::F32) << p.name;
        } else if (p.ne.size() == 3) {
            EXPECT_EQ(p.to, QuantType::MXFP4) << p.name;
            ++experts;
        } else {
            EXPECT_EQ(p.to, QuantType::Q8_0) << p.name;
            ++others;
        }
    }
    EXPECT_EQ(experts, 2 * 3);
    EXPECT_GT(others, 2 * 4);
}

// NVFP4 as ModelOpt checkpoints carry it: each matrix with a second-level
// factor (amax / (6 * 240); per expert for stacked experts) written as
// `<name>.scale`, the blocks quantized from the weights divided by it, so the
// blocks times the factor give back the weights within FP4's steps; the
// embedding (a lookup, no product to scale) Q8_0, the head Q6_K.
TEST(Quantize, Nvfp4WritesEachMatrixsFactorBesideIt) {
    const std::string dir = test::scratch_dir("quantize_nvfp4");
    write_small_moe("qwen3moe", dir + "/f32.gguf");
    quantize_model(dir + "/f32.gguf", dir + "/nvfp4.gguf", params_for("NVFP4"));
    const GgufFile in(dir + "/f32.gguf"), out(dir + "/nvfp4.gguf");
    int matrices = 0;
    for (const GgufTensorInfo& t : in.tensors()) {
        const GgufTensorInfo* q = out.find_tensor(t.name);
        ASSERT_NE(q, nullptr) << t.name;
        if (t.name == "token_embd.weight") {
            EXPECT_EQ(q->type, QuantType::Q8_0);
        }
        if (t.name == "output.weight") {
            EXPECT_EQ(q->type, QuantType::Q6_K);
        }
        if (q->type != QuantType::NVFP4) {
            EXPECT_EQ(out.find_tensor(t.name.substr(0, t.name.size() - 7) + ".scale"), nullptr) << t.name;
            continue;
        }
        ++matrices;
        const GgufTensorInfo* scale = out.find_tensor(t.name.substr(0, t.name.size() - 7) + ".scale");
        ASSERT_NE(scale, nullptr) << t.name;
        const int64_t cols = t.ne[0], n_rows = t.n_elements() / cols;
        const int64_t parts = t.n_dims == 3 ? t.ne[2] : 1, per = n_rows / parts;
        ASSERT_EQ(scale->type, QuantType::F32);
        ASSERT_EQ(scale->n_dims, 1u);
        ASSERT_EQ(scale->ne[0], parts) << t.name;
        std::vector<float> src(static_cast<size_t>(cols)), got(static_cast<size_t>(cols));
        for (int64_t e = 0; e < parts; ++e) {
            float amax = 0.0f;
            for (int64_t r = e * per; r < (e + 1) * per; ++r) {
                std::memcpy(src.data(), t.data + r * cols * 4, static_cast<size_t>(cols) * 4);
                for (float v : src) amax = std::max(amax, std::fabs(v));
            }
            float factor;
            std::memcpy(&factor, scale->data + e * 4, 4);
            EXPECT_EQ(factor, amax / (6.0f * 240.0f)) << t.name << " part " << e;
            for (int64_t r = e * per; r < (e + 1) * per; r += 37) {
                std::memcpy(src.data(), t.data + r * cols * 4, static_cast<size_t>(cols) * 4);
                compute_traits(QuantType::NVFP4)->to_float(q->data + r * quant_row_bytes(QuantType::NVFP4, cols), got.data(), cols);
                for (int64_t i = 0; i < cols; ++i) {
                    // Half FP4's widest step (2 of 6) of a 16-element block's largest magnitude,
                    // with the UE4M3 scale's rounding (3 mantissa bits: 1/16).
                    float block_max = 0.0f;
                    for (int64_t j = i / 16 * 16; j < i / 16 * 16 + 16; ++j) block_max = std::max(block_max, std::fabs(src[j]));
                    ASSERT_NEAR(got[i] * factor, src[i], block_max / 6.0f * 1.0625f + 1e-7f) << t.name << " row " << r << " " << i;
                }
            }
        }
    }
    EXPECT_EQ(matrices, 2 * 7);  // q, k, v, o and the three stacked experts of each layer
}

// A factor that is not a finite number is refused by
// name when the weights load, never multiplied in.
TEST(Quantize, Nvfp4FactorsThatAreNotFiniteAreRefused) {
    const std::string dir = test::scratch_dir("quantize_nvfp4_bad_scale");
    RandomModelSpec spec;
    spec.n_embd = 256;
    spec.n_layer = 1;
    spec.n_head = 4;
    spec.n_head_kv = 2;
    spec.n_ff = 256;
    spec.n_vocab = 512;
    spec.type = QuantType::F32;
    write_random_model(spec, dir + "/f32.gguf");
    const std::string model = dir + "/nvfp4.gguf";
    quantize_model(dir + "/f32.gguf", model, params_for("NVFP4"));
    {
        const LlamaModel good(model);
        EXPECT_NO_THROW(load_slice_weights(good, full_slice(good.hparams())));
    }
    uint64_t at = 0;
    {
        const GgufFile file(model);
        const GgufTensorInfo* t = file.find_tensor("blk.0.ffn_up.scale");
        ASSERT_NE(t, nullptr);
        at = file.data_offset() + t->offset;
    }
    for (const float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
        const std::string broken = dir + "/broken.gguf";
        std::filesystem::copy_file(model, broken, std::filesystem::copy_options::overwrite_existing);
        {
            std::fstream f(broken, std::ios::in | std::ios::out | std::ios::binary);
            f.seekp(static_cast<std::streamoff>(at));
            f.write(reinterpret_cast<const char*>(&bad), 4);
        }
        const LlamaModel m(broken);
        const std::string e = test::error_of([&] { load_slice_weights(m, full_slice(m.hparams())); });
        EXPECT_NE(e.find("'blk.0.ffn_up.scale'"), std::string::npos) << e;
        EXPECT_NE(e.find("not a finite factor"), std::string::npos) << e;
    }
}

}  // namespace tessera
