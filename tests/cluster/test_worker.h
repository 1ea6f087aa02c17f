// Helpers of the cluster tests: a worker serving one session from a thread
// of the test (real loopback TCP, the CLI tests run separate processes), and
// greedy decoding that can keep every step's logits.
#pragma once

#include "cluster/session/worker.h"
#include "model/decoder.h"
#include "model/random_model.h"
#include "util/error.h"

#include <algorithm>
#include <future>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace tessera::test {

// A worker serving one session from a thread; its port is known once it listens.
class TestWorker {
public:
    explicit TestWorker(const std::string& model_path, int threads = 1, const std::string& cache_dir = "",
                        std::shared_ptr<const WireKey> key = nullptr, const std::string& codebooks = "") {
        std::promise<uint16_t> port;
        auto future = port.get_future();
        thread_ = std::thread([this, model_path, threads, cache_dir, key, codebooks, p = std::move(port)]() mutable {
            WorkerOptions o;
            o.key = key;
            o.listen = {"127.0.0.1", 0};
            o.model_path = model_path;
            o.codebooks_path = codebooks;
            o.cache_dir = cache_dir;
            o.n_threads = threads;
            o.once = true;
            o.limits.io_timeout_ms = 3000;
            o.on_listening = [&p](uint16_t bound) { p.set_value(bound); };
            try {
                run_worker(o);
            } catch (const Error& e) {
                error_ = e.what();
            }
        });
        port_ = future.get();
    }
    ~TestWorker() { thread_.join(); }
    HostPort address() const { return {"127.0.0.1", port_}; }
    const std::string& error() const { return error_; }

private:
    std::thread thread_;
    uint16_t port_ = 0;
    std::string error_;
};

// Greedy tokens; every step's logits appended to `logits` when given.
inline std::vector<int32_t> greedy(Decoder& decoder, std::vector<int32_t> tokens, int n, std::vector<float>* logits_out = nullptr) {
    const int n_vocab = decoder.hparams().n_vocab;
    int pos = 0;
    std::vector<int32_t> out;
    std::span<const int32_t> feed = tokens;
    std::vector<int32_t> next(1);
    for (int i = 0; i < n; ++i) {
        const float* logits = decoder.eval(feed, pos);
        if (logits_out != nullptr) logits_out->insert(logits_out->end(), logits, logits + n_vocab);
        pos += static_cast<int>(feed.size());
        next[0] = static_cast<int32_t>(std::max_element(logits, logits + n_vocab) - logits);
        out.push_back(next[0]);
        feed = next;
    }
    return out;
}

// n token ids drawn from [3, n_vocab) after a BOS (id 1).
inline std::vector<int32_t> random_prompt(int n, int n_vocab, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int32_t> pick(3, n_vocab - 1);
    std::vector<int32_t> out(static_cast<size_t>(n));
    for (int32_t& t : out) t = pick(rng);
    out[0] = 1;
    return out;
}

// A small generated GQA model (4 query heads, 2 KV heads 32 wide, 3 layers,
// Q8_0) written to `path`: 32-wide heads allow Q8_0/Q4_0 KV rows.
inline std::string small_gqa_model(const std::string& path) {
    RandomModelSpec spec;
    spec.n_embd = 128;
    spec.n_layer = 3;
    spec.n_head = 4;
    spec.n_head_kv = 2;
    spec.n_ff = 256;
    spec.n_vocab = 300;
    spec.type = QuantType::Q8_0;
    write_random_model(spec, path);
    return path;
}

}  // namespace tessera::test
