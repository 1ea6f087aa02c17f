#include "cluster/planner/worker_discovery.h"

#include "net/discovery.h"
#include "net/wire_key.h"
#include "util/error.h"

namespace tessera {

ParallelOptions with_discovered_workers(const ParallelOptions& options,
                                        const std::function<void(const std::string&)>& log) {
    if (!options.discover) return options;
    if (!options.workers.empty() || options.local > 1 || options.pipeline()) {
        throw make_error("--discover finds the workers itself: leave out --workers, --local, --stages and --cluster");
    }
    const std::shared_ptr<const WireKey> key = key_from_flag_or_env(options.key_file);
    if (!key) {
        throw make_error("--discover needs the cluster's key (--key FILE or $TESSERA_KEY_FILE): only workers holding "
                         "it answer, and only to a root that holds it");
    }
    DiscoveryCounters counters;
    const std::vector<DiscoveredNode> found =
        discover_nodes(*key, static_cast<uint16_t>(options.discovery_port), options.discover_ms, &counters);
    if (found.empty()) {
        throw make_error("no worker holding this cluster's key answered within {} ms on UDP port {} (IPv4 broadcast "
                         "and multicast, IPv6 link-local multicast{}): start them with `tessera worker --advertise "
                         "--key FILE` and the same key file, on this network segment, or name them with --workers",
                         options.discover_ms, options.discovery_port,
                         counters.dropped() != 0 ? fmt::format("; {} answers of other keys or searches ignored",
                                                               counters.dropped())
                                                 : std::string());
    }
    ParallelOptions out = options;
    out.discover = false;
    out.auto_plan = true;
    std::vector<HostPort> addresses;
    std::string names;
    for (const DiscoveredNode& n : found) {
        addresses.push_back(n.address);
        names += fmt::format("{}{} ({}, {:.1f} ms)", names.empty() ? "" : ", ", n.address.str(),
                             n.name.empty() ? "?" : n.name, n.reply_ms);
    }
    out.workers = format_host_port_list(addresses);
    if (log) {
        log(fmt::format("discovered {} worker{} holding this cluster's key: {}", found.size(),
                        found.size() == 1 ? "" : "s", names));
    }
    return out;
}

}  // namespace tessera
