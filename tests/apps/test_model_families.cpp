// Every model family (model/architecture.h), generated with llama.cpp's
// tensor names and keys (gen-model --arch): one process, tensor parallel
// over 3 processes (--exact), a 2-stage pipeline, and tensor parallel with a
// worker that holds no model (it gets slice files, with fused tensors cut by
// head and channel) give the same greedy tokens and, over a text, the same
// perplexity in every printed digit (logits equal bit for bit would; any
// difference in one logit would show).
#include "subprocess.h"
#include "tessera_cli.h"
#include "test_paths.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <memory>
#include <set>

namespace tessera {

namespace {

using test::BackgroundProcess;
using test::run_process;

std::vector<std::string> tessera(std::vector<std::string> args) {
    args.insert(args.begin(), test::tessera_binary());
    return args;
}

// A text of the same few dozen words in a random order: every family's
// random model has something to predict over several chunks.
std::string write_text(const std::string& dir) {
    static const char* words[] = {"once", "upon", "a", "time", "there", "was", "little", "girl", "dog", "cat", "ran",
                                  "jumped", "happy", "sad", "sun", "moon", "tree", "house", "river", "played", "found",
                                  "lost", "friend", "the", "and", "she", "he", "they", "went", "home"};
    std::string text;
    uint64_t state = 7;
    for (int i = 0; i < 300; ++i) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        text += words[(state >> 33) % (sizeof words / sizeof words[0])];
        text += ' ';
    }
    const std::string path = dir + "/text.txt";
    std::ofstream(path) << text;
    return path;
}

// The "[1]..,[2]..," chunk line and the final estimate of a perplexity run.
std::string perplexity_lines(const test::ProcessResult& r) {
    std::string lines;
    size_t at = 0;
    while (at < r.out.size()) {
        const size_t end = r.out.find('\n', at);
        const std::string line = r.out.substr(at, end == std::string::npos ? std::string::npos : end - at);
        if (line.rfind("[1]", 0) == 0 || line.rfind("Final estimate", 0) == 0) lines += line + "\n";
        if (end == std::string::npos) break;
        at = end + 1;
    }
    return lines;
}

}  // namespace

class ModelFamilies : public testing::TestWithParam<const char*> {};

TEST_P(ModelFamilies, EveryPlanEqualsOneProcess) {
    const std::string preset = GetParam();
    const std::string dir = test::test_dir(std::string("families_") + preset);
    const std::string model = dir + "/model.gguf";
    // 4 KV heads over 3 ranks: uneven shares; a window (where the family has
    // one) of 24 positions, shorter than prompt + generation.
    const auto gen = run_process(tessera({"gen-model", "--arch", preset, "--dim", "256", "--layers", "4", "--heads", "8",
                                          "--kv-heads", "4", "--ffn", "512", "--type", "Q8_0", "-q", "-o", model}),
                                 60);
    ASSERT_EQ(gen.exit_code, 0) << gen.err;
    const std::vector<std::string> run = {"run", "-m", model, "-p", "Once upon a time there was a little girl",
                                          "-n", "32", "--temp", "0", "--ignore-eos", "--json"};
    const auto single = run_process(tessera(run), 60);
    ASSERT_EQ(single.exit_code, 0) << single.err;
    const std::vector<int> want = test::tokens_of(single);
    ASSERT_EQ(want.size(), 32u);

    std::vector<std::string> tp = run;
    tp.insert(tp.end(), {"--local", "3", "--exact"});
    const auto local3 = run_process(tessera(tp), 60);
    ASSERT_EQ(local3.exit_code, 0) << local3.err;
    EXPECT_EQ(test::tokens_of(local3), want) << "--local 3";

    {
        std::unique_ptr<BackgroundProcess> worker;
        std::vector<std::string> pipeline = run;
        pipeline.insert(pipeline.end(), {"--stages", "root/" + test::start_worker(worker, model)});
        const auto r = run_process(tessera(pipeline), 60);
        ASSERT_EQ(r.exit_code, 0) << r.err;
        EXPECT_EQ(test::tokens_of(r), want) << "2-stage pipeline";
        EXPECT_EQ(nlohmann::json::parse(r.out)["stages"], 2);
    }
    {
        // A worker without the model: the root sends its slice file.
        auto worker = std::make_unique<BackgroundProcess>(tessera(
            {"worker", "--listen", "127.0.0.1:0", "-t", "1", "--once", "--cache-dir", dir + "/cache"}));
        const std::string line = worker->read_line(30);
        ASSERT_EQ(line.rfind("listening on port ", 0), 0u) << line;
        std::vector<std::string> sliced = run;
        sliced.insert(sliced.end(), {"--workers", "127.0.0.1:" + line.substr(18)});
        const auto r = run_process(tessera(sliced), 60);
        ASSERT_EQ(r.exit_code, 0) << r.err;
        EXPECT_EQ(test::tokens_of(r), want) << "worker from a slice file";
        EXPECT_EQ(nlohmann::json::parse(r.out)["ranks"], 2) << "the worker was lost: " << r.err;
    }

    const std::string text = write_text(dir);
    const std::vector<std::string> ppl = {"perplexity", "-m", model, "-f", text, "-c", "64"};
    const auto base = run_process(tessera(ppl), 60);
    ASSERT_EQ(base.exit_code, 0) << base.err;
    ASSERT_NE(perplexity_lines(base).find("Final estimate"), std::string::npos) << base.out;
    std::vector<std::string> ppl3 = ppl;
    ppl3.insert(ppl3.end(), {"--local", "3"});
    const auto tp_ppl = run_process(tessera(ppl3), 60);
    ASSERT_EQ(tp_ppl.exit_code, 0) << tp_ppl.err;
    EXPECT_EQ(perplexity_lines(tp_ppl), perplexity_lines(base));
}

