// Weights copied into private memory (copy_to_private_memory): a slice keeps
// exactly its own rows, byte for byte the file's (in groups of 16 rows where
// this CPU has a kernel for them), outside the file's mapping; it computes what
// the mapped file computes, and the same bits however the model is split.
#include "model/llama_model.h"
#include "model/random_model.h"
#include "model/reduction_units.h"
#include "model/slice_forward.h"
#include "ops/quant_traits.h"
#include "ops/row_groups.h"
#include "test_paths.h"
#include "util/rng.h"
#include "util/thread_pool.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>

namespace tessera {

namespace {

std::string small_gqa_model() {
    const std::string path = test::scratch_dir("private_weights") + "/gqa-q4_0.gguf";
    RandomModelSpec spec;
    spec.n_embd = 128;
    spec.n_layer = 2;
    spec.n_head = 8;
    spec.n_head_kv = 4;
    spec.n_ff = 320;
    spec.n_vocab = 300;
    spec.type = QuantType::Q4_0;
    write_random_model(spec, path);
    return path;
}

// Row r of m, in GGUF's layout whichever layout m has.
std::vector<uint8_t> row_of(const Matrix& m, int64_t r) {
    std::vector<uint8_t> row(m.row_bytes);
    if (!m.grouped) {
        std::memcpy(row.data(), m.row(r), m.row_bytes);
        return row;
    }
    const int64_t i = r - m.row_begin;
    ungroup_row(m.type, m.data + (i / kGroupRows) * group_bytes(m.type, m.cols), m.cols, static_cast<int>(i % kGroupRows),
                row.data());
    return row;
}

bool inside(const uint8_t* p, const GgufFile& file) {
    for (const GgufTensorInfo& t : file.tensors()) {
        if (p >= t.data && p < t.data + t.n_bytes) return true;
    }
    return false;
}

// Layer 1's attention and FFN partials and the head's logits of one slice
// (with weight_budget: the layers that do not fit it streamed from disk;
// `streamed` gets how many were).
std::vector<double> outputs(const LlamaModel& model, const Slice& slice, bool private_weights,
                            uint64_t weight_budget = UINT64_MAX, int* streamed = nullptr) {
    ThreadPool pool(2);
    ForwardConfig config;
    config.n_ctx = 16;
    config.n_batch = 4;
    config.private_weights = private_weights;
    config.weight_budget = weight_budget;
    SliceForward f(model, slice, config, pool);
    if (streamed != nullptr) *streamed = f.streamed() != nullptr ? f.streamed()->streamed_count() : 0;
    const int64_t n = model.hparams().n_embd;
    Rng rng(3);
    std::vector<float> h(4 * static_cast<size_t>(n));
    for (float& v : h) v = rng.next_normal();
    std::vector<double> attention(h.size()), ffn(h.size());
    f.attention_partial(1, h.data(), 0, 4, attention.data());
    f.ffn_partial(1, h.data(), 4, ffn.data());
    std::vector<float> logits(4 * static_cast<size_t>(std::max<int64_t>(slice.n_vocab_rows(), 1)));
    if (slice.n_vocab_rows() > 0) f.head_rows(h.data(), 4, logits.data(), slice.n_vocab_rows());
    std::vector<double> all = attention;
    all.insert(all.end(), ffn.begin(), ffn.end());
    all.insert(all.end(), logits.begin(), logits.end());
    return all;
}

}  // namespace

TEST(PrivateWeights, ASliceKeepsItsOwnRowsOutsideTheMapping) {
    const LlamaModel model(small_gqa_model());
    const ModelHParams& hp = model.hparams();
    Slice s = full_slice(hp);
    s.kv_head_begin = 1;
    s.kv_head_end = 3;
    s.ffn_begin = 64;
    s.ffn_end = 192;
    s.vocab_begin = 100;
    s.vocab_end = 250;
    const SliceWeights mapped = load_slice_weights(model, s, ColumnSlices::kPack);
    SliceWeights copy = load_slice_weights(model, s, ColumnSlices::kPack);
    copy_to_private_memory(copy, hp);
    const int64_t q_rows = static_cast<int64_t>(hp.q_per_kv()) * hp.head_dim;
    // Q4_0 is grouped wherever this CPU target has a grouped kernel.
    const bool grouped = compute_traits(QuantType::Q4_0)->vec_dot_groups != nullptr;
    std::fprintf(stderr, "Q4_0 weights %s\n", grouped ? "in groups of 16 rows" : "in rows");
    for (size_t l = 0; l < copy.layers.size(); ++l) {
        const LayerWeights& a = mapped.layers[l];
        const LayerWeights& b = copy.layers[l];
        const std::pair<const Matrix*, const Matrix*> pairs[] = {{&a.wq, &b.wq},         {&a.wk, &b.wk},
                                                                {&a.wv, &b.wv},         {&a.w_gate, &b.w_gate},
                                                                {&a.w_up, &b.w_up},     {&a.wo, &b.wo},
                                                                {&a.w_down, &b.w_down}};
        const int64_t begins[] = {1 * q_rows, hp.head_dim, hp.head_dim, 64, 64, 0, 0};
        const int64_t ends[] = {3 * q_rows, 3 * hp.head_dim, 3 * hp.head_dim, 192, 192, hp.n_embd, hp.n_embd};
        for (size_t i = 0; i < std::size(pairs); ++i) {
            const Matrix& m = *pairs[i].second;
            EXPECT_EQ(m.row_begin, begins[i]) << "layer " << l << " matrix " << i;
            EXPECT_EQ(m.row_end(), ends[i]) << "layer " << l << " matrix " << i;
            EXPECT_EQ(m.grouped, grouped);
            EXPECT_FALSE(inside(m.data, model.file()));
            for (int64_t r = m.row_begin; r < m.row_end(); ++r) {
                ASSERT_EQ(row_of(m, r), row_of(*pairs[i].first, r)) << "layer " << l << " matrix " << i << " row " << r;
            }
        }
    }
    EXPECT_TRUE(copy.packed.empty());  // the packed column slices moved too
    // 150 rows: the last group is padded.
    EXPECT_EQ(copy.output.row_begin, 100);
    EXPECT_EQ(copy.output.rows, 150);
    EXPECT_FALSE(inside(copy.output.data, model.file()));
    for (int64_t r = 100; r < 250; ++r) ASSERT_EQ(row_of(copy.output, r), row_of(mapped.output, r)) << "row " << r;
}

TEST(PrivateWeights, ComputeWhatTheMappedFileComputes) {
    const LlamaModel model(small_gqa_model());
    const ModelHParams& hp = model.hparams();
    const ReductionUnits units = reduction_units(model);
    Slice part = full_slice(hp);
    part.kv_head_begin = units.kv_heads;
    part.ffn_begin = units.ffn_channels;
    part.vocab_begin = 120;
    for (const Slice& s : {full_slice(hp), part}) {
        const std::vector<double> copied = outputs(model, s, true), mapped = outputs(model, s, false);
        ASSERT_EQ(copied.size(), mapped.size());
        double scale = 0;
        for (double v : mapped) scale = std::max(scale, std::fabs(v));
        // Grouped kernels add a row's blocks in another order than the row
        // layout's: the same sums, other roundings.
        for (size_t i = 0; i < copied.size(); ++i) ASSERT_NEAR(copied[i], mapped[i], 1e-5 * scale) << i;
    }
}

TEST(PrivateWeights, ComputeTheSameBitsHoweverTheModelIsSplit) {
    const LlamaModel model(small_gqa_model());
    const ModelHParams& hp = model.hparams();
    // Two complementary slices, starting on reduction units as plans do (the
    // vocabulary's split at 120 falls inside a group of 16 rows).
    const ReductionUnits units = reduction_units(model);
    Slice first = full_slice(hp), second = full_slice(hp);
    first.kv_head_end = second.kv_head_begin = units.kv_heads;
    first.ffn_end = second.ffn_begin = units.ffn_channels;
    first.vocab_end = second.vocab_begin = 120;
    const std::vector<double> whole = outputs(model, full_slice(hp), true);
    const std::vector<double> a = outputs(model, first, true), b = outputs(model, second, true);
    // Partials: attention and FFN, 4 positions x n_embd each, summed.
    const size_t partials = 2 * 4 * static_cast<size_t>(hp.n_embd);
    for (size_t i = 0; i < partials; ++i) ASSERT_EQ(a[i] + b[i], whole[i]) << i;
    // Logits: each slice's rows of the whole head's ([position][row]).
    for (int t = 0; t < 4; ++t) {
        for (int64_t r = 0; r < hp.n_vocab; ++r) {
            const double part = r < 120 ? a[partials + t * 120 + r] : b[partials + t * (hp.n_vocab - 120) + r - 120];
            ASSERT_EQ(part, whole[partials + t * hp.n_vocab + r]) << "position " << t << " row " << r;
        }
    }
}

}  // namespace tessera

