// The mixed split of a mixture of experts (model/slice.h MoeSplit::kMixed):
// the planner's slices (several parts; one part of some experts' channels; whole
// experts where an expert is a single unit; nothing) compute FFN partials
// that add up to a single node's bit for bit, in a batch and one row at a
// time, from private packed copies and from views of the mapped file, and
// each rank reads only its parts' bytes. The same sums for the balanced
// split (kBalanced), whose shared part every rank holds and computes on its
// turns only.
#include "cluster/planner/planner.h"
#include "model/llama_model.h"
#include "model/random_model.h"
#include "model/reduction_units.h"
#include "model/slice_forward.h"
#include "test_paths.h"
#include "util/error.h"
#include "util/rng.h"
#include "util/thread_pool.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

constexpr int kRows = 5;

std::string moe_model(QuantType type) {
    const std::string path = test::scratch_dir("mixed_split") + "/moe-" + std::string(quant_type_name(type)) + ".gguf";
    RandomModelSpec spec;
    apply_model_preset(spec, "qwen3moe");
    spec.n_embd = 256;
    spec.n_layer = 2;
    spec.n_head = 4;
    spec.n_head_kv = 2;
    spec.head_dim = 64;
    spec.n_ff = 256;  // Q8_0 and F32: 8 units of 32 channels; Q4_K: one unit of 256
    spec.n_vocab = 300;
    spec.n_expert = 8;
    spec.n_expert_used = 3;
    spec.type = type;
    write_random_model(spec, path);
    return path;
}

// A slice's FFN partials of layer 1 for kRows rows, batched or row by row.
std::vector<double> partials(const LlamaModel& model, const Slice& slice, bool batched, bool private_weights) {
    ThreadPool pool(2);
    ForwardConfig config;
    config.n_ctx = 16;
    config.n_batch = kRows;
    config.private_weights = private_weights;
    SliceForward f(model, slice, config, pool);
    const int64_t n = model.hparams().n_embd;
    Rng rng(5);
    std::vector<float> h(static_cast<size_t>(kRows * n));
    for (float& v : h) v = rng.next_normal();
    std::vector<double> out(h.size());
    if (batched) {
        f.ffn_partial(1, h.data(), kRows, out.data());
    } else {
        for (int t = 0; t < kRows; ++t) f.ffn_partial(1, h.data() + t * n, 1, out.data() + t * n);
    }
    return out;
}

TEST(MixedSplit, PartialsAddUpToASingleNodesBits) {
    for (const QuantType type : {QuantType::Q8_0, QuantType::Q4_K, QuantType::F32}) {
        const LlamaModel model(moe_model(type));
        const ModelHParams& hp = model.hparams();
        const ReductionUnits units = reduction_units(model);
        int two_parts = 0;
        for (const bool private_weights : {true, false}) {
            for (const bool batched : {true, false}) {
                const std::vector<double> whole = partials(model, full_slice(hp), batched, private_weights);
                for (const std::vector<double>& w : {std::vector<double>{1, 1}, {1, 1, 1}, {2, 1}}) {
                    std::vector<double> sum(whole.size(), 0.0);
                    for (const Slice& s : plan_tensor_parallel(hp, w, units, MoeSplit::kMixed)) {
                        two_parts += s.has_tail() ? 1 : 0;
                        const std::vector<double> p = partials(model, s, batched, private_weights);
                        for (size_t i = 0; i < sum.size(); ++i) sum[i] += p[i];
                    }
                    EXPECT_EQ(sum, whole) << quant_type_name(type) << ", " << w.size() << " ranks"
                                          << (private_weights ? ", private" : ", mapped")
                                          << (batched ? ", batched" : ", row by row");
                }
            }
        }
        // Q4_K's one unit per expert gives whole experts; the others several parts.
        if (type == QuantType::Q4_K) {
            EXPECT_EQ(two_parts, 0);
        } else {
            EXPECT_GT(two_parts, 0) << quant_type_name(type);
        }
    }
}

// The balanced split: each rank's own units and its turns of the shared ones
// add up to a single node's bits, batched (turns by expert) and row by row
// (turns by the router's order); an expert of one unit cannot be shared out.
TEST(BalancedSplit, PartialsAddUpToASingleNodesBits) {
    for (const QuantType type : {QuantType::Q8_0, QuantType::F32}) {
        const LlamaModel model(moe_model(type));
        const ModelHParams& hp = model.hparams();
        const ReductionUnits units = reduction_units(model);  // 8 units of 32 channels
        for (const bool private_weights : {true, false}) {
            for (const bool batched : {true, false}) {
                const std::vector<double> whole = partials(model, full_slice(hp), batched, private_weights);
                for (const std::vector<double>& w : {std::vector<double>{1, 1, 1}, {2, 1, 1}, {1, 1, 1, 1, 1}}) {
                    std::vector<double> sum(whole.size(), 0.0);
                    for (const Slice& s : plan_tensor_parallel(hp, w, units, MoeSplit::kBalanced)) {
                        ASSERT_TRUE(s.has_tail() && s.tails.back().dealt()) << describe_slice(s);
                        const std::vector<double> p = partials(model, s, batched, private_weights);
                        for (size_t i = 0; i < sum.size(); ++i) sum[i] += p[i];
                    }
                    EXPECT_EQ(sum, whole) << quant_type_name(type) << ", " << w.size() << " ranks"
                                          << (private_weights ? ", private" : ", mapped")
                                          << (batched ? ", batched" : ", row by row");
                }
            }
        }
    }
    const LlamaModel q4k(moe_model(QuantType::Q4_K));
    EXPECT_THROW(plan_tensor_parallel(q4k.hparams(), std::vector<double>{1, 1}, reduction_units(q4k), MoeSplit::kBalanced),
                 Error);
}

// A rank of several parts holds its parts' rows and no more: the planner's
// footprint and the loaded copy agree, and are about half the experts'.
TEST(MixedSplit, ARankHoldsOnlyItsParts) {
    const LlamaModel model(moe_model(QuantType::Q8_0));
    const ModelHParams& hp = model.hparams();
    const std::vector<Slice> slices =
        plan_tensor_parallel(hp, std::vector<double>{1, 1, 1}, reduction_units(model), MoeSplit::kMixed);
    uint64_t sum = 0;
    for (const Slice& s : slices) {
        ThreadPool pool(1);
        ForwardConfig config;
        config.n_ctx = 16;
        const SliceForward f(model, s, config, pool);
        sum += f.private_weight_bytes();
    }
    ThreadPool pool(1);
    ForwardConfig config;
    config.n_ctx = 16;
    Slice one = full_slice(hp);
    const SliceForward whole(model, one, config, pool);
    // Attention and the experts are split, the router and the head's rows
    // too; only the router is held by every rank. So the ranks hold about
    // the whole model between them, not three times it.
    EXPECT_LT(sum, whole.private_weight_bytes() * 5 / 4);
    EXPECT_GT(sum, whole.private_weight_bytes() * 3 / 4);
}

}  // namespace
}  // namespace tessera