INSTANTIATE_TEST_SUITE_P(Presets, ModelFamilies,
                         testing::Values("llama3", "mistral", "qwen2", "qwen3", "gemma2", "gemma3", "phi3"));

// A file of a family we do not run is refused with its name and the list.
TEST(ModelFamilies, UnsupportedArchitectureIsRefusedWithItsName) {
    const std::string dir = test::test_dir("families_refused");
    const std::string model = dir + "/m.gguf";
    ASSERT_EQ(run_process(tessera({"gen-model", "--arch", "qwen2", "-q", "-o", model}), 60).exit_code, 0);
    // Rewrite general.architecture's value in place ("qwen2" -> "mamba").
    std::string bytes;
    {
        std::ifstream in(model, std::ios::binary);
        bytes.assign(std::istreambuf_iterator<char>(in), {});
    }
    const size_t at = bytes.find("qwen2");
    ASSERT_NE(at, std::string::npos);
    bytes.replace(at, 5, "mamba");
    std::ofstream(model, std::ios::binary) << bytes;
    const auto r = run_process(tessera({"run", "-m", model, "-p", "hi", "-n", "2"}), 60);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("architecture 'mamba' is not supported"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("qwen3, qwen3moe, gemma2, gemma3, gpt-oss, phi3"), std::string::npos) << r.err;
}

// The sliding window is applied: the same weights with a window longer than
// the text score it differently from a 24-position window, and both plans
// agree on each.
TEST(ModelFamilies, SlidingWindowChangesTheScores) {
    const std::string dir = test::test_dir("families_window");
    const std::string text = write_text(dir);
    std::string lines[2];
    int i = 0;
    for (const char* window : {"24", "100000"}) {
        const std::string model = dir + "/gemma2-" + window + ".gguf";
        ASSERT_EQ(run_process(tessera({"gen-model", "--arch", "gemma2", "--sliding-window", window, "--layers", "2",
                                       "-q", "-o", model}),
                              60)
                      .exit_code,
                  0);
        const auto r = run_process(tessera({"perplexity", "-m", model, "-f", text, "-c", "128"}), 60);
        ASSERT_EQ(r.exit_code, 0) << r.err;
        lines[i++] = perplexity_lines(r);
    }
    ASSERT_FALSE(lines[0].empty());
    EXPECT_NE(lines[0], lines[1]);
}

}  // namespace tessera
