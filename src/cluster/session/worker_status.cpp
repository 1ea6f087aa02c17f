#include "cluster/session/worker_status.h"

#include "cluster/session/messages.h"
#include "cluster/session/session_messages.h"
#include "net/handshake.h"
#include "util/error.h"
#include "util/timer.h"

namespace tessera {

WorkerStatusBoard::WorkerStatusBoard() : started_(unix_seconds()) {}

SessionPulse& WorkerStatusBoard::session_started(const std::string& root) {
    std::lock_guard<std::mutex> lock(mutex_);
    active_ = true;
    root_ = root;
    role_ = "setting up";
    since_ = unix_seconds();
    pulse_ = std::make_unique<SessionPulse>();
    pulse_->root_heard.store(since_);
    return *pulse_;
}

void WorkerStatusBoard::set_role(const std::string& role) {
    std::lock_guard<std::mutex> lock(mutex_);
    role_ = role;
}

SessionPulse* WorkerStatusBoard::pulse() {
    std::lock_guard<std::mutex> lock(mutex_);
    return pulse_.get();
}

void WorkerStatusBoard::session_ended() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!active_) return;
    active_ = false;
    ++sessions_;
    rows_before_ += pulse_->rows.load();
    // The pulse stays: a loop still unwinding may touch it.
}

json WorkerStatusBoard::snapshot() const {
    std::lock_guard<std::mutex> lock(mutex_);
    const double now = unix_seconds();
    json j;
    const uint64_t rows_now = active_ ? pulse_->rows.load() : 0;
    if (active_) {
        j["session"] = {{"root", root_},
                        {"role", role_},
                        {"since_unix_s", since_},
                        {"seconds", now - since_},
                        {"root_silent_s", std::max(0.0, now - pulse_->root_heard.load())},
                        {"rows", rows_now}};
    } else {
        j["session"] = nullptr;
    }
    j["sessions_served"] = sessions_;
    j["rows_served"] = rows_before_ + rows_now;
    j["uptime_s"] = now - started_;
    return j;
}

json discovery_counters_json(const DiscoveryCounters& c) {
    return {{"answered", c.answered},
            {"duplicates", c.duplicates},
            {"dropped",
             {{"oversized", c.oversized},
              {"malformed", c.malformed},
              {"unauthenticated", c.unauthenticated},
              {"stale", c.stale},
              {"replayed", c.replayed},
              {"rate_limited", c.rate_limited}}}};
}

namespace {

double number(const json& j, const char* key) {
    const auto it = j.find(key);
    return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
}

}  // namespace

DiscoveryCounters discovery_counters_from_json(const json& j) {
    DiscoveryCounters c;
    if (!j.is_object()) return c;
    const auto count = [](const json& o, const char* key) {
        const double v = number(o, key);
        return v > 0 && v < 1e18 ? static_cast<uint64_t>(v) : uint64_t{0};
    };
    c.answered = count(j, "answered");
    c.duplicates = count(j, "duplicates");
    if (const auto d = j.find("dropped"); d != j.end() && d->is_object()) {
        c.oversized = count(*d, "oversized");
        c.malformed = count(*d, "malformed");
        c.unauthenticated = count(*d, "unauthenticated");
        c.stale = count(*d, "stale");
        c.replayed = count(*d, "replayed");
        c.rate_limited = count(*d, "rate_limited");
    }
    return c;
}

namespace {

// A label value as Prometheus' text format quotes it.
std::string label(const json& v) {
    std::string out;
    for (char c : v.is_string() ? v.get<std::string>() : v.dump()) {
        if (c == '\\' || c == '"') out += '\\';
        if (c == '\n') {
            out += "\\n";
            continue;
        }
        out += c;
    }
    return out;
}

}  // namespace

std::string worker_metrics_text(const json& s) {
    std::string out;
    auto metric = [&](const char* name, const char* type, const char* help, const std::string& labels, double value) {
        out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{}{} {}\n", name, help, name, type, name,
                           labels.empty() ? "" : "{" + labels + "}", value);
    };
    metric("tessera_worker_info", "gauge", "The worker's release, protocol, CPU target and device (always 1).",
           fmt::format("version=\"{}\",protocol=\"{}\",cpu_target=\"{}\",device=\"{}\"", label(s.value("version", json(""))),
                       label(s.value("protocol", json(0))), label(s.value("cpu_target", json(""))),
                       label(s.value("device", json("")))),
           1);
    metric("tessera_worker_free_memory_bytes", "gauge", "Memory available to a share now.", "", number(s, "free_memory"));
    metric("tessera_worker_uptime_seconds", "counter", "Seconds since the worker started.", "", number(s, "uptime_s"));
    metric("tessera_worker_sessions_served_total", "counter", "Sessions that ended since the worker started.", "",
           number(s, "sessions_served"));
    metric("tessera_worker_rows_served_total", "counter", "Rows (tokens of prompts and answers) computed.", "",
           number(s, "rows_served"));
    const json session = s.value("session", json(nullptr));
    metric("tessera_worker_session_active", "gauge", "1 while a root's session is served.", "",
           session.is_object() ? 1 : 0);
    if (session.is_object()) {
        metric("tessera_worker_session_seconds", "gauge", "How long the current session has run.", "",
               number(session, "seconds"));
        metric("tessera_worker_root_silent_seconds", "gauge", "Seconds since the current root's last frame.", "",
               number(session, "root_silent_s"));
    }
    uint64_t cached = 0, cached_bytes = 0;
    const json models = s.value("models", json::array());
    for (const json& m : models) {
        if (m.value("kind", "") == "cached slice") {
            ++cached;
            cached_bytes += m.value("bytes", uint64_t{0});
        }
    }
    metric("tessera_worker_cached_slices", "gauge", "Slices kept in the worker's cache.", "", static_cast<double>(cached));
    metric("tessera_worker_cached_slice_bytes", "gauge", "Bytes of the cached slices.", "",
           static_cast<double>(cached_bytes));
    if (const auto d = s.find("discovery"); d != s.end() && d->is_object()) {
        metric("tessera_worker_discovery_answered_total", "counter", "Discovery probes answered.", "",
               number(*d, "answered"));
        out += "# HELP tessera_worker_discovery_dropped_total Discovery packets dropped, by reason.\n"
               "# TYPE tessera_worker_discovery_dropped_total counter\n";
        const json dropped = d->value("dropped", json::object());
        for (const auto& [reason, n] : dropped.items()) {
            out += fmt::format("tessera_worker_discovery_dropped_total{{reason=\"{}\"}} {}\n", label(json(reason)),
                               n.is_number() ? n.get<double>() : 0.0);
        }
    }
    return out;
}

json query_worker_status(const HostPort& address, const WireKey* key, int timeout_ms) {
    FrameChannel channel(TcpStream::connect(address, timeout_ms), ChannelLimits{1u << 20, timeout_ms, 0});
    const double round_trip_ms = 1e3 * authenticate_as_client(channel, key, timeout_ms);
    send_json(channel, SessionMessage::kStatus, protocol_fields());
    json status = recv_json(channel, SessionMessage::kStatusReply, address.str(), timeout_ms);
    if (!status.is_object()) throw make_error("{}: its status is not an object", address.str());
    status["link_round_trip_ms"] = round_trip_ms;
    return status;
}

}  // namespace tessera
