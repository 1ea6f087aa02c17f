// Every weight type against llama.cpp itself: tests/data/quant/<TYPE>.gguf
// holds rows quantized by ggml's own ggml_quantize_chunk (what llama-quantize
// calls), their dequantization by ggml's to_float, activation rows and ggml's
// CPU vec_dot of each pair (tests/data/SOURCES.md: the fork, the commit, the
// tool). Per type: our quantizer writes the same bytes, our dequantizer the
// same floats bit for bit, and our dot product agrees to rounding. Types we
// do not compute must be refused by name, never misread.
#include "model/gguf_file.h"
#include "ops/quant_traits.h"
#include "test_paths.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace tessera {

namespace {

struct Dump {
    GgufFile file;
    const GgufTensorInfo& input;
    const GgufTensorInfo& quantized;
    const GgufTensorInfo& dequantized;
    const GgufTensorInfo& x;
    const GgufTensorInfo& dot;

    explicit Dump(const std::string& path)
        : file(path),
          input(need("input")),
          quantized(need("quantized")),
          dequantized(need("dequantized")),
          x(need("x")),
          dot(need("dot")) {}

    const GgufTensorInfo& need(const char* name) {
        const GgufTensorInfo* t = file.find_tensor(name);
        if (t == nullptr) throw std::runtime_error(file.path() + ": no tensor " + name);
        return *t;
    }
};

std::string dump_path(const char* type) { return test::data_dir() + "/quant/" + type + ".gguf"; }

std::vector<float> floats(const GgufTensorInfo& t) {
    std::vector<float> v(static_cast<size_t>(t.n_elements()));
    std::memcpy(v.data(), t.data, v.size() * sizeof(float));
    return v;
}

class LlamaQuantized : public ::testing::TestWithParam<const char*> {};

TEST_P(LlamaQuantized, SameBytesSameFloatsSameDots) {
    const Dump dump(dump_path(GetParam()));
    const QuantType type = *parse_quant_type(GetParam());
    ASSERT_EQ(dump.quantized.type, type);
    const QuantTraits& ref = *scalar_traits(type);
    const QuantTraits& fast = require_weight_traits(type, GetParam());
    const int64_t n = dump.input.ne[0];
    const int64_t rows = dump.input.ne[1];
    const uint64_t row_bytes = quant_row_bytes(type, n);
    ASSERT_EQ(dump.quantized.n_bytes, row_bytes * rows);
    const auto input = floats(dump.input);
    const auto expected = floats(dump.dequantized);

    for (int64_t r = 0; r < rows; ++r) {
        SCOPED_TRACE("row " + std::to_string(r));
        const uint8_t* theirs = dump.quantized.data + r * row_bytes;
        // The same bytes as ggml's quantizer (without an importance matrix; IQ2_XXS, IQ2_XS and IQ1_S,
        // which ggml makes only with one, with all ones, as our quantizer weighs without one).
        std::vector<uint8_t> ours(row_bytes);
        ref.from_float(input.data() + r * n, ours.data(), n);
        int64_t differing = 0;
        for (uint64_t i = 0; i < row_bytes; ++i) differing += ours[i] != theirs[i];
        EXPECT_EQ(differing, 0) << "bytes differing from ggml's quantization";
        // The same floats from ggml's bytes, bit for bit, by the reference and the dispatched kernel.
        std::vector<float> decoded(static_cast<size_t>(n)), decoded_fast(static_cast<size_t>(n));
        ref.to_float(theirs, decoded.data(), n);
        fast.to_float(theirs, decoded_fast.data(), n);
        EXPECT_EQ(std::memcmp(decoded.data(), expected.data() + r * n, n * sizeof(float)), 0);
        EXPECT_EQ(std::memcmp(decoded_fast.data(), decoded.data(), n * sizeof(float)), 0);
    }

    // Dot products against the float dot product of the decoded rows (the
    // exact value up to float rounding), and against ggml's vec_dot where
    // ggml converts activations as we do (Q8_0, Q8_K). For Q5_1 ggml takes
    // Q8_1 activations and for BF16 BF16 ones; its dots there are 0.6% and 3%
    // from the decoded rows' (checked: ours are within rounding of them).
    const auto x = floats(dump.x);
    const auto dots = floats(dump.dot);
    const std::string their_activations = dump.file.get_string("quant_dump.vec_dot_type");
    const bool same_activations = their_activations == quant_type_name(ref.vec_dot_type);
    const QuantTraits& act = require_compute_traits(ref.vec_dot_type, "activations");
    std::vector<uint8_t> xq(quant_row_bytes(ref.vec_dot_type, n));
    std::vector<float> wf(static_cast<size_t>(n)), xf(static_cast<size_t>(n));
    for (int64_t c = 0; c < dump.x.ne[1]; ++c) {
        act.from_float(x.data() + c * n, xq.data(), n);
        act.to_float(xq.data(), xf.data(), n);
        for (int64_t r = 0; r < rows; ++r) {
            SCOPED_TRACE("row " + std::to_string(r) + " column " + std::to_string(c));
            const uint8_t* w = dump.quantized.data + r * row_bytes;
            ref.to_float(w, wf.data(), n);
            double exact = 0.0, magnitude = 0.0;
            for (int64_t i = 0; i < n; ++i) {
                exact += static_cast<double>(wf[i]) * xf[i];
                magnitude += std::fabs(static_cast<double>(wf[i]) * xf[i]);
            }
            const double tolerance = 1e-5 * magnitude + 1e-30;
            const float ours = ref.vec_dot(n, w, xq.data());
            EXPECT_NEAR(ours, exact, tolerance);
            EXPECT_NEAR(fast.vec_dot(n, w, xq.data()), exact, tolerance);
            if (same_activations) {
                EXPECT_NEAR(ours, dots[c * rows + r], tolerance);
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Types, LlamaQuantized,
                         ::testing::Values("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K",
                                           "IQ4_NL", "IQ4_XS", "MXFP4", "BF16", "IQ2_XXS", "IQ2_XS", "IQ2_S",
                                           "IQ3_XXS", "IQ3_S", "IQ1_S", "IQ1_M", "Q1_0", "NVFP4", "Q2_0", "TQ1_0",
                                           "TQ2_0"),
                         [](const auto& info) { return std::string(info.param); });

// Types a GGUF can name that hold no weights Tessera computes with (Q8_1, an
// activation type llama.cpp never stores weights in; F64): a weight of that
// type is refused with the type's name, never misread.
TEST(LlamaQuantizedUnsupported, RefusedByName) {
    for (const char* name : {"Q8_1", "F64"}) {
        const QuantType type = *parse_quant_type(name);
        try {
            require_weight_traits(type, "blk.0.ffn_up.weight");
            ADD_FAILURE() << name << " was accepted";
        } catch (const std::exception& e) {
            EXPECT_NE(std::string(e.what()).find(std::string("tensor type ") + name + " is not supported"), std::string::npos)
                << e.what();
        }
    }
}

}  // namespace

}  // namespace tessera
