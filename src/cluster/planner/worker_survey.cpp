#include "cluster/planner/worker_survey.h"

#include "cluster/session/json_messages.h"
#include "cluster/session/session_messages.h"
#include "net/handshake.h"
#include "util/error.h"

#include <memory>

namespace tessera {

namespace {

// A worker probes its speed during the hello.
constexpr int kHelloTimeoutMs = 60000;

WorkerFacts survey_one(const LlamaModel& model, const HostPort& address, const WireKey* key,
                       const ChannelLimits& limits, int connect_timeout_ms) {
    const std::string who = "worker " + address.str();
    std::unique_ptr<FrameChannel> link;
    try {
        link = std::make_unique<FrameChannel>(TcpStream::connect(address, connect_timeout_ms), limits);
        authenticate_as_client(*link, key, limits.io_timeout_ms);
    } catch (const Error& e) {
        throw make_error("{}: {}", who, e.what());
    }
    FrameChannel& channel = *link;
    const std::string fingerprint = model.file().fingerprint_hex();
    json hello = hello_json(fingerprint);
    hello["rank"] = 1;
    hello["n_ranks"] = 2;
    hello["shm"] = false;
    send_json(channel, SessionMessage::kHello, hello);
    const HelloReply f = parse_hello_reply(recv_json(channel, SessionMessage::kHelloReply, who, kHelloTimeoutMs), who);
    require_hello_ok(f, who, fingerprint, model.path());
    WorkerFacts facts;
    facts.address = address;
    facts.probe_seconds = f.probe_seconds;
    facts.disk_read_bps = f.disk_read_bps;
    facts.free_memory = f.free_memory;
    facts.cpu_target = f.cpu_target;
    facts.device = f.device;
    facts.sealed = channel.sealed();
    facts.link = measure_link(channel, who, limits.io_timeout_ms);
    channel.send(static_cast<uint16_t>(SessionMessage::kShutdown), std::span<const uint8_t>());
    return facts;
}

}  // namespace

std::vector<WorkerFacts> survey_workers(const LlamaModel& model, std::span<const HostPort> workers,
                                        const WireKey* key, const ChannelLimits& limits, int connect_timeout_ms) {
    std::vector<WorkerFacts> out;
    for (const HostPort& w : workers) out.push_back(survey_one(model, w, key, limits, connect_timeout_ms));
    return out;
}

}  // namespace tessera
