// tessera worker: serve a slice of a model to a tensor-parallel root.
#include "apps/commands.h"
#include "dist/tp_worker.h"
#include "util/error.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>

namespace tessera {

namespace {

struct WorkerCliOptions {
    std::string listen = "0.0.0.0:9999";
    std::string model;
    std::string cache_dir;
    int n_threads = 0;
    bool once = false;
    bool mmap = false;
    int timeout_ms = 5000;
};

void worker_main(const WorkerCliOptions& o) {
    WorkerOptions options;
    options.listen = parse_host_port(o.listen);
    // Without -m the worker holds no model: roots send it their slice once.
    options.model_path = o.model;
    options.cache_dir = !o.cache_dir.empty() ? o.cache_dir
                        : std::getenv("XDG_CACHE_HOME") != nullptr
                            ? std::string(std::getenv("XDG_CACHE_HOME")) + "/tessera"
                            : std::string(std::getenv("HOME") != nullptr ? std::getenv("HOME") : "/tmp") + "/.cache/tessera";
    options.n_threads = o.n_threads > 0 ? o.n_threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    options.once = o.once;
    options.private_weights = !o.mmap;
    options.limits.io_timeout_ms = o.timeout_ms;
    options.on_listening = [](uint16_t port) {
        // The first line on stdout: how `run --local` learns the port.
        std::printf("listening on port %u\n", static_cast<unsigned>(port));
        std::fflush(stdout);
    };
    options.log = [](const std::string& line) { std::fprintf(stderr, "worker: %s\n", line.c_str()); };
    run_tp_worker(options);
}

}  // namespace

void add_worker_command(CLI::App& app) {
    auto o = std::make_shared<WorkerCliOptions>();
    CLI::App* cmd = app.add_subcommand("worker", "Serve a slice of a model to a tensor-parallel root (tessera run --workers)");
    cmd->add_option("--listen", o->listen, "Address to listen on, HOST:PORT (port 0: any free port)")
        ->capture_default_str();
    cmd->add_option("-m,--model", o->model,
                    "GGUF model file (the same file as the root's); without it, the root sends this worker its slice "
                    "once and it is cached");
    cmd->add_option("--cache-dir", o->cache_dir, "Where received slices are cached (default: ~/.cache/tessera)");
    cmd->add_option("-t,--threads", o->n_threads, "Threads (0: one per CPU)")->capture_default_str();
    cmd->add_flag("--once", o->once, "Exit after serving one root");
    cmd->add_flag("--mmap", o->mmap,
                  "Compute from the mapped model file instead of a private copy of the slice (loads faster, "
                  "generates slower)");
    cmd->add_option("--timeout-ms", o->timeout_ms, "Network timeout per read or write, in ms")
        ->capture_default_str()
        ->check(CLI::Range(100, 600000));
    cmd->callback([o] { worker_main(*o); });
}

}  // namespace tessera
