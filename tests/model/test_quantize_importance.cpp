// Quantizing with llama.cpp's importance matrix (tessera quantize --imatrix):
// the reader of both of llama-imatrix's formats, hostile files refused with
// their fault named, and every llama-quantize target's tensors, importance
// weighted, the same bytes as llama-quantize --imatrix wrote for the same
// model (tests/data/quant/imatrix-digests.txt: each tensor's type and crc32,
// tests/data/SOURCES.md: how they were made).
#include "model/gguf_file.h"
#include "model/importance_matrix.h"
#include "model/quantize_model.h"
#include "model/random_model.h"
#include "test_build.h"
#include "test_paths.h"
#include "util/error.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace tessera {

namespace {

std::string quant_data(const std::string& name) { return test::data_dir() + "/quant/" + name; }

// The model llama-imatrix and llama-quantize were run on: tessera gen-model
// --dim 256 --layers 4 --heads 8 --kv-heads 2 --ffn 512 --type F32.
std::string g4s_model() {
    const std::string path = test::scratch_dir("quantize_importance") + "/g4s.gguf";
    RandomModelSpec spec;
    spec.n_embd = 256;
    spec.n_layer = 4;
    spec.n_head = 8;
    spec.n_head_kv = 2;
    spec.n_ff = 512;
    spec.type = QuantType::F32;
    write_random_model(spec, path);
    return path;
}

void write_bytes(const std::string& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string importance_error_of(const std::string& path) {
    try {
        read_importance_matrix(path);
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST(QuantizeImportance, BothFormatsReadAsLlamaQuantizeReadsThem) {
    const ImportanceMatrix gguf = read_importance_matrix(quant_data("imatrix-g4s.gguf"));
    const ImportanceMatrix dat = read_importance_matrix(quant_data("imatrix-g4s.dat"));
    // 4 layers x 7 matrices (llama-imatrix leaves out output.weight, and
    // the embedding is a lookup).
    EXPECT_EQ(gguf.entries.size(), 28u);
    ASSERT_EQ(gguf.entries.size(), dat.entries.size());
    EXPECT_GT(gguf.chunk_count, 0);
    ASSERT_FALSE(gguf.datasets.empty());
    EXPECT_NE(gguf.datasets.front().find("little_stories"), std::string::npos);
    for (const auto& [name, values] : gguf.entries) {
        SCOPED_TRACE(name);
        const std::vector<float>* other = dat.find(name);
        ASSERT_NE(other, nullptr);
        ASSERT_EQ(values.size(), other->size());
        const size_t cols = name.find("ffn_down") != std::string::npos ? 512u : 256u;
        EXPECT_EQ(values.size(), cols);
        // The same means from sums and counts (GGUF) and from the legacy
        // sums times calls: equal to rounding.
        for (size_t i = 0; i < values.size(); ++i) {
            EXPECT_GT(values[i], 0.0f);
            EXPECT_NEAR(values[i], (*other)[i], 1e-5f * values[i]);
        }
    }
}

TEST(QuantizeImportance, HostileFilesAreRefusedWithTheirFault) {
    const std::string dir = test::scratch_dir("quantize_importance_hostile");
    std::ifstream in(quant_data("imatrix-g4s.dat"), std::ios::binary);
    const std::string dat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // Truncated inside the first entry's values.
    write_bytes(dir + "/truncated.dat", dat.substr(0, 200));
    EXPECT_NE(importance_error_of(dir + "/truncated.dat").find("announces"), std::string::npos)
        << importance_error_of(dir + "/truncated.dat");
    // A name length of 2^31 - 1.
    std::string huge = dat;
    const int32_t len = 0x7fffffff;
    std::memcpy(huge.data() + 4, &len, 4);
    write_bytes(dir + "/huge.dat", huge);
    EXPECT_NE(importance_error_of(dir + "/huge.dat").find("name of"), std::string::npos)
        << importance_error_of(dir + "/huge.dat");
    // A NaN among the values (after the first name, its calls and count).
    std::string nan = dat;
    int32_t name_len;
    std::memcpy(&name_len, dat.data() + 4, 4);
    const float bad = std::nanf("");
    std::memcpy(nan.data() + 8 + name_len + 8 + 4 * 3, &bad, 4);
    write_bytes(dir + "/nan.dat", nan);
    EXPECT_NE(importance_error_of(dir + "/nan.dat").find("not finite"), std::string::npos)
        << importance_error_of(dir + "/nan.dat");
    write_bytes(dir + "/empty.dat", "");
    EXPECT_NE(importance_error_of(dir + "/empty.dat").find("truncated"), std::string::npos)
        << importance_error_of(dir + "/empty.dat");
    // A GGUF that is a model, not an importance matrix.
    EXPECT_NE(importance_error_of(g4s_model()).find("imatrix.datasets"), std::string::npos);
}

TEST(QuantizeImportance, ItsAbsenceOrAnotherModelsIsRefused) {
    const std::string model = g4s_model();
    const GgufFile file(model);
    QuantizeParams params;
    // The targets llama-quantize makes only with one, IQ1's included.
    for (const char* target : {"IQ1_S", "IQ1_M", "IQ2_XXS"}) {
        params.target = *parse_quantize_target(target);
        try {
            plan_quantization(file, params);
            ADD_FAILURE() << target << " without an importance matrix was planned";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("--imatrix"), std::string::npos) << e.what();
        }
    }
    // An importance matrix whose sizes are another model's.
    ImportanceMatrix other = read_importance_matrix(quant_data("imatrix-g4s.gguf"));
    other.entries["blk.0.attn_q.weight"].resize(128);
    params.importance = &other;
    try {
        plan_quantization(file, params);
        FAIL() << "a mismatched importance matrix was accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("another model"), std::string::npos) << e.what();
    }
    // One without an entry a low-bit matrix needs.
    other = read_importance_matrix(quant_data("imatrix-g4s.gguf"));
    other.entries.erase("blk.2.ffn_up.weight");
    try {
        plan_quantization(file, params);
        FAIL() << "a matrix without importance was planned at IQ2_XXS";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("blk.2.ffn_up.weight"), std::string::npos) << e.what();
    }
}

namespace {

// target -> tensor -> "TYPE crc32", as llama-quantize --imatrix wrote them.
std::map<std::string, std::map<std::string, std::string>> expected_digests() {
    std::map<std::string, std::map<std::string, std::string>> expected;
    std::istringstream in(test::read_text(quant_data("imatrix-digests.txt")));
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        std::istringstream fields(line);
        std::string target, tensor, type, crc;
        fields >> target >> tensor >> type >> crc;
        expected[target][tensor] = type + " " + crc;
    }
    return expected;
}

// Under emulation (scripts/test --arm64: qemu, about 17 times slower) and
// the sanitizers (3.5 times), the mixes that together quantize every type
// once: which tensors get which type is integer logic, and the arithmetic
// whose bits a CPU could change, and the memory each quantizer touches, is
// each type's quantizer. The Release runs check all 25.
bool checks_every_target() { return std::getenv("TESSERA_TEST_EMULATED") == nullptr && !test::kSanitized; }
const std::set<std::string> kCoveringTargets = {"Q2_K",   "Q5_K_M",  "Q4_0",   "Q5_0",    "Q5_1",  "IQ4_NL",
                                                "IQ4_XS", "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ1_M"};

// The targets are checked in kShards tests, every kShards-th one each, so
// that two cores share them (under qemu one test of them all was the ARM
// step's last ~100 s, alone on one core).
constexpr int kShards = 3;

}  // namespace

// The covering mixes, as planned, write every type the 25 mixes' files hold.
TEST(QuantizeImportance, TheCoveringTargetsWriteEveryTypeOfTheMixes) {
    const auto expected = expected_digests();
    ASSERT_EQ(expected.size(), 25u);
    std::set<std::string> in_digests;
    for (const auto& [target, tensors] : expected) {
        for (const auto& [tensor, digest] : tensors) in_digests.insert(digest.substr(0, digest.find(' ')));
    }
    EXPECT_EQ(in_digests.size(), 17u);
    const ImportanceMatrix importance = read_importance_matrix(quant_data("imatrix-g4s.gguf"));
    const GgufFile file(g4s_model());
    std::set<std::string> planned;
    for (const std::string& target : kCoveringTargets) {
        ASSERT_EQ(expected.count(target), 1u) << target;
        QuantizeParams params;
        params.target = *parse_quantize_target(target);
        params.importance = &importance;
        for (const TensorQuantPlan& t : plan_quantization(file, params)) {
            if (t.to != QuantType::F32) planned.insert(quant_type_name(t.to));
        }
    }
    EXPECT_EQ(planned, in_digests);
}

class QuantizeImportanceShard : public ::testing::TestWithParam<int> {};

TEST_P(QuantizeImportanceShard, EveryTargetWritesLlamaQuantizesBytes) {
    const auto expected = expected_digests();
    ASSERT_EQ(expected.size(), 25u);
    const std::string model = g4s_model();
    const ImportanceMatrix importance = read_importance_matrix(quant_data("imatrix-g4s.gguf"));
    const std::string dir = test::scratch_dir("quantize_importance_targets_" + std::to_string(GetParam()));
    int index = 0, quantized = 0;
    for (const auto& [target, tensors] : expected) {
        if (!checks_every_target() && kCoveringTargets.count(target) == 0) continue;
        if (index++ % kShards != GetParam()) continue;
        SCOPED_TRACE(target);
        ++quantized;
        QuantizeParams params;
        params.target = *parse_quantize_target(target);
        params.n_threads = 2;
        params.importance = &importance;
        const std::string out = dir + "/" + target + ".gguf";
        quantize_model(model, out, params);
        const GgufFile file(out);
        EXPECT_EQ(file.find_string("quantize.imatrix.file"), quant_data("imatrix-g4s.gguf"));
        int checked = 0;
        for (const GgufTensorInfo& t : file.tensors()) {
            if (t.type == QuantType::F32) continue;
            const auto it = tensors.find(t.name);
            ASSERT_NE(it, tensors.end()) << t.name << " is " << quant_type_name(t.type);
            char crc[16];
            std::snprintf(crc, sizeof crc, "%08lx", crc32(0L, t.data, static_cast<uInt>(t.n_bytes)));
            EXPECT_EQ(std::string(quant_type_name(t.type)) + " " + crc, it->second) << t.name;
            ++checked;
        }
        EXPECT_EQ(checked, static_cast<int>(tensors.size()));
    }
    // Each shard has its share: 4 of the 12 covering targets, 8 or 9 of the 25.
    EXPECT_GE(quantized, checks_every_target() ? 8 : 4);
}

INSTANTIATE_TEST_SUITE_P(Shards, QuantizeImportanceShard, ::testing::Range(0, kShards));

}  // namespace tessera
