// tessera worker: serve a slice of a model to a tensor-parallel root.
#include "apps/commands.h"
#include "cluster/session/heartbeat.h"
#include "cluster/session/worker.h"
#include "cluster/session/worker_status.h"
#include "engine/decoder_setup.h"
#include "net/wire_key.h"
#include "util/error.h"

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <thread>
#include <unistd.h>

#if TESSERA_VULKAN
#include "gpu_model/split_layers.h"
#include "gpu_model/vulkan_probe.h"
#endif

namespace tessera {

namespace {

constexpr const char* kDefaultPort = "9999";

struct WorkerCliOptions {
    std::string listen;  // empty: 0.0.0.0:9999 with a key, 127.0.0.1:9999 without
    std::string model;
    std::string cache_dir;
    std::string key_file;
    int key_fd = -1;
    bool insecure = false;
    double cache_max_gib = 32.0;
    int n_threads = 0;
    bool once = false;
    bool mmap = false;
    int timeout_ms = 5000;
    int root_silence_ms = kDefaultRootSilenceMs;
    bool advertise = false;
    int discovery_port = 9999;
    int metrics_port = 0;  // 0: no metrics
    std::string metrics_host = "127.0.0.1";
    std::string codebooks;
    std::string device = "cpu";
    int gpu_layers = INT_MAX;
};

bool is_loopback_host(const std::string& host) {
    return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1";
}

// The key of --key-fd: 64 hex digits a parent process (run --local) wrote to a pipe.
WireKey read_key_fd(int fd) {
    std::string text;
    char buf[130];
    ssize_t n;
    while (text.size() < sizeof buf && (n = ::read(fd, buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
    ::close(fd);
    return key_from_hex(text, "--key-fd");
}

void worker_main(const WorkerCliOptions& o) {
    WorkerOptions options;
    if (o.key_fd >= 0) {
        options.key = std::make_shared<const WireKey>(read_key_fd(o.key_fd));
    } else {
        options.key = key_from_flag_or_env(o.key_file);
    }
    std::string listen = o.listen;
    if (listen.empty()) {
        listen = std::string(options.key ? "0.0.0.0:" : "127.0.0.1:") + kDefaultPort;
        if (!options.key) {
            std::fprintf(stderr, "worker: no key (--key): listening on 127.0.0.1 only; to serve other machines, make "
                                 "a key with `tessera keygen -o FILE` and give every node --key FILE\n");
        }
    }
    options.listen = parse_host_port(listen);
    options.insecure = o.insecure;
    if (!options.key && !is_loopback_host(options.listen.host)) {
        if (!o.insecure) {
            throw make_error("listening on {} without a key would let anyone who reaches it use this worker: give "
                             "--key FILE (make one with `tessera keygen -o FILE`), or --insecure to accept that",
                             options.listen.str());
        }
        std::fprintf(stderr, "worker: warning: --insecure: frames on %s are neither encrypted nor authenticated\n",
                     options.listen.str().c_str());
    } else {
        options.insecure = false;
    }
    // Without -m the worker holds no model: roots send it their slice once.
    options.model_path = o.model;
    options.codebooks_path = o.codebooks;
    options.cache_dir = !o.cache_dir.empty() ? o.cache_dir
                        : std::getenv("XDG_CACHE_HOME") != nullptr
                            ? std::string(std::getenv("XDG_CACHE_HOME")) + "/tessera"
                            : std::string(std::getenv("HOME") != nullptr ? std::getenv("HOME") : "/tmp") + "/.cache/tessera";
    options.cache_max_bytes = static_cast<uint64_t>(o.cache_max_gib * (1ull << 30));
    options.n_threads = o.n_threads > 0 ? o.n_threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    options.once = o.once;
    options.private_weights = !o.mmap;
    options.limits.io_timeout_ms = o.timeout_ms;
    options.root_silence_ms = o.root_silence_ms;
    options.advertise = o.advertise;
    options.discovery_port = static_cast<uint16_t>(o.discovery_port);
    options.on_listening = [](uint16_t port) {
        // The first line on stdout: how `run --local` learns the port.
        std::printf("listening on port %u\n", static_cast<unsigned>(port));
        std::fflush(stdout);
    };
    options.log = [](const std::string& line) { std::fprintf(stderr, "worker: %s\n", line.c_str()); };
    if (const std::optional<int> vulkan = vulkan_device_of(o.device)) {
#if TESSERA_VULKAN
        const int index = *vulkan, gpu_layers = o.gpu_layers, n_threads = options.n_threads;
        const VulkanContext device(index);  // checked now: a worker on a device it lacks does not start
        options.device_name = fmt::format("vulkan:{} {}", index, device.info().name);
        options.device_memory = device.info().device_local_bytes;
        options.device_probe = [index](const LlamaModel& model) { return vulkan_probe_seconds(model, index); };
        options.stage_device = [=](const LlamaModel& model, const Slice& slice, const ForwardConfig& config) {
            return std::unique_ptr<SliceRunner>(
                std::make_unique<SplitLayers>(model, slice, config, index, gpu_layers, n_threads));
        };
        options.rank_device = [=](const LlamaModel& model, const Slice& slice, const ForwardConfig& config) {
            return make_vulkan_rank(model, slice, config, index, gpu_layers);
        };
#endif
    }
    // --metrics-port: the status as Prometheus metrics, on its own thread.
    std::unique_ptr<httplib::Server> metrics;
    std::thread metrics_thread;
    if (o.metrics_port > 0) {
        metrics = std::make_unique<httplib::Server>();
        if (!metrics->bind_to_port(o.metrics_host, o.metrics_port)) {
            throw make_error("--metrics-port {}: cannot listen on {}:{}", o.metrics_port, o.metrics_host, o.metrics_port);
        }
        // The routes exist before the server runs; the status getter arrives
        // once the worker listens.
        struct Getter {
            std::mutex mutex;
            std::function<nlohmann::json()> status;
        };
        auto getter = std::make_shared<Getter>();
        options.publish_status = [getter](std::function<nlohmann::json()> status) {
            std::lock_guard<std::mutex> lock(getter->mutex);
            getter->status = std::move(status);
        };
        auto serve_status = [getter](bool as_metrics) {
            return [getter, as_metrics](const httplib::Request&, httplib::Response& res) {
                std::function<nlohmann::json()> status;
                {
                    std::lock_guard<std::mutex> lock(getter->mutex);
                    status = getter->status;
                }
                if (!status) {
                    res.status = 503;
                    return;
                }
                if (as_metrics) {
                    res.set_content(worker_metrics_text(status()), "text/plain; version=0.0.4");
                } else {
                    res.set_content(status().dump(2), "application/json");
                }
            };
        };
        metrics->Get("/metrics", serve_status(true));
        metrics->Get("/status", serve_status(false));
        metrics_thread = std::thread([&metrics] { metrics->listen_after_bind(); });
    }
    struct StopMetrics {
        std::unique_ptr<httplib::Server>& server;
        std::thread& thread;
        ~StopMetrics() {
            if (server) server->stop();
            if (thread.joinable()) thread.join();
        }
    } stop_metrics{metrics, metrics_thread};
    run_worker(options);
}

}  // namespace

void add_worker_command(CLI::App& app) {
    auto o = std::make_shared<WorkerCliOptions>();
    CLI::App* cmd = app.add_subcommand("worker", "Serve a slice of a model to a tensor-parallel root (tessera run --workers)");
    cmd->add_option("--listen", o->listen,
                    "Address to listen on, HOST:PORT (port 0: any free port); default 0.0.0.0:9999 with a key, "
                    "127.0.0.1:9999 without");
    cmd->add_option("-m,--model", o->model,
                    "GGUF model file (the same file as the root's); without it, the root sends this worker its slice "
                    "once and it is cached");
    cmd->add_option("--key", o->key_file,
                    "Key file shared by every node (tessera keygen): only peers holding it are served, and every frame "
                    "is sealed; default: $TESSERA_KEY_FILE");
    cmd->add_flag("--insecure", o->insecure,
                  "Serve without a key on a non-loopback address (anyone who reaches the port can use the worker)");
    cmd->add_option("--key-fd", o->key_fd, "Read the key from this file descriptor (run --local)")->group("");
    cmd->add_option("--cache-dir", o->cache_dir, "Where received slices are cached (default: ~/.cache/tessera)");
    cmd->add_option("--cache-max", o->cache_max_gib, "Largest total size of the slice cache, in GiB (oldest evicted)")
        ->capture_default_str()
        ->check(CLI::Range(0.001, 1e6));
    cmd->add_option("--device", o->device,
                    "Where pipeline stages and tensor-parallel ranks compute: cpu (default) or vulkan[:N] (see tessera "
                    "devices)");
    cmd->add_option("--gpu-layers", o->gpu_layers,
                    "With --device vulkan: the first N layers of a stage on the GPU, the rest on the CPU (default: all); also -ngl");
    cmd->add_option("-t,--threads", o->n_threads, "Threads (0: one per CPU)")->capture_default_str();
    cmd->add_flag("--once", o->once, "Exit after serving one root");
    cmd->add_option("--codebooks", o->codebooks,
                    "Codebooks of the model's K/V rows (tessera vq-fit), for roots whose sequence-parallel prefill "
                    "sends rows compressed (run --prefill sp --codebooks)");
    cmd->add_flag("--mmap", o->mmap,
                  "Compute from the mapped model file instead of a private copy of the slice (loads faster, "
                  "generates slower)");
    cmd->add_option("--timeout-ms", o->timeout_ms, "Network timeout for a frame or a handshake, in ms")
        ->capture_default_str()
        ->check(CLI::Range(100, 600000));
    cmd->add_flag("--advertise", o->advertise,
                  "Answer keyed discovery (run|chat|serve|plan --discover) on the local network: only roots holding "
                  "the same --key get an answer (needs --key)");
    cmd->add_option("--discovery-port", o->discovery_port, "The UDP port --advertise answers on")
        ->capture_default_str()
        ->check(CLI::Range(1, 65535));
    cmd->add_option("--metrics-port", o->metrics_port,
                    "Serve the worker's status as Prometheus metrics at http://HOST:PORT/metrics (and as JSON at "
                    "/status) on --metrics-host")
        ->check(CLI::Range(1, 65535));
    cmd->add_option("--metrics-host", o->metrics_host,
                    "The address of --metrics-port (the metrics are not sealed: expose them only where you would "
                    "expose the list of models this worker holds)")
        ->capture_default_str();
    cmd->add_option("--root-silence-ms", o->root_silence_ms,
                    "Drop a session whose root has sent nothing, not even a heartbeat (roots beat every second, busy "
                    "or idle), for this long, and serve the next root: a root that lost power or its cable frees "
                    "this worker (0: never)")
        ->capture_default_str()
        ->check(CLI::Range(0, 86400000));
    cmd->callback([o] { worker_main(*o); });
}

}  // namespace tessera
