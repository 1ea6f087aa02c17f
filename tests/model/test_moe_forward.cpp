// A mixture of experts' FFN in the slice forward pass: against a plain
// reference (the router, the top k and every chosen expert's SwiGLU FFN in
// double from the file's weights), a row's bits the same in a batch (each
// expert's rows together) and alone (only its experts' rows read), the
// same bits with later layers streamed from disk, or only some layers'
// experts (expert by expert); broken expert metadata and
// tensors refused with a reason.
#include "model/gguf_file.h"
#include "model/gguf_writer.h"
#include "model/llama_model.h"
#include "model/random_model.h"
#include "model/slice_forward.h"
#include "test_paths.h"
#include "util/rng.h"
#include "util/thread_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <numeric>

namespace tessera {

namespace {

std::string moe_model(QuantType type) {
    const std::string path = test::scratch_dir("moe_forward") + "/moe-" + std::string(quant_type_name(type)) + ".gguf";
    RandomModelSpec spec;
    apply_model_preset(spec, "qwen3moe");
    spec.n_embd = 256;
    spec.n_layer = 3;
    spec.n_head = 4;
    spec.n_head_kv = 2;
    spec.head_dim = 64;
    spec.n_ff = 256;
    spec.n_vocab = 300;
    spec.n_expert = 8;
    spec.n_expert_used = 3;
    spec.type = type;
    write_random_model(spec, path);
    return path;
}

constexpr int kRows = 6;

std::vector<float> inputs(int64_t n) {
    Rng rng(11);
    std::vector<float> h(kRows * static_cast<size_t>(n));
    for (float& v : h) v = rng.next_normal();
    return h;
}

// Layer `layer`'s FFN partials of kRows rows: in one batch, or each alone.
std::vector<double> ffn(const LlamaModel& model, int layer, bool batched, uint64_t budget = UINT64_MAX,
                        bool private_weights = true) {
    ThreadPool pool(2);
    ForwardConfig config;
    config.n_ctx = 16;
    config.n_batch = kRows;
    config.weight_budget = budget;
    config.private_weights = private_weights;
    SliceForward f(model, full_slice(model.hparams()), config, pool);
    if (budget != UINT64_MAX) {
        EXPECT_TRUE(f.streamed() != nullptr && f.streamed()->streamed_count() > 0);
    }
    const int64_t n = model.hparams().n_embd;
    const std::vector<float> h = inputs(n);
    std::vector<double> out(h.size());
    if (batched) {
        f.ffn_partial(layer, h.data(), kRows, out.data());
    } else {
        for (int t = 0; t < kRows; ++t) f.ffn_partial(layer, h.data() + t * n, 1, out.data() + t * n);
    }
    return out;
}

std::vector<double> row_of(const Matrix& m, int64_t r) {
    std::vector<float> f(static_cast<size_t>(m.cols));
    dequantize_row(m, r, f.data());
    return std::vector<double>(f.begin(), f.end());
}

// The FFN of one row in double, from the mapped file's weights.
std::vector<double> reference_ffn(const LlamaModel& model, int layer, const float* h) {
    const ModelHParams& hp = model.hparams();
    const SliceWeights w = load_slice_weights(model, full_slice(hp));
    const LayerWeights& l = w.layers[static_cast<size_t>(layer)];
    const int64_t n = hp.n_embd, ff = hp.n_ff;
    const auto dot = [&](const std::vector<double>& a, const float* b) {
        double s = 0;
        for (int64_t i = 0; i < n; ++i) s += a[static_cast<size_t>(i)] * b[i];
        return s;
    };
    std::vector<double> p(static_cast<size_t>(hp.n_expert));
    double max = -INFINITY, sum = 0;
    for (int e = 0; e < hp.n_expert; ++e) max = std::max(max, p[static_cast<size_t>(e)] = dot(row_of(l.router, e), h));
    for (double& v : p) sum += v = std::exp(v - max);
    for (double& v : p) v /= sum;
    std::vector<int> order(p.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });
    double chosen = 0;
    for (int i = 0; i < hp.n_expert_used; ++i) chosen += p[static_cast<size_t>(order[static_cast<size_t>(i)])];
    std::vector<double> out(static_cast<size_t>(n), 0.0);
    for (int i = 0; i < hp.n_expert_used; ++i) {
        const int e = order[static_cast<size_t>(i)];
        const double weight = p[static_cast<size_t>(e)] / chosen;
        std::vector<double> act(static_cast<size_t>(ff));
        for (int64_t c = 0; c < ff; ++c) {
            const double g = dot(row_of(l.gate_exps, e * ff + c), h), u = dot(row_of(l.up_exps, e * ff + c), h);
            act[static_cast<size_t>(c)] = g / (1.0 + std::exp(-g)) * u;
        }
        for (int64_t j = 0; j < n; ++j) {
            const std::vector<double> down = row_of(l.down_exps, e * n + j);
            double s = 0;
            for (int64_t c = 0; c < ff; ++c) s += down[static_cast<size_t>(c)] * act[static_cast<size_t>(c)];
            out[static_cast<size_t>(j)] += weight * s;
        }
    }
    return out;
}

}  // namespace

