#include "engine/decoder_setup.h"

#include "model/local_decoder.h"
#include "util/error.h"

#include <algorithm>
#include <sstream>
#include <thread>

namespace tessera {

namespace {
std::vector<HostPort> parse_workers(const std::string& list) {
    std::vector<HostPort> out;
    std::stringstream in(list);
    std::string item;
    while (std::getline(in, item, ',')) {
        if (!item.empty()) out.push_back(parse_host_port(item));
    }
    return out;
}
}  // namespace

int default_threads(const ParallelOptions& options) {
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    return std::max(1, cores / std::max(1, options.local));
}

DecoderSetup make_decoder(const LlamaModel& model, const ForwardConfig& config, int n_threads,
                          const ParallelOptions& options) {
    if (options.fast && options.exact) throw make_error("--fast and --exact exclude each other");
    if (options.local < 1) throw make_error("--local needs at least 1 process, got {}", options.local);
    DecoderSetup setup;
    std::vector<HostPort> workers = parse_workers(options.workers);
    if (options.local > 1) {
        if (!workers.empty()) throw make_error("use either --workers or --local, not both");
        setup.local_workers =
            std::make_unique<LocalWorkers>(self_executable(), model.path(), options.local - 1, n_threads, 30000);
        workers = setup.local_workers->addresses();
    }
    if (workers.empty()) {
        if (!options.weights.empty()) throw make_error("--weights needs --workers or --local");
        setup.decoder = std::make_unique<LocalDecoder>(model, config, n_threads);
        return setup;
    }
    TpConfig tp;
    tp.workers = workers;
    tp.weights = options.weights;
    tp.fast = options.fast;
    tp.forward = config;
    tp.n_threads = n_threads;
    tp.limits.io_timeout_ms = options.timeout_ms;
    tp.connect_timeout_ms = options.timeout_ms;
    auto decoder = std::make_unique<TensorParallelDecoder>(model, tp);
    setup.tensor_parallel = decoder.get();
    setup.decoder = std::move(decoder);
    return setup;
}

}  // namespace tessera
