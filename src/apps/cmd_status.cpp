// tessera status: what each worker holds and does, asked over the sealed wire
// (cluster/session/worker_status.h): its release, CPU and device, memory, the
// models it holds, the session it serves and since when, what it has served,
// its discovery counters, and its link to this machine.
#include "apps/commands.h"
#include "cluster/planner/worker_discovery.h"
#include "cluster/session/worker_status.h"
#include "net/discovery.h"
#include "net/wire_key.h"
#include "util/error.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <memory>

namespace tessera {

namespace {

struct StatusOptions {
    std::string workers;
    bool discover = false;
    int discover_ms = 2000;
    int discovery_port = 9999;
    std::string key_file;
    bool json_output = false;
    int timeout_ms = 5000;
};

std::string mib(double bytes) { return fmt::format("{:.1f} MiB", bytes / 1048576.0); }

std::string duration(double s) {
    if (s < 120) return fmt::format("{:.1f} s", s);
    if (s < 7200) return fmt::format("{:.1f} min", s / 60);
    return fmt::format("{:.1f} h", s / 3600);
}

// A worker's status as lines. The JSON is a peer's: every field read by type.
void print_status(const std::string& address, const nlohmann::json& s) {
    auto str = [&](const nlohmann::json& j, const char* k) {
        const auto it = j.find(k);
        return it != j.end() && it->is_string() ? it->get<std::string>() : std::string("?");
    };
    auto num = [&](const nlohmann::json& j, const char* k) {
        const auto it = j.find(k);
        return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
    };
    const std::string device = str(s, "device");
    std::printf("%s  tessera %s (protocol %.0f), %s%s%s, %.0f threads, %s free, link round trip %.2f ms\n",
                address.c_str(), str(s, "version").c_str(), num(s, "protocol"), str(s, "cpu_target").c_str(),
                device.empty() || device == "?" ? "" : ", on ", device == "?" ? "" : device.c_str(), num(s, "threads"),
                mib(num(s, "free_memory")).c_str(), num(s, "link_round_trip_ms"));
    if (const auto m = s.find("models"); m != s.end() && m->is_array()) {
        if (m->empty()) std::printf("  holds no model (roots send it their slice)\n");
        for (const nlohmann::json& e : *m) {
            if (!e.is_object()) continue;
            std::printf("  %s %s (fingerprint %s, %s)\n", str(e, "kind").c_str(), str(e, "name").c_str(),
                        str(e, "fingerprint").c_str(), mib(num(e, "bytes")).c_str());
        }
    }
    if (const auto session = s.find("session"); session != s.end() && session->is_object()) {
        std::printf("  serving root %s: %s, for %s, root last heard %.1f s ago, %.0f rows\n",
                    str(*session, "root").c_str(), str(*session, "role").c_str(),
                    duration(num(*session, "seconds")).c_str(), num(*session, "root_silent_s"), num(*session, "rows"));
    } else {
        std::printf("  idle\n");
    }
    std::printf("  served %.0f sessions, %.0f rows since it started %s ago\n", num(s, "sessions_served"),
                num(s, "rows_served"), duration(num(s, "uptime_s")).c_str());
    if (const auto d = s.find("discovery"); d != s.end() && d->is_object()) {
        std::printf("  discovery: %s\n", describe_counters(discovery_counters_from_json(*d)).c_str());
    }
}

int status_main(const StatusOptions& o) {
    ParallelOptions p;
    p.workers = o.workers;
    p.discover = o.discover;
    p.discover_ms = o.discover_ms;
    p.discovery_port = o.discovery_port;
    p.key_file = o.key_file;
    if (o.discover) {
        p = with_discovered_workers(p, [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); });
    }
    const std::vector<HostPort> workers = parse_host_port_list(p.workers);
    if (workers.empty()) throw make_error("name the workers (--workers HOST:PORT,...) or find them (--discover)");
    const std::shared_ptr<const WireKey> key = key_from_flag_or_env(o.key_file);
    nlohmann::json all = nlohmann::json::array();
    int failed = 0;
    for (const HostPort& w : workers) {
        nlohmann::json entry;
        try {
            entry = query_worker_status(w, key.get(), o.timeout_ms);
        } catch (const Error& e) {
            entry = {{"error", e.what()}};
            ++failed;
        }
        entry["address"] = w.str();
        if (o.json_output) {
            all.push_back(entry);
        } else if (entry.contains("error")) {
            std::printf("%s  unreachable: %s\n", w.str().c_str(), entry["error"].get<std::string>().c_str());
        } else {
            print_status(w.str(), entry);
        }
    }
    if (o.json_output) std::printf("%s\n", all.dump(2).c_str());
    return failed == 0 ? 0 : 1;
}

}  // namespace

void add_status_command(CLI::App& app) {
    auto o = std::make_shared<StatusOptions>();
    CLI::App* cmd = app.add_subcommand("status", "What each worker holds and does: release, CPU and device, memory, "
                                                 "models, its session, what it served, its link to this machine");
    cmd->add_option("--workers", o->workers, "The workers HOST:PORT,HOST:PORT,...");
    cmd->add_flag("--discover", o->discover, "Find the workers holding this cluster's key on the local network");
    cmd->add_option("--discover-ms", o->discover_ms, "How long --discover waits for answers, in ms")
        ->capture_default_str()
        ->check(CLI::Range(100, 60000));
    cmd->add_option("--discovery-port", o->discovery_port, "The UDP port of --discover")
        ->capture_default_str()
        ->check(CLI::Range(1, 65535));
    cmd->add_option("--key", o->key_file, "The cluster's key file (else $TESSERA_KEY_FILE)");
    cmd->add_flag("--json", o->json_output, "Print one JSON object per worker, in an array");
    cmd->add_option("--timeout-ms", o->timeout_ms, "Network timeout per worker, in ms")
        ->capture_default_str()
        ->check(CLI::Range(100, 600000));
    cmd->callback([o] {
        const int rc = status_main(*o);
        if (rc != 0) throw CLI::RuntimeError(rc);
    });
}

}  // namespace tessera
