// What a worker holds and does, for `tessera status` (a kStatus message in
// place of the hello, answered busy or not) and the worker's Prometheus
// metrics (--metrics-port): its release and protocol, CPU target and device,
// memory, the models it holds (its -m file, the slices in its cache), the
// session it serves (root, role, since when, the root's last sign of life,
// rows computed), what it has served since it started, and its discovery
// counters.
#pragma once

#include "cluster/session/heartbeat.h"
#include "cluster/session/json_messages.h"
#include "net/discovery.h"
#include "net/tcp.h"

#include <memory>
#include <mutex>
#include <string>

namespace tessera {

// The session part, kept by the worker as sessions begin and end.
class WorkerStatusBoard {
public:
    WorkerStatusBoard();
    // A session of `root` begins; its loops report to the returned pulse
    // until session_ended().
    SessionPulse& session_started(const std::string& root);
    void set_role(const std::string& role);
    // The current session's pulse (valid until the next session starts).
    SessionPulse* pulse();
    void session_ended();
    // {"session": {...} or null, "sessions_served", "rows_served", "uptime_s"}.
    json snapshot() const;

private:
    mutable std::mutex mutex_;
    bool active_ = false;
    std::string root_, role_;
    double since_ = 0.0, started_;
    std::unique_ptr<SessionPulse> pulse_;
    uint64_t sessions_ = 0, rows_before_ = 0;  // rows of the sessions that ended
};

// The counters as JSON ({"answered", "duplicates", "dropped": {reason: n}}),
// and back from a peer's status (fields of another type read as 0).
json discovery_counters_json(const DiscoveryCounters& c);
DiscoveryCounters discovery_counters_from_json(const json& j);

// A worker's status in Prometheus' text format (names tessera_worker_*).
std::string worker_metrics_text(const json& status);

// The root's side: asks the worker at `address` for its status (the key
// handshake first, as any root would). Returns the worker's JSON with
// "link_round_trip_ms" added (the handshake's first round trip).
json query_worker_status(const HostPort& address, const WireKey* key, int timeout_ms);

}  // namespace tessera
