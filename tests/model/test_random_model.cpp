#include "model/gguf_file.h"
#include "model/hparams.h"
#include "model/llama_model.h"
#include "model/random_model.h"
#include "test_paths.h"
#include "util/error.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace tessera {

namespace {}  // namespace

TEST(RandomModel, SameSpecSameBytesAndTheShapeAsked) {
    const std::string dir = test::scratch_dir("random_model");
    for (QuantType type : {QuantType::F32, QuantType::F16, QuantType::Q8_0, QuantType::Q4_0}) {
        RandomModelSpec spec;
        spec.n_embd = 128;
        spec.n_layer = 3;
        spec.n_head = 8;
        spec.n_head_kv = 2;
        spec.n_ff = 320;
        spec.n_vocab = 300;
        spec.type = type;
        spec.seed = 5;
        write_random_model(spec, dir + "/a.gguf");
        write_random_model(spec, dir + "/b.gguf");
        EXPECT_EQ(test::read_bytes(dir + "/a.gguf"), test::read_bytes(dir + "/b.gguf")) << quant_type_name(type);
        spec.seed = 6;
        write_random_model(spec, dir + "/c.gguf");
        EXPECT_NE(test::read_bytes(dir + "/a.gguf"), test::read_bytes(dir + "/c.gguf"));

        const LlamaModel model(dir + "/a.gguf");
        const ModelHParams& hp = model.hparams();
        EXPECT_EQ(hp.n_embd, 128);
        EXPECT_EQ(hp.n_layer, 3);
        EXPECT_EQ(hp.n_head_kv, 2);
        EXPECT_EQ(hp.n_ff, 320);
        EXPECT_EQ(hp.n_vocab, 300);
        const SliceWeights w = load_slice_weights(model, full_slice(hp));
        EXPECT_EQ(w.layers[0].wq.type, type);
        EXPECT_EQ(w.layers.size(), 3u);
    }
}

// gpt-oss's layout: MXFP4 experts beside Q8_0 matrices (--dense-type); and a
// model of zero weights whose data takes no disk space (--zero-weights), with
// the same header as the random one.
TEST(RandomModel, DenseTypeAndZeroWeights) {
    const std::string dir = test::scratch_dir("random_model_dense_type");
    RandomModelSpec spec;
    apply_model_preset(spec, "gpt-oss");
    spec.n_embd = 256;
    spec.n_layer = 2;
    spec.n_head = 4;
    spec.n_head_kv = 2;
    spec.n_ff = 256;
    spec.n_vocab = 300;
    spec.type = QuantType::MXFP4;
    spec.dense_type = QuantType::Q8_0;
    write_random_model(spec, dir + "/random.gguf");
    spec.zero_weights = true;
    write_random_model(spec, dir + "/zero.gguf");
    const GgufFile random(dir + "/random.gguf"), zero(dir + "/zero.gguf");
    ASSERT_EQ(random.tensors().size(), zero.tensors().size());
    EXPECT_EQ(std::filesystem::file_size(dir + "/random.gguf"), std::filesystem::file_size(dir + "/zero.gguf"));
    int experts = 0;
    for (size_t i = 0; i < random.tensors().size(); ++i) {
        const GgufTensorInfo& a = random.tensors()[i];
        const GgufTensorInfo& b = zero.tensors()[i];
        EXPECT_EQ(a.name, b.name);
        EXPECT_EQ(a.type, b.type);
        EXPECT_EQ(a.n_bytes, b.n_bytes);
        if (a.n_dims == 3) {
            EXPECT_EQ(a.type, QuantType::MXFP4) << a.name;
            ++experts;
        } else if (a.n_dims == 2 && a.name.ends_with(".weight") && a.name.find("ffn_gate_inp") == std::string::npos) {
            EXPECT_EQ(a.type, QuantType::Q8_0) << a.name;
        }
        EXPECT_TRUE(std::all_of(b.data, b.data + b.n_bytes, [](uint8_t v) { return v == 0; })) << b.name;
        EXPECT_FALSE(std::all_of(a.data, a.data + a.n_bytes, [](uint8_t v) { return v == 0; })) << a.name;
    }
    EXPECT_EQ(experts, 6);
    // A dense model has no experts to set apart.
    RandomModelSpec dense;
    dense.dense_type = QuantType::Q8_0;
    EXPECT_THROW(write_random_model(dense, dir + "/dense.gguf"), Error);
}

TEST(RandomModel, CopiesTheVocabulary) {
    const std::string dir = test::scratch_dir("random_model_vocab");
    RandomModelSpec spec;
    spec.n_embd = 64;
    spec.n_head = 2;
    spec.n_head_kv = 1;
    spec.n_ff = 64;
    spec.n_layer = 1;
    spec.type = QuantType::Q8_0;
    spec.vocab_from = test::data_dir() + "/vocab/ggml-vocab-llama-spm.gguf";
    write_random_model(spec, dir + "/m.gguf");
    const GgufFile f(dir + "/m.gguf");
    EXPECT_EQ(f.find_array("tokenizer.ggml.tokens", GgufValueType::String)->count, 32000u);
    EXPECT_EQ(read_hparams(f).n_vocab, 32000);
}

TEST(RandomModel, RejectsImpossibleShapes) {
    RandomModelSpec spec;
    spec.n_embd = 100;
    spec.n_head = 3;
    EXPECT_THROW(write_random_model(spec, "/nonexistent/x.gguf"), Error);
    spec = RandomModelSpec{};
    spec.n_ff = 100;
    spec.type = QuantType::Q4_0;
    EXPECT_THROW(write_random_model(spec, "/nonexistent/x.gguf"), Error);
    // Experts: a count out of range, more used than there are, a mixture
    // family without experts; each refused by name before any file is made.
    const std::string ok = test::scratch_dir("random_model_experts") + "/m.gguf";
    const auto refusal = [&](int32_t n_expert, int32_t used, const char* arch) {
        RandomModelSpec s;
        s.arch = arch;
        s.n_expert = n_expert;
        s.n_expert_used = used;
        try {
            write_random_model(s, ok);
        } catch (const Error& e) {
            return std::string(e.what());
        }
        return std::string("written");
    };
    EXPECT_NE(refusal(-1, 1, "llama").find("--experts must be in [0, 1024]"), std::string::npos);
    EXPECT_NE(refusal(5000, 2, "llama").find("--experts must be in [0, 1024]"), std::string::npos);
    EXPECT_NE(refusal(4, 9, "llama").find("--experts-used must be in [1, --experts] (9 of 4)"), std::string::npos);
    EXPECT_NE(refusal(4, 0, "llama").find("--experts-used must be in [1, --experts]"), std::string::npos);
    EXPECT_NE(refusal(0, 0, "qwen3moe").find("--experts must be positive"), std::string::npos);
    EXPECT_EQ(refusal(4, 2, "llama"), "written");
    spec = RandomModelSpec{};
    EXPECT_THROW(write_random_model(spec, "/nonexistent/x.gguf"), Error);  // cannot create the file
}

}  // namespace tessera
