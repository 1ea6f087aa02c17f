// Plans a person writes: --stages strings and cluster files (TOML).
#include "cluster/planner/cluster_spec.h"
#include "util/error.h"

#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace tessera;
    const std::string text(reinterpret_cast<const char*>(data), size);
    try {
        (void)parse_stages_option(text);
    } catch (const Error&) {
    }
    try {
        (void)parse_cluster_toml(text, "fuzz.toml");
    } catch (const Error&) {
    }
    return 0;
}
