// End-to-end test of `tessera bench`: both tests run, every figure is there
// and plausible. Speed itself is never asserted (shared machines are noisy).
#include "subprocess.h"
#include "test_paths.h"
#include "util/cpu_caches.h"
#include "util/mem_bandwidth.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <vector>

namespace tessera {

TEST(Bench, ReportsPpTgAndBandwidthAsJson) {
    const auto r = test::run_process({test::tessera_binary(), "bench", "-p", "24", "-n", "8", "-r", "3", "-t", "2",
                                      "-b", "16", "--json"},
                                     60);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["type"], "F32");
    EXPECT_EQ(j["threads"], 2);
    for (const char* test : {"pp", "tg"}) {
        const auto& t = j[test];
        ASSERT_EQ(t["tps"].size(), 3u) << test;
        EXPECT_GT(t["tps_min"].get<double>(), 0.0) << test;
        EXPECT_GE(t["tps_median"].get<double>(), t["tps_min"].get<double>()) << test;
    }
    EXPECT_EQ(j["pp"]["tokens"], 24);
    EXPECT_EQ(j["tg"]["tokens"], 8);
    // stories260K reads ~1 MiB of F32 weights per token, less than the file.
    const auto bytes = j["weight_bytes_per_token"].get<uint64_t>();
    EXPECT_GT(bytes, 900'000u);
    EXPECT_LT(bytes, j["model_bytes"].get<uint64_t>());
    // stories260K: 5 layers of wo 64x64 and w_down 172x64, F32.
    EXPECT_EQ(j["wo_bytes_per_token"].get<uint64_t>(), 5u * 64 * 64 * 4);
    EXPECT_EQ(j["w_down_bytes_per_token"].get<uint64_t>(), 5u * 172 * 64 * 4);
    EXPECT_GT(j["mem_bandwidth_gbs"].get<double>(), 0.1);
    EXPECT_NEAR(j["tg_bandwidth_gbs"].get<double>(), bytes * j["tg"]["tps_median"].get<double>() / 1e9, 1e-6);
    // One ceiling measured before each tg repetition; the fraction is the
    // median of each repetition's rate over its own ceiling.
    const auto& ceilings = j["tg_ceiling_gbs"];
    ASSERT_EQ(ceilings.size(), 3u);
    std::vector<double> fractions;
    for (size_t r = 0; r < 3; ++r) {
        EXPECT_GT(ceilings[r].get<double>(), 0.1);
        fractions.push_back(bytes * j["tg"]["tps"][r].get<double>() / 1e9 / ceilings[r].get<double>());
    }
    std::sort(fractions.begin(), fractions.end());
    EXPECT_NEAR(j["tg_bandwidth_fraction"].get<double>(), fractions[1], 1e-9);
    // The peak of short reads, for reference, with the median rate over it.
    const double peak = j["mem_peak_gbs"].get<double>();
    EXPECT_GT(peak, 0.1);
    EXPECT_NEAR(j["tg_peak_fraction"].get<double>(), j["tg_bandwidth_gbs"].get<double>() / peak, 1e-9);
    // The read loop's buffer: twice this machine's largest cache, 256 MiB at least.
    EXPECT_EQ(j["probe_bytes"].get<uint64_t>(), probe_bytes_beyond_caches(last_level_cache_bytes()));
    // The read loop streams in whichever way read fastest, whatever the policy.
    const std::string way = j["probe_prefetch"].get<std::string>();
    EXPECT_TRUE(way == "none" || way == "l2" || way == "l2+l1") << way;
}

// llama-bench's -d: a history before pp and tg, evaluated from a prompt or
// stored as random rows (one process only), with dense or sparse attention;
// the rates are reported, never compared here.
TEST(Bench, DepthPutsAHistoryBeforeEachTest) {
    nlohmann::json runs[3];
    const std::vector<std::vector<std::string>> extras = {
        {"--depth-fill", "prompt"}, {"--depth-fill", "random"}, {"--depth-fill", "random", "--attention", "sparse", "--sparse-window", "16"}};
    for (size_t i = 0; i < extras.size(); ++i) {
        std::vector<std::string> argv = {test::tessera_binary(), "bench", "-p", "8", "-n", "8", "-r", "1", "-t", "1",
                                         "-d", "400", "--json"};
        argv.insert(argv.end(), extras[i].begin(), extras[i].end());
        const auto r = test::run_process(argv, 60);
        ASSERT_EQ(r.exit_code, 0) << r.err;
        runs[i] = nlohmann::json::parse(r.out);
        EXPECT_EQ(runs[i]["depth"], 400);
        EXPECT_GT(runs[i]["tg"]["tps_median"].get<double>(), 0.0);
    }
    EXPECT_EQ(runs[1]["depth_fill"], "random");
    EXPECT_NE(runs[2]["attention"].get<std::string>().find("sparse (window 16"), std::string::npos);
    const auto r = test::run_process({test::tessera_binary(), "bench", "-p", "0", "-n", "4", "-d", "64", "--local",
                                      "2", "--depth-fill", "random"},
                                     60);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("--depth-fill random needs one process"), std::string::npos) << r.err;
}

