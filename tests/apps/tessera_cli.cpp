#include "tessera_cli.h"

#include "model/random_model.h"

#include "npm_vocab.h"
#include "test_paths.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace tessera::test {

std::vector<std::string> tessera_cmd(std::initializer_list<std::string> args) {
    std::vector<std::string> v = {tessera_binary()};
    v.insert(v.end(), args);
    return v;
}

std::vector<int> tokens_of(const ProcessResult& r) {
    return nlohmann::json::parse(r.out)["tokens"].get<std::vector<int>>();
}

std::vector<int> greedy_tokens(const std::string& model, const std::vector<std::string>& extra) {
    std::vector<std::string> args = tessera_cmd({"run", "-m", model, "-p", "Once upon a time, in a quiet town by the sea",
                                                 "-n", "24", "--temp", "0", "--json"});
    args.insert(args.end(), extra.begin(), extra.end());
    const ProcessResult r = run_process(args, 120);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    if (r.exit_code != 0) return {};
    // A node lost on the way is replanned around, with the same tokens: that
    // would hide a node that failed (the run's stderr says why).
    const nlohmann::json j = nlohmann::json::parse(r.out);
    if (j.contains("recovery")) {
        EXPECT_EQ(j["recovery"].value("recoveries", 0), 0) << "a node was lost: " << r.err;
    }
    return j["tokens"].get<std::vector<int>>();
}

std::string start_worker(std::unique_ptr<BackgroundProcess>& worker, const std::string& model,
                         const std::string& cpu_target, const std::vector<std::string>& extra) {
    std::vector<std::string> cmd = {tessera_binary()};
    if (!cpu_target.empty()) cmd.insert(cmd.end(), {"--cpu-target", cpu_target});
    cmd.insert(cmd.end(), {"worker", "--listen", "127.0.0.1:0", "-m", model, "-t", "1", "--once"});
    cmd.insert(cmd.end(), extra.begin(), extra.end());
    worker = std::make_unique<BackgroundProcess>(cmd);
    const std::string line = worker->read_line(30);
    const std::string prefix = "listening on port ";
    EXPECT_EQ(line.rfind(prefix, 0), 0u) << line;
    return "127.0.0.1:" + line.substr(prefix.size());
}

std::string write_small_model(const std::string& dir, const std::string& name, int layers) {
    RandomModelSpec spec;
    spec.n_embd = 128;
    spec.n_layer = layers;
    spec.n_head = 4;
    spec.n_head_kv = 2;
    spec.n_ff = 256;
    spec.n_vocab = 600;
    spec.type = QuantType::F32;
    const std::string path = dir + "/" + name;
    write_random_model(spec, path);
    return path;
}

std::string qwen3_vocab_model(const std::string& dir) {
    const std::string vocab = converted_vocab("tokenizer-qwen3");
    if (vocab.empty()) return "";
    const std::string model = dir + "/qwen3.gguf";
    const auto gen = run_process(tessera_cmd({"gen-model", "--arch", "qwen3", "--dim", "64", "--layers", "1", "--heads", "2",
                                              "--kv-heads", "1", "--ffn", "128", "--vocab-from", vocab, "--type", "F32",
                                              "-q", "-o", model}),
                                 120);
    EXPECT_EQ(gen.exit_code, 0) << gen.err;
    return gen.exit_code == 0 ? model : "";
}

}  // namespace tessera::test
