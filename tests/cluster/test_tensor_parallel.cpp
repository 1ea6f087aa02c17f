// Tensor-parallel generation over real loopback TCP (workers serve from their
// own threads here; the CLI tests run them as separate processes): greedy
// output equals a single node's for 2, 3 and 4 ranks and uneven weights, on
// stories260K and on a generated GQA model; a worker holding another model is
// refused with both fingerprints; a worker that dies is reported in seconds.
#include "cluster/tensor_parallel/tp_decoder.h"
#include "cluster/session/worker.h"
#include "model/local_decoder.h"
#include "model/random_model.h"
#include "test_errors.h"
#include "test_paths.h"
#include "test_worker.h"
#include "util/error.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <optional>
#include <thread>

namespace tessera {

namespace {

using test::TestWorker;
using test::greedy;

std::vector<int32_t> tp_greedy(const std::string& path, const std::vector<int32_t>& prompt, int n, int n_ranks,
                               std::vector<double> weights = {}, bool fast = false,
                               std::vector<float>* logits = nullptr, int partial_bands = 1,
                               std::optional<PartialTopology> topology = std::nullopt,
                               uint64_t* banded_syncs = nullptr) {
    const LlamaModel model(path);
    std::vector<std::unique_ptr<TestWorker>> workers;
    TpConfig config;
    for (int r = 1; r < n_ranks; ++r) {
        workers.push_back(std::make_unique<TestWorker>(path));
        config.workers.push_back(workers.back()->address());
    }
    config.weights = std::move(weights);
    config.fast = fast;
    config.partial_bands = partial_bands;
    config.topology = topology;
    config.forward.n_ctx = 128;
    config.forward.n_batch = 16;
    config.limits.io_timeout_ms = 3000;
    TensorParallelDecoder decoder(model, config);
    auto tokens = greedy(decoder, prompt, n, logits);
    if (banded_syncs != nullptr) *banded_syncs = decoder.stats().banded_syncs;
    return tokens;
}

std::vector<int32_t> local_greedy(const std::string& path, const std::vector<int32_t>& prompt, int n,
                                  std::vector<float>* logits = nullptr, int threads = 1) {
    const LlamaModel model(path);
    ForwardConfig config;
    config.n_ctx = 128;
    config.n_batch = 16;
    LocalDecoder decoder(model, config, threads);
    return greedy(decoder, prompt, n, logits);
}

std::string tp_gqa_model(QuantType type = QuantType::Q8_0) {
    const std::string path =
        test::scratch_dir("tensor_parallel") + fmt::format("/gqa-{}.gguf", quant_type_name(type));
    RandomModelSpec spec;
    spec.n_embd = 256;
    spec.n_layer = 3;
    spec.n_head = 8;
    spec.n_head_kv = 4;
    spec.n_ff = 640;
    spec.n_vocab = 400;
    spec.type = type;
    write_random_model(spec, path);
    return path;
}

}  // namespace

TEST(TensorParallel, GreedyOutputEqualsSingleNodeOnStories260K) {
    const std::string path = test::stories260k();
    const std::vector<int32_t> prompt = {1, 403, 407, 261, 378};  // BOS "Once upon a time"
    const std::vector<int32_t> want = local_greedy(path, prompt, 40);
    for (int ranks : {2, 3, 4}) EXPECT_EQ(tp_greedy(path, prompt, 40, ranks), want) << ranks << " ranks";
    EXPECT_EQ(tp_greedy(path, prompt, 40, 3, {2.0, 1.0, 0.5}), want) << "uneven weights";
}

TEST(TensorParallel, GreedyOutputEqualsSingleNodeOnAGeneratedGqaModel) {
    const std::string path = tp_gqa_model();
    const std::vector<int32_t> prompt = {1, 17, 230, 5, 99, 310, 42};
    const std::vector<int32_t> want = local_greedy(path, prompt, 24);
    for (int ranks : {2, 3, 4}) EXPECT_EQ(tp_greedy(path, prompt, 24, ranks), want) << ranks << " ranks";
    EXPECT_EQ(tp_greedy(path, prompt, 24, 3, {1.0, 3.0, 1.0}), want) << "uneven weights";
}

// A worker on this host that proved the key takes its frames through shared
// memory unless told not to; over either transport the output equals a single
// node's. Without a key no shared memory is offered.
TEST(TensorParallel, SameHostWorkersUseSharedMemoryAndTcpStaysAvailable) {
    const std::string path = tp_gqa_model();
    const std::vector<int32_t> prompt = {1, 17, 230, 5, 99, 310, 42};
    const std::vector<int32_t> want = local_greedy(path, prompt, 16);
    const auto key = std::make_shared<const WireKey>(random_key());
    for (bool shared_memory : {true, false}) {
        const LlamaModel model(path);
        TestWorker worker(path, 1, "", key);
        TpConfig config;
        config.key = key;
        config.workers.push_back(worker.address());
        config.forward.n_ctx = 128;
        config.forward.n_batch = 16;
        config.limits.io_timeout_ms = 3000;
        config.shared_memory = shared_memory;
        TensorParallelDecoder decoder(model, config);
        EXPECT_EQ(decoder.ranks()[1].shared_memory, shared_memory);
        EXPECT_TRUE(decoder.ranks()[1].sealed);
        EXPECT_EQ(greedy(decoder, prompt, 16), want) << (shared_memory ? "shared memory" : "TCP");
    }
    const LlamaModel model(path);
    TestWorker plain(path);
    TpConfig config;
    config.workers.push_back(plain.address());
    config.forward.n_ctx = 128;
    config.forward.n_batch = 16;
    TensorParallelDecoder decoder(model, config);
    EXPECT_FALSE(decoder.ranks()[1].shared_memory) << "shared memory offered to an unauthenticated peer";
    EXPECT_FALSE(decoder.ranks()[1].sealed);
    EXPECT_EQ(greedy(decoder, prompt, 16), want) << "plain";
}

// --exact is exact: the logits of every step, not only the greedy tokens,
// equal a single node's bit for bit (fixed-point partials, a split head), for
// any rank count and uneven shares, on two weight types.
TEST(TensorParallel, ExactLogitsEqualSingleNodeBitForBit) {
    for (QuantType type : {QuantType::Q8_0, QuantType::Q4_0}) {
        const std::string path = tp_gqa_model(type);
        const std::vector<int32_t> prompt = {1, 17, 230, 5, 99, 310, 42, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18};
        std::vector<float> want, want_2_threads;
        local_greedy(path, prompt, 12, &want);
        local_greedy(path, prompt, 12, &want_2_threads, 2);
        ASSERT_EQ(want_2_threads, want) << "a single node depends on its thread count";
        for (const std::vector<double>& weights : {std::vector<double>{1, 1}, {1.0, 3.0, 1.0}, {1, 1, 1, 1}}) {
            std::vector<float> got;
            tp_greedy(path, prompt, 12, static_cast<int>(weights.size()), weights, false, &got);
            ASSERT_EQ(got.size(), want.size());
            size_t differ = 0;
            for (size_t i = 0; i < got.size(); ++i) differ += got[i] != want[i];
            EXPECT_EQ(differ, 0u) << quant_type_name(type) << ", " << weights.size() << " ranks";
        }
    }
}

// Partials sent in bands as the product computes them (issue 22's overlap):
// exact stays bit-exact for 2 and 3 ranks; fast rounds each Q8_0 block as a
// whole frame does, so its logits equal unbanded fast's bit for bit. Bands
// of uneven width (3 bands of 4 quanta), prompt batches and single steps.
TEST(TensorParallel, PartialsInBandsGiveTheSameLogitsBitForBit) {
    const std::string path = tp_gqa_model(QuantType::Q4_0);
    const std::vector<int32_t> prompt = {1, 17, 230, 5, 99, 310, 42, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18};
    std::vector<float> want;
    local_greedy(path, prompt, 8, &want);
    for (const std::vector<double>& weights : {std::vector<double>{1, 1}, {1.0, 3.0, 1.0}}) {
        std::vector<float> got;
        tp_greedy(path, prompt, 8, static_cast<int>(weights.size()), weights, false, &got, 3);
        EXPECT_EQ(got, want) << weights.size() << " ranks, exact, 3 bands";
        std::vector<float> fast_whole, fast_banded;
        tp_greedy(path, prompt, 8, static_cast<int>(weights.size()), weights, true, &fast_whole, 1);
        tp_greedy(path, prompt, 8, static_cast<int>(weights.size()), weights, true, &fast_banded, 3);
        EXPECT_EQ(fast_banded, fast_whole) << weights.size() << " ranks, fast, 3 bands against 1";
        EXPECT_NE(fast_whole, want) << "fast partials are rounded: a test that cannot tell them apart proves nothing";
    }
}

// The reduce-scatter exchange (each rank sums one segment of the columns,
// then sends its totals to the others): bit-exact on 2, 3 and 4 ranks, with
// uneven shares and segments of uneven width, as the all-to-all is on 4
// (which auto no longer picks there); --fast with it is refused.
TEST(TensorParallel, ReduceScatterExchangeEqualsSingleNodeBitForBit) {
    const std::string path = tp_gqa_model(QuantType::Q4_0);
    const std::vector<int32_t> prompt = {1, 17, 230, 5, 99, 310, 42, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18};
    std::vector<float> want;
    local_greedy(path, prompt, 8, &want);
    for (const std::vector<double>& weights : {std::vector<double>{1, 1}, {1.0, 3.0, 1.0}, {1, 2, 1, 1}}) {
        std::vector<float> got;
        tp_greedy(path, prompt, 8, static_cast<int>(weights.size()), weights, false, &got, 1,
                  PartialTopology::kReduceScatter);
        EXPECT_EQ(got, want) << weights.size() << " ranks, reduce-scatter";
        // With bands, each segment goes to its owner as the product
        // computes it, every rank starting after its own segment (3 ranks:
        // segments of 64, 64 and 128 columns).
        uint64_t banded = 0;
        std::vector<float> banded_logits;
        tp_greedy(path, prompt, 8, static_cast<int>(weights.size()), weights, false, &banded_logits, 4,
                  PartialTopology::kReduceScatter, &banded);
        EXPECT_EQ(banded_logits, want) << weights.size() << " ranks, reduce-scatter in bands";
        EXPECT_GE(banded, 2u * 3 * 7) << "every decoding step's syncs go in bands";
    }
    std::vector<float> got;
    tp_greedy(path, prompt, 8, 4, {1, 1, 1, 1}, false, &got, 1, PartialTopology::kAllToAll);
    EXPECT_EQ(got, want) << "4 ranks, all-to-all";
    EXPECT_EQ(auto_topology(4, true), PartialTopology::kReduceScatter);
    EXPECT_EQ(auto_topology(3, true), PartialTopology::kAllToAll);
    EXPECT_EQ(auto_topology(8, false), PartialTopology::kAllToAll);
    // Refused before any worker is reached.
    const LlamaModel model(path);
    const std::string e = test::error_of([&] {
        TpConfig config;
        config.workers.push_back({"127.0.0.1", 9});
        config.fast = true;
        config.topology = PartialTopology::kReduceScatter;
        TensorParallelDecoder decoder(model, config);
    });
    EXPECT_NE(e.find("needs exact partials"), std::string::npos) << e;
}

// Continuous batching across ranks (serve --parallel on --local N): three
// sequences' prompts in one batch, then their decoding steps together; each
// sequence's logits equal a single node running it alone, bit for bit, and
// the workers refuse a batch naming a sequence they do not keep.
TEST(TensorParallel, SequencesBatchedAcrossRanksEqualEachAloneBitForBit) {
    const std::string path = tp_gqa_model(QuantType::Q4_0);
    const LlamaModel model(path);
    const int n_vocab = model.hparams().n_vocab;
    const std::vector<std::vector<int32_t>> prompts = {{1, 17, 230, 5, 99}, {1, 310, 42, 7, 8, 9}, {1, 11, 12, 13}};
    const int steps = 10;
    std::vector<std::vector<float>> want(prompts.size());
    for (size_t s = 0; s < prompts.size(); ++s) local_greedy(path, prompts[s], steps, &want[s]);
    std::vector<std::unique_ptr<TestWorker>> workers;
    TpConfig config;
    for (int r = 1; r < 3; ++r) {
        workers.push_back(std::make_unique<TestWorker>(path));
        config.workers.push_back(workers.back()->address());
    }
    config.weights = {1, 1, 1};
    config.forward.n_ctx = 128;
    config.forward.n_batch = 16;
    config.forward.n_seq = 3;
    config.limits.io_timeout_ms = 3000;
    TensorParallelDecoder decoder(model, config);
    ASSERT_EQ(decoder.n_seq(), 3);
    std::vector<int32_t> last(prompts.size());
    for (int step = 0; step < steps; ++step) {
        std::vector<SeqEval> evals;
        for (size_t s = 0; s < prompts.size(); ++s) {
            const int n = static_cast<int>(prompts[s].size());
            evals.push_back(step == 0 ? SeqEval{static_cast<int>(s), 0, prompts[s]}
                                      : SeqEval{static_cast<int>(s), n + step - 1, std::span<const int32_t>(&last[s], 1)});
        }
        const float* logits = decoder.eval_seqs(evals);
        for (size_t s = 0; s < prompts.size(); ++s) {
            const float* row = logits + s * n_vocab;
            ASSERT_TRUE(std::equal(row, row + n_vocab, want[s].begin() + static_cast<size_t>(step) * n_vocab))
                << "sequence " << s << " step " << step;
            last[s] = static_cast<int32_t>(std::max_element(row, row + n_vocab) - row);
        }
    }
    const int32_t token[1] = {1};
    const SeqEval outside[] = {{1, 0, token}, {3, 0, token}};
    EXPECT_THROW(decoder.eval_seqs(outside), Error);
}

// Workers started without the model file receive their slice once (checked
// by fingerprint and checksum), cache it, and reuse the cache next time; a
// damaged cache entry is replaced. Output still equals a single node's.
TEST(TensorParallel, WorkersWithoutTheFileReceiveAndCacheTheirSlice) {
    const std::string path = tp_gqa_model();
    const std::string cache = test::scratch_dir("tensor_parallel_cache");
    std::filesystem::remove_all(cache);
    const std::vector<int32_t> prompt = {1, 17, 230, 5, 99, 310, 42};
    const std::vector<int32_t> want = local_greedy(path, prompt, 16);
    const LlamaModel model(path);
    auto run = [&](uint64_t* sent) {
        std::vector<std::unique_ptr<TestWorker>> workers;
        TpConfig config;
        for (int r = 1; r < 3; ++r) {
            workers.push_back(std::make_unique<TestWorker>("", 1, cache));
            config.workers.push_back(workers.back()->address());
        }
        config.forward.n_ctx = 128;
        config.forward.n_batch = 16;
        config.weights = {1.0, 1.0, 1.0};
        TensorParallelDecoder decoder(model, config);
        const std::vector<int32_t> got = greedy(decoder, prompt, 16);
        *sent = decoder.stats().slice_bytes_sent;
        return got;
    };
    // Another worker process sharing the directory is writing a slice now
    // (a fresh .partial file): it must survive; one left by an interrupted
    // transfer an hour ago is removed. (Removing every .partial file made
    // two workers on one cache directory break each other's transfers.)
    std::filesystem::create_directories(cache);
    const std::string live = cache + "/another-worker.gguf.partial", stale = cache + "/interrupted.gguf.partial";
    std::ofstream(live) << "in progress";
    std::ofstream(stale) << "left behind";
    std::filesystem::last_write_time(stale, std::filesystem::file_time_type::clock::now() - std::chrono::hours(1));
    uint64_t sent = 0;
    EXPECT_EQ(run(&sent), want);
    EXPECT_GT(sent, 0u);
    EXPECT_TRUE(std::filesystem::exists(live));
    EXPECT_FALSE(std::filesystem::exists(stale));
    std::filesystem::remove(live);
    size_t files = 0;
    for (const auto& entry : std::filesystem::directory_iterator(cache)) {
        if (entry.path().extension() != ".gguf") continue;
        ++files;
        // A slice file holds only its share: well under the whole model.
        EXPECT_LT(std::filesystem::file_size(entry.path()), std::filesystem::file_size(path) * 3 / 4);
    }
    EXPECT_EQ(files, 2u);
    EXPECT_EQ(run(&sent), want);
    EXPECT_EQ(sent, 0u) << "the cached slices were not used";
    for (const auto& entry : std::filesystem::directory_iterator(cache)) {
        if (entry.path().extension() == ".gguf") std::ofstream(entry.path(), std::ios::binary | std::ios::trunc) << "not a gguf";
    }
    EXPECT_EQ(run(&sent), want);
    EXPECT_GT(sent, 0u) << "damaged cache entries were not replaced";
}

TEST(TensorParallel, WorkerWithAnotherModelIsRefused) {
    const std::string other = tp_gqa_model();
    TestWorker worker(other);
    const LlamaModel model(test::stories260k());
    TpConfig config;
    config.workers = {worker.address()};
    config.forward.n_ctx = 64;
    try {
        TensorParallelDecoder decoder(model, config);
        FAIL() << "a worker with another model was accepted";
    } catch (const Error& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find("holds a different model"), std::string::npos) << m;
        EXPECT_NE(m.find(model.file().fingerprint_hex()), std::string::npos) << m;
        EXPECT_NE(m.find(LlamaModel(other).file().fingerprint_hex()), std::string::npos) << m;
        EXPECT_NE(m.find(worker.address().str()), std::string::npos) << m;
    }
}

}  // namespace tessera

