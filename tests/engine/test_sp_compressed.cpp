// The compressed exchange of sequence-parallel prefill over real loopback
// TCP: rows travel as codebook indices (fewer bytes), the prompt cache is
// rebuilt from them and the next positions stay close to a single node's;
// codebooks of another model, or a worker without them, are refused.
#include "cluster/sequence_parallel/sp_prefill_decoder.h"
#include "cluster/test_worker.h"
#include "eval/logit_agreement.h"
#include "eval/vq_fit.h"
#include "model/local_decoder.h"
#include "model/random_model.h"
#include "test_errors.h"
#include "test_paths.h"

#include <gtest/gtest.h>

#include <random>

namespace tessera {

namespace {

using test::TestWorker;

std::string gqa_model() { return test::small_gqa_model(test::scratch_dir("sp_compressed") + "/gqa.gguf"); }

}  // namespace

}  // namespace tessera

namespace tessera {

namespace {

// Codebooks of 64 codes fitted on the model's own rows over a random text.
std::string fit_books(const LlamaModel& model, const std::string& path, int groups) {
    VqFitOptions o;
    o.groups = groups;
    o.codes = 64;
    o.iterations = 4;
    o.n_ctx = 256;
    const std::vector<int32_t> text = test::random_prompt(1024, model.hparams().n_vocab, 9);
    fit_kv_codebooks(model, text, o, 1).save(path);
    return path;
}

}  // namespace

TEST(SequenceParallelPrefill, CodebookIndicesCompressTheRowsAndStayClose) {
    const std::string path = test::stories260k();
    const LlamaModel model(path);
    const std::string books = fit_books(model, test::scratch_dir("sp_prefill_vq") + "/books.gguf", 4);
    ForwardConfig forward;
    forward.n_ctx = 512;
    forward.n_batch = 32;
    const std::vector<int32_t> prompt = test::random_prompt(200, model.hparams().n_vocab, 12);
    LocalDecoder single(model, forward, 1);
    const ForcedRun reference = greedy_run(single, prompt, 16);

    TestWorker worker(path, 1, "", nullptr, books);
    SpPrefillConfig config;
    config.workers = {worker.address()};
    config.forward = forward;
    config.limits.io_timeout_ms = 3000;
    config.codebooks = std::make_shared<const KvCodebooks>(KvCodebooks::load(books));
    SpPrefillDecoder sp(model, config);
    EXPECT_TRUE(sp.compressed());
    const ForcedRun got = forced_run(sp, prompt, reference.tokens);
    EXPECT_EQ(sp.prompts(), 1);
    // 4 groups of 8 values, 6 bits each, K and V: 48 bits a position and
    // layer where the exact rows take 64 F16 values (1024 bits).
    EXPECT_EQ(config.codebooks->bits_per_position(), 48);
    const uint64_t rows = static_cast<uint64_t>(sp.nodes()[1].last_chunk.n_tok) * model.hparams().n_layer;
    EXPECT_LT(sp.nodes()[1].bytes_received, rows * (kSpRowsHeaderBytes + 64)) << "the rows came back compressed";
    const LogitAgreement a = compare_logits(reference.logits, got.logits, model.hparams().n_vocab);
    EXPECT_GT(a.kl_mean, 0.0) << "the cache was rebuilt from indices, not copied";
    EXPECT_LT(a.kl_mean, 0.5);
}

TEST(SequenceParallelPrefill, CodebooksOfAnotherModelOrNoneAreRefused) {
    const std::string stories = test::stories260k();
    const std::string gqa = gqa_model();
    const std::string dir = test::scratch_dir("sp_prefill_refuse");
    const LlamaModel model(stories);
    const std::string books = fit_books(model, dir + "/books.gguf", 1);
    const LlamaModel other(gqa);
    const std::string other_books = fit_books(other, dir + "/other.gguf", 1);
    SpPrefillConfig config;
    config.forward.n_ctx = 256;
    config.limits.io_timeout_ms = 3000;
    config.codebooks = std::make_shared<const KvCodebooks>(KvCodebooks::load(other_books));
    EXPECT_NE(test::error_of([&] { SpPrefillDecoder(model, config); }).find("fitted on another model"), std::string::npos);
    // A worker started without codebooks, or with another model's, refuses the session.
    config.codebooks = std::make_shared<const KvCodebooks>(KvCodebooks::load(books));
    {
        TestWorker bare(stories);
        config.workers = {bare.address()};
        const std::string e = test::error_of([&] { SpPrefillDecoder(model, config); });
        EXPECT_NE(e.find("holds no codebooks"), std::string::npos) << e;
    }
    {
        // Checked when the worker starts, before it listens.
        WorkerOptions o;
        o.listen = {"127.0.0.1", 0};
        o.model_path = stories;
        o.codebooks_path = other_books;
        o.once = true;
        const std::string e = test::error_of([&] { run_worker(o); });
        EXPECT_NE(e.find("fitted on another model"), std::string::npos) << e;
    }
}

}  // namespace tessera