TEST(MoeForward, MatchesThePlainReference) {
    const LlamaModel model(moe_model(QuantType::F32));
    const int64_t n = model.hparams().n_embd;
    const std::vector<float> h = inputs(n);
    const std::vector<double> got = ffn(model, 1, true);
    for (int t = 0; t < kRows; ++t) {
        const std::vector<double> want = reference_ffn(model, 1, h.data() + t * n);
        double scale = 0;
        for (double v : want) scale = std::max(scale, std::fabs(v));
        ASSERT_GT(scale, 1e-3);
        for (int64_t j = 0; j < n; ++j) {
            ASSERT_NEAR(got[static_cast<size_t>(t * n + j)], want[static_cast<size_t>(j)], 2e-5 * scale)
                << "row " << t << " element " << j;
        }
    }
}

TEST(MoeForward, ARowsBitsDoNotDependOnItsBatchOrOnStreaming) {
    for (const QuantType type : {QuantType::Q8_0, QuantType::Q4_K, QuantType::F32}) {
        const LlamaModel model(moe_model(type));
        const std::vector<double> batched = ffn(model, 2, true);
        EXPECT_EQ(ffn(model, 2, false), batched) << quant_type_name(type) << ": rows one at a time";
        // A budget of one byte keeps no layer private: every layer streams.
        EXPECT_EQ(ffn(model, 2, true, 1), batched) << quant_type_name(type) << ": streamed layers";
        // From the mapped file (rows, not groups of 16): the same sums in another order.
        const std::vector<double> mapped = ffn(model, 2, true, UINT64_MAX, false);
        double scale = 0;
        for (double v : batched) scale = std::max(scale, std::fabs(v));
        for (size_t i = 0; i < mapped.size(); ++i) ASSERT_NEAR(mapped[i], batched[i], 1e-4 * scale) << i;
    }
}

// A router whose F32 values are all BF16 values (as convert_hf_to_gguf.py
// writes them from a BF16 checkpoint, and gen-model does) is held as BF16
// in private memory: half its bytes, and the FFN's bits are those of the
// same router held as F32 (one value per layer moved off the BF16 grid by
// its lowest bit keeps a router F32; that layer's choices may then differ,
// so the layers compared keep their BF16 routers in both files).
TEST(MoeForward, ARouterOfBf16ValuesIsHeldAsBf16WithTheSameBits) {
    const std::string path = moe_model(QuantType::F32);  // no group layout: the mapped file's kernels
    const std::string off_grid = path.substr(0, path.rfind('/')) + "/moe-router-f32.gguf";
    {
        std::ifstream in(path, std::ios::binary);
        std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        const LlamaModel model(path);
        // Layer 0's router: its first 64 bytes found in the file, its first value's lowest bit set.
        const GgufTensorInfo* router = model.file().find_tensor("blk.0.ffn_gate_inp.weight");
        ASSERT_NE(router, nullptr);
        const size_t at = bytes.find(std::string(reinterpret_cast<const char*>(router->data), 64));
        ASSERT_NE(at, std::string::npos);
        ASSERT_EQ(bytes.find(std::string(reinterpret_cast<const char*>(router->data), 64), at + 1), std::string::npos);
        bytes[at] = static_cast<char>(bytes[at] | 1);
        std::ofstream(off_grid, std::ios::binary) << bytes;
    }
    const LlamaModel bf16_valued(path), one_off(off_grid);
    const ModelHParams& hp = bf16_valued.hparams();
    ThreadPool pool(2);
    ForwardConfig config;
    config.n_ctx = 16;
    config.n_batch = kRows;
    SliceForward narrowed(bf16_valued, full_slice(hp), config, pool), kept(one_off, full_slice(hp), config, pool);
    // Layer 0's router stays F32 in the second: 2 more bytes a weight.
    EXPECT_EQ(kept.private_weight_bytes() - narrowed.private_weight_bytes(),
              static_cast<uint64_t>(hp.n_expert) * static_cast<uint64_t>(hp.n_embd) * 2);
    // Layers 1 and 2: BF16 routers in both, the same bits as each other and
    // as the mapped file's F32 routers (--mmap: no private copy).
    config.private_weights = false;
    SliceForward mapped(bf16_valued, full_slice(hp), config, pool);
    EXPECT_EQ(mapped.private_weight_bytes(), 0u);
    const std::vector<float> h = inputs(hp.n_embd);
    for (int layer : {1, 2}) {
        std::vector<double> a(h.size()), b(h.size()), c(h.size());
        narrowed.ffn_partial(layer, h.data(), kRows, a.data());
        kept.ffn_partial(layer, h.data(), kRows, b.data());
        mapped.ffn_partial(layer, h.data(), kRows, c.data());
        EXPECT_EQ(a, b) << "layer " << layer;
        EXPECT_EQ(a, c) << "layer " << layer;
    }
    // The layer whose router differs by one bit in one value stays close.
    std::vector<double> a(h.size()), b(h.size());
    narrowed.ffn_partial(0, h.data(), kRows, a.data());
    kept.ffn_partial(0, h.data(), kRows, b.data());
    for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-3) << i;
}