namespace tessera {

// The attention each position received (what --context-full evict ranks by),
// counted in fixed point: 3 ranks, each counting its own heads, sum to one
// process's totals exactly, dense and sparse; every query's weights sum to one
// per head and layer. After an eviction's compaction on both, the next token's
// logits are still equal bit for bit.
TEST(TensorParallel, AttentionMassAcrossRanksEqualsOneProcessExactly) {
    const std::string path = tp_gqa_model(QuantType::Q4_0);
    const LlamaModel model(path);
    const ModelHParams& hp = model.hparams();
    std::vector<int32_t> prompt;
    for (int i = 0; i < 40; ++i) prompt.push_back((i * 37 + 5) % hp.n_vocab);
    for (const bool sparse : {false, true}) {
        ForwardConfig forward;
        forward.n_ctx = 64;
        forward.n_batch = 16;
        forward.track_attention = true;
        forward.sparse.enabled = sparse;
        forward.sparse.window = 8;
        forward.sparse.block = 4;
        LocalDecoder local(model, forward, 2);
        local.eval(prompt, 0);
        std::vector<int64_t> want(prompt.size(), 0);
        local.add_attention_mass(0, static_cast<int>(prompt.size()), want.data());
        if (!sparse) {
            // 40 queries x 8 heads x 3 layers, each a distribution over positions.
            double sum = 0.0;
            for (int64_t m : want) sum += static_cast<double>(m) / 4294967296.0;
            EXPECT_NEAR(sum, 40.0 * hp.n_head * hp.n_layer, 1e-3);
        }

        std::vector<std::unique_ptr<TestWorker>> workers;
        TpConfig config;
        for (int r = 1; r < 3; ++r) {
            workers.push_back(std::make_unique<TestWorker>(path));
            config.workers.push_back(workers.back()->address());
        }
        config.weights = {1, 1, 1};
        config.forward = forward;
        config.limits.io_timeout_ms = 3000;
        TensorParallelDecoder tp(model, config);
        tp.eval(prompt, 0);
        std::vector<int64_t> got(prompt.size(), 0);
        tp.add_attention_mass(0, static_cast<int>(prompt.size()), got.data());
        EXPECT_EQ(got, want) << (sparse ? "sparse" : "dense");

        std::vector<int> kept;
        for (int p = 0; p < 40; ++p) {
            if (p < 3 || p % 3 != 0) kept.push_back(p);
        }
        local.compact_context(0, kept, 40);
        tp.compact_context(0, kept, 40);
        const int32_t next[1] = {7};
        const float* a = local.eval(next, static_cast<int>(kept.size()));
        const std::vector<float> local_logits(a, a + hp.n_vocab);
        const float* b = tp.eval(next, static_cast<int>(kept.size()));
        EXPECT_TRUE(std::equal(local_logits.begin(), local_logits.end(), b)) << (sparse ? "sparse" : "dense");
        std::vector<int64_t> after_local(kept.size() + 1, 0), after_tp(kept.size() + 1, 0);
        local.add_attention_mass(0, static_cast<int>(kept.size()) + 1, after_local.data());
        tp.add_attention_mass(0, static_cast<int>(kept.size()) + 1, after_tp.data());
        EXPECT_EQ(after_tp, after_local);
    }
}

}  // namespace tessera
