// --discover (run, chat, serve, bench, perplexity, plan): the workers are
// found on the local network by keyed discovery (net/discovery.h) instead of
// being named, then surveyed and planned over as --workers with --auto.
#pragma once

#include "cluster/planner/parallel_options.h"

#include <functional>
#include <string>

namespace tessera {

// The options with the discovered workers as --workers and --auto set (or
// the options as given without --discover). Throws an Error that says what
// to check when there is no key, when --discover is combined with a list of
// nodes, or when no worker answers. `log` gets the line naming what was found.
ParallelOptions with_discovered_workers(const ParallelOptions& options,
                                        const std::function<void(const std::string&)>& log);

}  // namespace tessera