// Larger than memory by a little: the last layer's experts stream expert by
// expert (in their private layout, outside the window of whole layers),
// everything else stays private, and the bits are those of an all-private
// run, for one row (k experts read) and a batch (every expert read).
TEST(MoeForward, ExpertsStreamedOneByOneGiveTheSameBits) {
    for (const QuantType type : {QuantType::Q8_0, QuantType::Q4_K}) {
        const LlamaModel model(moe_model(type));
        ThreadPool pool(2);
        ForwardConfig config;
        config.n_ctx = 16;
        config.n_batch = kRows;
        uint64_t all = 0;
        {
            const SliceForward whole(model, full_slice(model.hparams()), config, pool);
            all = whole.private_weight_bytes();
            EXPECT_EQ(whole.streamed_bytes_per_token(), 0u);
        }
        config.weight_budget = all - 1;
        SliceForward f(model, full_slice(model.hparams()), config, pool);
        ASSERT_NE(f.streamed(), nullptr);
        EXPECT_EQ(f.streamed()->streamed_count(), 0) << "no whole layer streams";
        // A token reads k = 3 of the last layer's 8 experts.
        EXPECT_GT(f.streamed_bytes_per_token(), 0u);
        EXPECT_LT(f.private_weight_bytes(), all);
        const int64_t n = model.hparams().n_embd;
        const std::vector<float> h = inputs(n);
        for (const int layer : {2, 1}) {
            std::vector<double> batched(h.size()), single(h.size());
            f.ffn_partial(layer, h.data(), kRows, batched.data());
            for (int t = 0; t < kRows; ++t) f.ffn_partial(layer, h.data() + t * n, 1, single.data() + t * n);
            EXPECT_EQ(batched, ffn(model, layer, true)) << quant_type_name(type) << " layer " << layer;
            EXPECT_EQ(single, batched) << quant_type_name(type) << " layer " << layer;
        }
        EXPECT_EQ(f.expert_reuse().choices, static_cast<uint64_t>(2 * kRows * 3));
    }
}

}  // namespace tessera

namespace tessera {

namespace {

// The Q8_0 model rewritten: key `key` set to `value` (or, with value < 0,
// dropped), and tensor `reshape` (if named) written with its last two
// dimensions swapped.
std::string rewritten(const std::string& key, int64_t value, const std::string& reshape = "") {
    const GgufFile in(moe_model(QuantType::Q8_0));
    GgufWriter out;
    for (const GgufKv& kv : in.metadata()) {
        if (kv.key != key) out.set_value(kv.key, kv.value);
    }
    if (value >= 0) out.set_u32(key, static_cast<uint32_t>(value));
    for (const GgufTensorInfo& t : in.tensors()) {
        std::vector<int64_t> ne(t.ne, t.ne + t.n_dims);
        if (t.name == reshape) std::swap(ne[1], ne[2]);
        const uint8_t* src = t.data;
        out.add_tensor(t.name, t.type, ne, [src](uint8_t* dst, uint64_t n) { std::memcpy(dst, src, n); });
    }
    const std::string path = test::scratch_dir("moe_forward") + "/bad-" + key + std::to_string(value) + reshape + ".gguf";
    out.write(path);
    return path;
}

std::string error_of(const std::string& path) {
    try {
        const LlamaModel model(path);
        const SliceWeights w = load_slice_weights(model, full_slice(model.hparams()));
    } catch (const std::exception& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST(MoeForward, ABrokenMixtureOfExpertsIsRefusedWithAReason) {
    EXPECT_NE(error_of(rewritten("qwen3moe.expert_used_count", 9)).find("expert_used_count' = 9 is out of range"),
              std::string::npos);
    EXPECT_NE(error_of(rewritten("qwen3moe.expert_used_count", -1)).find("expert_used_count"), std::string::npos);
    EXPECT_NE(error_of(rewritten("qwen3moe.expert_count", -1)).find("'qwen3moe.expert_count' is missing"),
              std::string::npos);
    EXPECT_NE(error_of(rewritten("qwen3moe.expert_count", 4000)).find("expert_count' = 4000 is out of range"),
              std::string::npos);
    // More experts than the tensors hold.
    EXPECT_NE(error_of(rewritten("qwen3moe.expert_count", 16)).find("ffn_gate_inp.weight' has shape"),
              std::string::npos);
    EXPECT_NE(error_of(rewritten("qwen3moe.expert_shared_count", 1)).find("shared experts"), std::string::npos);
    EXPECT_NE(error_of(rewritten("unused", -1, "blk.1.ffn_up_exps.weight")).find("ffn_up_exps.weight' has shape"),
              std::string::npos);
}

}  // namespace tessera