namespace tessera {

// Larger than memory: with a weight budget below the slice's weights, its
// layers are written to a file of their own in the same layout and streamed
// from it; the outputs keep every bit (same kernels, same bytes), for a
// whole slice and for a rank's part (whose packed column slices stay
// private). (Which prefix stays private is the CLI test's: its model is
// larger than a window of two layers.)
TEST(PrivateWeights, LayersStreamedFromDiskComputeTheSameBits) {
    const LlamaModel model(small_gqa_model());
    const ModelHParams& hp = model.hparams();
    const ReductionUnits units = reduction_units(model);
    Slice part = full_slice(hp);
    part.kv_head_end = units.kv_heads;
    part.ffn_end = units.ffn_channels;
    part.vocab_end = 120;
    const Slice slices[] = {full_slice(hp), part};
    for (const Slice& s : slices) {
        const std::vector<double> all = outputs(model, s, true);
        int none = -1;
        EXPECT_EQ(outputs(model, s, true, UINT64_MAX, &none), all);
        EXPECT_EQ(none, 0);
        int streamed = -1;
        const std::vector<double> got = outputs(model, s, true, 0, &streamed);
        EXPECT_EQ(streamed, hp.n_layer) << describe_slice(s);
        ASSERT_EQ(got.size(), all.size());
        for (size_t i = 0; i < all.size(); ++i) ASSERT_EQ(got[i], all[i]) << describe_slice(s) << ", value " << i;
    }
}

}  // namespace tessera