// Tensor parallel: the root's time per token split into computing and
// waiting, and the waiting at the attention and at the FFN syncs (where a
// mixture of experts' imbalance between ranks shows): every sync's exchange
// takes some time, so both kinds wait a little, and together no more than
// the whole wait (which also holds the head's logits).
TEST(Bench, TensorParallelReportsTheWaitsAtEachKindOfSync) {
    const auto r = test::run_process({test::tessera_binary(), "bench", "-p", "0", "-n", "8", "-r", "1", "-t", "1",
                                      "--local", "2", "--json"},
                                     60);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const nlohmann::json tp = nlohmann::json::parse(r.out)["tp"];
    ASSERT_TRUE(tp.is_object()) << r.out;
    EXPECT_EQ(tp["syncs_per_token"], 2 * 5) << r.out;  // stories260K: 5 layers, an attention and an FFN sync each
    const double wait = tp["wait_ms_per_token"].get<double>(), ffn = tp["ffn_wait_ms_per_token"].get<double>(),
                 attention = tp["attention_wait_ms_per_token"].get<double>();
    EXPECT_GT(attention, 0.0) << r.out;
    EXPECT_GT(ffn, 0.0) << r.out;
    EXPECT_LE(attention + ffn, wait * (1 + 1e-9)) << r.out;
}

TEST(Bench, RejectsNothingToMeasure) {
    const auto r = test::run_process({test::tessera_binary(), "bench", "-p", "0", "-n", "0"}, 30);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("error:"), std::string::npos) << r.err;
}

}  // namespace tessera

namespace tessera {

// --cpu-target (before the subcommand) and TESSERA_CPU_TARGET limit the
// kernels to a lesser SIMD target, which bench reports; a target this CPU
// cannot run is a clear error. The portable fallback exists on every x86 CPU
// (SCALAR under GCC, EMU128 under clang; "portable" names either).
TEST(Bench, CpuTargetCanBeLimitedAndIsReported) {
    const std::vector<std::string> bench = {"bench", "-p", "8", "-n", "4", "-r", "1", "-t", "1", "--json"};
    const auto is_fallback = [](const nlohmann::json& target) { return target == "SCALAR" || target == "EMU128"; };
    std::vector<std::string> flag = {test::tessera_binary(), "--cpu-target", "portable"};
    flag.insert(flag.end(), bench.begin(), bench.end());
    const auto limited = test::run_process(flag, 60);
    ASSERT_EQ(limited.exit_code, 0) << limited.err;
    EXPECT_TRUE(is_fallback(nlohmann::json::parse(limited.out)["cpu_target"])) << limited.out;

    std::vector<std::string> env = {"/usr/bin/env", "TESSERA_CPU_TARGET=Portable", test::tessera_binary()};
    env.insert(env.end(), bench.begin(), bench.end());
    const auto from_env = test::run_process(env, 60);
    ASSERT_EQ(from_env.exit_code, 0) << from_env.err;
    EXPECT_TRUE(is_fallback(nlohmann::json::parse(from_env.out)["cpu_target"])) << from_env.out;

    std::vector<std::string> plain = {test::tessera_binary()};
    plain.insert(plain.end(), bench.begin(), bench.end());
    const auto best = test::run_process(plain, 60);
    ASSERT_EQ(best.exit_code, 0) << best.err;
    EXPECT_FALSE(nlohmann::json::parse(best.out)["cpu_target"].get<std::string>().empty());

    const auto bogus = test::run_process({test::tessera_binary(), "--cpu-target", "pentium", "bench"}, 30);
    EXPECT_EQ(bogus.exit_code, 1);
    EXPECT_NE(bogus.err.find("unknown or unsupported CPU target 'pentium' (this CPU runs: "), std::string::npos)
        << bogus.err;
}

}  // namespace tessera

namespace tessera {

// --prefetch (before the subcommand) and TESSERA_PREFETCH choose how the
// grouped kernels prefetch, which bench reports; a name it does not know is a
// clear error, from the flag or from the environment.
TEST(Bench, PrefetchPolicyCanBeChosenAndIsReported) {
    const std::vector<std::string> bench = {"bench", "-p", "0", "-n", "4", "-r", "1", "-t", "1", "--json"};
    for (const char* policy : {"l2", "l2+l1", "by-type", "none", "none-by-type"}) {
        std::vector<std::string> flag = {test::tessera_binary(), "--prefetch", policy};
        flag.insert(flag.end(), bench.begin(), bench.end());
        const auto r = test::run_process(flag, 60);
        ASSERT_EQ(r.exit_code, 0) << r.err;
        EXPECT_EQ(nlohmann::json::parse(r.out)["prefetch"], policy);

        std::vector<std::string> env = {"/usr/bin/env", std::string("TESSERA_PREFETCH=") + policy,
                                        test::tessera_binary()};
        env.insert(env.end(), bench.begin(), bench.end());
        const auto e = test::run_process(env, 60);
        ASSERT_EQ(e.exit_code, 0) << e.err;
        EXPECT_EQ(nlohmann::json::parse(e.out)["prefetch"], policy);
    }
    const auto bogus = test::run_process({test::tessera_binary(), "--prefetch", "l3", "bench"}, 30);
    EXPECT_EQ(bogus.exit_code, 1);
    EXPECT_NE(bogus.err.find("unknown prefetch policy 'l3' (auto, l2, l2+l1, by-type, none or none-by-type)"), std::string::npos) << bogus.err;
    const auto bogus_env =
        test::run_process({"/usr/bin/env", "TESSERA_PREFETCH=fast", test::tessera_binary(), "bench"}, 30);
    EXPECT_EQ(bogus_env.exit_code, 1);
    EXPECT_NE(bogus_env.err.find("unknown prefetch policy 'fast'"), std::string::npos) << bogus_env.err;
}

}  // namespace tessera
