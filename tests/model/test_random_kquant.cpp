// gen-model's K-quant weights (model/random_model.h): Q4_K and Q6_K blocks
// drawn directly as codes, with llama.cpp's file type, and (once the engine
// has their kernels) values centred on 0 with the spread asked for.
#include "model/gguf_file.h"
#include "model/llama_model.h"
#include "model/random_model.h"
#include "ops/quant_traits.h"
#include "test_paths.h"
#include "util/error.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iterator>

namespace tessera {

namespace {

RandomModelSpec k_spec(QuantType type) {
    RandomModelSpec spec;
    spec.n_embd = 256;
    spec.n_layer = 2;
    spec.n_head = 4;
    spec.n_head_kv = 2;
    spec.n_ff = 512;
    spec.n_vocab = 300;
    spec.type = type;
    return spec;
}

}  // namespace

TEST(RandomKQuantModel, WritesLlamaCppFileTypesAndSameBytesForSameSeed) {
    const std::string dir = test::scratch_dir("random_kquant");
    for (auto [type, file_type] : {std::pair{QuantType::Q4_K, 15}, std::pair{QuantType::Q6_K, 18}}) {
        const RandomModelSpec spec = k_spec(type);
        write_random_model(spec, dir + "/a.gguf");
        write_random_model(spec, dir + "/b.gguf");
        EXPECT_EQ(test::read_bytes(dir + "/a.gguf"), test::read_bytes(dir + "/b.gguf"));
        const GgufFile f(dir + "/a.gguf");
        EXPECT_EQ(f.get_int("general.file_type"), file_type);
        EXPECT_EQ(f.get_int("general.quantization_version"), 2);
        EXPECT_EQ(f.find_tensor("blk.1.ffn_down.weight")->type, type);
        EXPECT_EQ(f.find_tensor("blk.1.ffn_down.weight")->n_bytes, 512u / 256u * 256u * layout_of(type).block_bytes);
        EXPECT_EQ(f.find_tensor("blk.1.ffn_norm.weight")->type, QuantType::F32);
    }
    RandomModelSpec bad = k_spec(QuantType::Q4_K);
    bad.n_ff = 320;
    try {
        write_random_model(bad, dir + "/c.gguf");
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("multiples of 256"), std::string::npos) << e.what();
    }
}

// Every matrix dequantizes to values of mean ~0 and standard deviation
// ~1/sqrt(cols), like the F32 and Q8_0/Q4_0 models.
TEST(RandomKQuantModel, ValuesAreCentredWithTheAskedSpread) {
    const std::string dir = test::scratch_dir("random_kquant_stats");
    for (QuantType type : {QuantType::Q4_K, QuantType::Q6_K}) {
        const QuantTraits* traits = scalar_traits(type);
        if (traits == nullptr) GTEST_SKIP() << quant_type_name(type) << " has no to_float in this build yet";
        write_random_model(k_spec(type), dir + "/m.gguf");
        const GgufFile f(dir + "/m.gguf");
        for (const auto& t : f.tensors()) {
            if (t.n_dims != 2) continue;
            std::vector<float> values(static_cast<size_t>(t.n_elements()));
            traits->to_float(t.data, values.data(), t.n_elements());
            double sum = 0.0, sum2 = 0.0;
            for (float v : values) {
                sum += v;
                sum2 += static_cast<double>(v) * v;
            }
            const double n = static_cast<double>(values.size());
            const double mean = sum / n;
            const double stddev = std::sqrt(sum2 / n - mean * mean);
            const double want = 1.0 / std::sqrt(static_cast<double>(t.ne[0]));
            EXPECT_LT(std::fabs(mean), 0.02 * want) << quant_type_name(type) << " " << t.name;
            EXPECT_NEAR(stddev, want, 0.03 * want) << quant_type_name(type) << " " << t.name;
        }
    }
}

}  // namespace tessera
