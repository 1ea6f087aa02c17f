// The software cost of one tensor-parallel sync, alone: N rank processes on
// this machine joined by loopback TCP (sealed as a keyed cluster's, or
// plain), each running PartialExchange over partials of one position with no
// compute between syncs. What a sync costs here is framing, sealing,
// encoding, the kernel's loopback and waking up, and decoding and adding:
// the fixed cost per sync that issue 22 asks to bring to <= 30 us, and the
// "o" of benchmarks/tensor_parallel.sh's projection.
//
//   exchange_bench [--ranks 2] [--width 4096 | -m MODEL] [--rows 1]
//                  [--syncs 20000] [--fast] [--plain] [--bands 1] [--reduce-scatter]
//
// Prints the median over 5 rounds of microseconds per sync and the bytes
// each rank sent per sync. Partials are random values of a real residual
// update's size (|v| ~ 0.05) on the fixed-point grid. Not a test: times
// depend on the machine.
#include "cluster/tensor_parallel/partial_exchange.h"
#include "model/llama_model.h"
#include "model/slice_forward.h"
#include "net/seal.h"
#include "net/tcp.h"
#include "util/error.h"
#include "util/rng.h"
#include "util/timer.h"

#include <CLI/CLI.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

namespace tessera {
namespace {

struct Options {
    int ranks = 2, width = 4096, rows = 1, syncs = 20000, bands = 1;
    bool fast = false, plain = false, reduce_scatter = false;
};

// Keys of the direction from -> to: any fixed bytes do, as long as both ends
// derive the same ones (the handshake is not what is timed here).
std::array<uint8_t, 32> direction_key(int from, int to) {
    std::array<uint8_t, 32> k{};
    for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<uint8_t>(7 * i + 31 * from + 101 * to + 1);
    return k;
}

std::unique_ptr<FrameChannel> open_channel(TcpStream stream, const Options& o, int self, int peer) {
    auto channel = std::make_unique<FrameChannel>(std::move(stream), ChannelLimits{});
    channel->set_socket_buffers(kMeshSocketBufferBytes);
    if (!o.plain) {
        SessionKeys keys;
        keys.send = direction_key(self, peer);
        keys.recv = direction_key(peer, self);
        channel->set_codec(make_sealing_codec(keys, "rank " + std::to_string(peer)));
    }
    return channel;
}

// One rank: connects the mesh (a rank accepts from higher ranks, connects to
// lower ones), then rounds of syncs; rank 0 prints.
int run_rank(int rank, const Options& o, std::vector<std::unique_ptr<TcpListener>>& listeners) {
    std::vector<std::unique_ptr<FrameChannel>> channels(static_cast<size_t>(o.ranks));
    for (int peer = 0; peer < rank; ++peer) {
        TcpStream s = TcpStream::connect({"127.0.0.1", listeners[static_cast<size_t>(peer)]->port()}, 5000);
        const uint8_t me = static_cast<uint8_t>(rank);
        s.write_all(&me, 1, 5000);
        channels[static_cast<size_t>(peer)] = open_channel(std::move(s), o, rank, peer);
    }
    for (int k = rank + 1; k < o.ranks; ++k) {
        TcpStream s = listeners[static_cast<size_t>(rank)]->accept(5000);
        uint8_t peer = 0;
        s.read_exact(&peer, 1, 5000);
        if (peer <= rank || peer >= o.ranks) throw make_error("rank {}: a connection from rank {}", rank, peer);
        channels[peer] = open_channel(std::move(s), o, rank, peer);
    }
    std::vector<ExchangePeer> peers(static_cast<size_t>(o.ranks));
    for (int r = 0; r < o.ranks; ++r) {
        peers[static_cast<size_t>(r)].channel = channels[static_cast<size_t>(r)].get();
        peers[static_cast<size_t>(r)].name = "rank " + std::to_string(r);
    }
    PartialExchange exchange(rank, std::move(peers), !o.fast);
    exchange.set_bands(o.bands);
    if (o.reduce_scatter) exchange.set_topology(PartialTopology::kReduceScatter);

    const size_t n = static_cast<size_t>(o.rows) * o.width;
    Rng rng(1234 + static_cast<uint64_t>(rank));
    std::vector<double> source(n), partial(n);
    std::vector<float> sum(n);
    for (double& v : source) v = std::ldexp(std::round(std::ldexp(0.05 * rng.next_normal(), 32)), -32);
    std::vector<double> per_sync_us;
    uint32_t step = 0;
    const int per_round = std::max(1, o.syncs / 5);
    for (int round = 0; round < 6; ++round) {  // round 0 warms up
        const double start = now_seconds();
        for (int i = 0; i < per_round; ++i, ++step) {
            std::copy(source.begin(), source.end(), partial.begin());
            const uint32_t s = step % 64;
            const int deadline = 5000;
            // Bands as SliceForward cuts them (whole 64-column runs, from
            // the exchange's first band), sent before the sum as a rank
            // sends them during its product.
            const int64_t bands = SliceForward::partial_band_count(o.width, exchange.bands_for(o.rows, o.width));
            for (int64_t k = 0; bands > 1 && k < bands; ++k) {
                const int64_t b = (exchange.first_band(o.rows, o.width) + k) % bands;
                const int64_t c0 = b == 0 ? 0 : SliceForward::partial_band_end(o.width, bands, b - 1);
                const int64_t c1 = SliceForward::partial_band_end(o.width, bands, b);
                exchange.send_band(s, o.rows, o.width, partial.data(), static_cast<int>(c0), static_cast<int>(c1));
            }
            if (o.fast) exchange.fast_sum(s, o.rows, o.width, partial.data(), sum.data(), deadline);
            else exchange.exact_sum(s, o.rows, o.width, partial.data(), deadline);
        }
        if (round > 0) per_sync_us.push_back((now_seconds() - start) * 1e6 / per_round);
    }
    if (rank == 0) {
        std::sort(per_sync_us.begin(), per_sync_us.end());
        uint64_t sent = 0;
        for (const auto& p : exchange.peer_stats()) sent += p.bytes_sent;
        std::printf("%d ranks, %d x %d, %s%s, %s, %d band%s: %.1f us per sync (median of 5 rounds; %.1f..%.1f), "
                    "%.0f bytes sent per sync per rank\n",
                    o.ranks, o.rows, o.width, o.fast ? "fast (Q8_0)" : "exact (packed fixed point)",
                    o.reduce_scatter ? ", reduce-scatter" : "",
                    o.plain ? "plain" : "sealed", o.bands, o.bands == 1 ? "" : "s", per_sync_us[2],
                    per_sync_us.front(), per_sync_us.back(), static_cast<double>(sent) / step);
    }
    return 0;
}

int run(int argc, char** argv) {
    CLI::App app{"the software cost of one tensor-parallel sync over loopback TCP, no compute"};
    Options o;
    app.add_option("--ranks", o.ranks)->check(CLI::Range(2, 8));
    std::string model;
    app.add_option("--width", o.width, "values per position (a model's n_embd)")->check(CLI::Range(32, 1 << 16));
    app.add_option("-m,--model", model, "take --width from this model's n_embd");
    app.add_option("--rows", o.rows)->check(CLI::Range(1, 64));
    app.add_option("--syncs", o.syncs)->check(CLI::Range(5, 10000000));
    app.add_option("--bands", o.bands)->check(CLI::Range(1, 16));
    app.add_flag("--fast", o.fast, "Q8_0 partials (else exact packed fixed point)");
    app.add_flag("--plain", o.plain, "unsealed frames (else ChaCha20-Poly1305)");
    app.add_flag("--reduce-scatter", o.reduce_scatter, "the reduce-scatter exchange (exact only; else all-to-all)");
    CLI11_PARSE(app, argc, argv);
    if (!model.empty()) o.width = static_cast<int>(LlamaModel(model).hparams().n_embd);
    std::vector<std::unique_ptr<TcpListener>> listeners;
    for (int r = 0; r < o.ranks; ++r) listeners.push_back(std::make_unique<TcpListener>(HostPort{"127.0.0.1", 0}));
    std::vector<pid_t> children;
    for (int r = 1; r < o.ranks; ++r) {
        const pid_t pid = fork();
        if (pid < 0) throw make_error("fork failed");
        if (pid == 0) {
            int rc = 1;
            try {
                rc = run_rank(r, o, listeners);
            } catch (const std::exception& e) {
                std::fprintf(stderr, "rank %d: %s\n", r, e.what());
            }
            _exit(rc);
        }
        children.push_back(pid);
    }
    int rc = run_rank(0, o, listeners);
    for (pid_t pid : children) {
        int status = 0;
        waitpid(pid, &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) rc = 1;
    }
    return rc;
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
    try {
        return tessera::run(argc, argv);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "exchange_bench: %s\n", e.what());
        return 1;
    }
}
