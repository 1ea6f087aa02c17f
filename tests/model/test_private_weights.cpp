// Weights copied into private memory (copy_to_private_memory): a slice keeps
// exactly its own rows, byte for byte the file's, outside the file's mapping,
// and computes the same bits as from the mapped file, whole model or slice.
#include "model/llama_model.h"
#include "model/random_model.h"
#include "model/reduction_units.h"
#include "model/slice_forward.h"
#include "test_paths.h"
#include "util/rng.h"
#include "util/thread_pool.h"

#include <gtest/gtest.h>

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

bool inside(const uint8_t* p, const GgufFile& file) {
    for (const GgufTensorInfo& t : file.tensors()) {
        if (p >= t.data && p < t.data + t.n_bytes) return true;
    }
    return false;
}

// Layer 1's attention and FFN partials and the head's logits of one slice.
std::vector<double> outputs(const LlamaModel& model, const Slice& slice, bool private_weights) {
    ThreadPool pool(2);
    ForwardConfig config;
    config.n_ctx = 16;
    config.n_batch = 4;
    config.private_weights = private_weights;
    SliceForward f(model, slice, config, pool);
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
    for (size_t l = 0; l < copy.layers.size(); ++l) {
        const LayerWeights& a = mapped.layers[l];
        const LayerWeights& b = copy.layers[l];
        const std::pair<const Matrix*, const Matrix*> pairs[] = {{&a.wq, &b.wq}, {&a.wk, &b.wk}, {&a.wv, &b.wv},
                                                                {&a.w_gate, &b.w_gate}, {&a.w_up, &b.w_up}};
        const int64_t begins[] = {1 * q_rows, hp.head_dim, hp.head_dim, 64, 64};
        const int64_t ends[] = {3 * q_rows, 3 * hp.head_dim, 3 * hp.head_dim, 192, 192};
        for (size_t i = 0; i < std::size(pairs); ++i) {
            const Matrix& m = *pairs[i].second;
            EXPECT_EQ(m.row_begin, begins[i]) << "layer " << l << " matrix " << i;
            EXPECT_EQ(m.row_end(), ends[i]) << "layer " << l << " matrix " << i;
            EXPECT_FALSE(inside(m.data, model.file()));
            for (int64_t r = m.row_begin; r < m.row_end(); ++r) {
                ASSERT_EQ(std::memcmp(m.row(r), pairs[i].first->row(r), m.row_bytes), 0) << "row " << r;
            }
        }
    }
    EXPECT_EQ(copy.output.row_begin, 100);
    EXPECT_EQ(copy.output.rows, 150);
    EXPECT_FALSE(inside(copy.output.data, model.file()));
    EXPECT_EQ(std::memcmp(copy.output.row(100), mapped.output.row(100), copy.output.row_bytes * 150), 0);
}

TEST(PrivateWeights, ComputeTheSameBitsAsTheMappedFile) {
    const LlamaModel model(small_gqa_model());
    const ModelHParams& hp = model.hparams();
    // A worker's slice: it starts on reduction units, as plans do.
    const ReductionUnits units = reduction_units(model);
    Slice part = full_slice(hp);
    part.kv_head_begin = units.kv_heads;
    part.kv_head_end = 4;
    part.ffn_begin = units.ffn_channels;
    part.ffn_end = 320;
    part.vocab_begin = 0;
    part.vocab_end = 120;
    for (const Slice& s : {full_slice(hp), part}) {
        EXPECT_EQ(outputs(model, s, true), outputs(model, s, false)) << describe_slice(s);
    }
}

}  // namespace tessera
