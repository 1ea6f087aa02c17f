#include "cluster/session/adopted_workers.h"

#include "util/error.h"

namespace tessera {

void AdoptedWorkers::check() const {
    const size_t n = channels.size();
    if (hellos.size() != n || addresses.size() != n || round_trip_ms.size() != n || handoff_from.size() != n) {
        throw make_error("internal: {} adopted workers with {} hellos, {} addresses", n, hellos.size(), addresses.size());
    }
}

}  // namespace tessera
