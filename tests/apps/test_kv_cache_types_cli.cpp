// KV cache types end to end (--cache-type-k/-ctk, --cache-type-v/-ctv): with
// the same types, tensor parallel over 3 processes (--exact) and a 2-stage
// pipeline give one process's greedy tokens and perplexity digits; a
// quantized cache moves the logits, Q4_0 more than Q8_0 (KL divergence
// against an F16 cache); `plan` counts the smaller cache; a type the cache
// cannot hold, or a head width its blocks do not divide, is a clear error.
#include "subprocess.h"
#include "tessera_cli.h"
#include "test_paths.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <memory>

namespace tessera {

namespace {

using test::run_process;
using test::tessera_cmd;

std::vector<std::string> with(std::vector<std::string> base, std::initializer_list<std::string> extra) {
    base.insert(base.end(), extra);
    return base;
}

std::vector<std::string> command(const std::vector<std::string>& args) {
    std::vector<std::string> argv = tessera_cmd({});
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
}

double stat(const std::string& out, const std::string& label) {
    const size_t at = out.find(label);
    if (at == std::string::npos) return -1.0;
    return std::stod(out.substr(out.find(':', at) + 1));
}

double final_ppl(const std::string& out) {
    const std::string label = "Final estimate: PPL = ";
    const size_t at = out.find(label);
    return at == std::string::npos ? -1.0 : std::stod(out.substr(at + label.size()));
}

// A llama-shaped model whose heads are 32 wide: one block of Q8_0 or Q4_0.
std::string make_model(const std::string& dir) {
    const std::string model = dir + "/model.gguf";
    const auto gen = run_process(command({"gen-model", "--dim", "256", "--layers", "4", "--heads", "8", "--kv-heads",
                                          "4", "--ffn", "512", "--type", "Q8_0", "-q", "-o", model}),
                                 60);
    EXPECT_EQ(gen.exit_code, 0) << gen.err;
    return model;
}

}  // namespace

TEST(KvCacheTypesCli, EveryPlanEqualsOneProcessWithTheSameTypes) {
    const std::string dir = test::test_dir("kv_types_plans");
    const std::string model = make_model(dir);
    const std::vector<std::string> run = {"run", "-m", model, "-p", "Once upon a time there was a little girl",
                                          "-n", "24", "--temp", "0", "--ignore-eos", "--json", "-ctk", "q8_0",
                                          "-ctv", "q4_0"};
    const auto single = run_process(command(run), 60);
    ASSERT_EQ(single.exit_code, 0) << single.err;
    const std::vector<int> want = test::tokens_of(single);
    ASSERT_EQ(want.size(), 24u);

    const auto local3 = run_process(command(with(run, {"--local", "3", "--exact"})), 60);
    ASSERT_EQ(local3.exit_code, 0) << local3.err;
    EXPECT_EQ(test::tokens_of(local3), want) << "--local 3";

    std::unique_ptr<test::BackgroundProcess> worker;
    const auto pipeline = run_process(command(with(run, {"--stages", "root/" + test::start_worker(worker, model)})), 60);
    ASSERT_EQ(pipeline.exit_code, 0) << pipeline.err;
    EXPECT_EQ(test::tokens_of(pipeline), want) << "2-stage pipeline";

    const std::string text = test::source_dir() + "/tests/data/little_stories.txt";
    const std::vector<std::string> ppl = {"perplexity", "-m", model, "-f", text, "-c", "64", "--chunks", "4",
                                          "--cache-type", "q4_0"};
    const auto one = run_process(command(ppl), 60);
    ASSERT_EQ(one.exit_code, 0) << one.err;
    const auto three = run_process(command(with(ppl, {"--local", "3"})), 60);
    ASSERT_EQ(three.exit_code, 0) << three.err;
    EXPECT_GT(final_ppl(one.out), 1.0) << one.out;
    EXPECT_EQ(final_ppl(three.out), final_ppl(one.out)) << three.out;
}

TEST(KvCacheTypesCli, QuantizedCachesMoveTheLogitsQ4_0MoreThanQ8_0) {
    const std::string dir = test::test_dir("kv_types_kl");
    const std::string model = make_model(dir);
    const std::string text = test::source_dir() + "/tests/data/little_stories.txt";
    const std::string base = dir + "/f16.kld";
    const std::vector<std::string> ppl = {"perplexity", "-m", model, "-f", text, "-c", "64", "--chunks", "6"};
    const auto made = run_process(command(with(ppl, {"--kl-divergence-base", base})), 60);
    ASSERT_EQ(made.exit_code, 0) << made.err;
    double kld[2];
    double same_top[2];
    int i = 0;
    for (const char* type : {"q8_0", "q4_0"}) {
        const auto r = run_process(
            command(with(ppl, {"--kl-divergence", "--kl-divergence-base", base, "--cache-type", type})), 60);
        ASSERT_EQ(r.exit_code, 0) << r.err;
        kld[i] = stat(r.out, "Mean    KLD");
        same_top[i] = stat(r.out, "Same top p:");
        EXPECT_GT(kld[i], 0.0) << type << "\n" << r.out;
        ++i;
    }
    EXPECT_LT(kld[0], kld[1]) << "q8_0 against q4_0";
    EXPECT_GE(same_top[0], same_top[1]);
    EXPECT_GT(same_top[0], 90.0);
}

TEST(KvCacheTypesCli, PlanCountsTheCacheAndBadTypesAreClearErrors) {
    const std::string dir = test::test_dir("kv_types_errors");
    const std::string model = make_model(dir);
    uint64_t kv_bytes[2];
    int i = 0;
    for (const char* type : {"f16", "q8_0"}) {
        const auto r = run_process(command({"plan", "-m", model, "--local", "2", "-c", "256", "--json",
                                            "--cache-type", type}),
                                   60);
        ASSERT_EQ(r.exit_code, 0) << r.err;
        kv_bytes[i] = 0;
        const nlohmann::json plan = nlohmann::json::parse(r.out);
        for (const auto& node : plan.at("nodes")) kv_bytes[i] += node.at("kv_bytes").get<uint64_t>();
        ++i;
    }
    // 4 layers x 4 KV heads x 256 positions x (K + V): 64 F16 bytes a row, 34 Q8_0.
    EXPECT_EQ(kv_bytes[0], 4ull * 4 * 256 * 2 * 64);
    EXPECT_EQ(kv_bytes[1], 4ull * 4 * 256 * 2 * 34);

    auto r = run_process(command({"run", "-m", model, "-p", "hi", "-n", "2", "-ctk", "q5_0"}), 60);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("--cache-type-k must be f32, f16, q8_0 or q4_0 (got 'q5_0')"), std::string::npos) << r.err;
    // The bundled model's heads are 8 wide: no whole block of 32.
    r = run_process(command({"run", "-p", "hi", "-n", "2", "--cache-type-v", "q4_0"}), 60);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("a Q4_0 cache of values needs a head width that is a multiple of 32 (this model's is 8)"),
              std::string::npos)
        << r.err;
}

}  // namespace tessera
