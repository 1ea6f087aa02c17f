#include "ops/group_prefetch.h"

#include "util/error.h"

#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace tessera {

namespace detail {
std::atomic<bool> g_near_prefetch{default_group_prefetch() == GroupPrefetch::kL2AndL1};
}  // namespace detail

namespace {
bool cpu_is_intel() {
#if defined(__x86_64__) || defined(__i386__)
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid(0, &a, &b, &c, &d) == 0) return false;
    char vendor[13] = {};
    std::memcpy(vendor, &b, 4);
    std::memcpy(vendor + 4, &d, 4);
    std::memcpy(vendor + 8, &c, 4);
    return std::strcmp(vendor, "GenuineIntel") == 0;
#else
    return false;
#endif
}
}  // namespace

GroupPrefetch default_group_prefetch() {
    static const GroupPrefetch policy = cpu_is_intel() ? GroupPrefetch::kL2AndL1 : GroupPrefetch::kL2;
    return policy;
}

GroupPrefetch group_prefetch() {
    return near_prefetch() ? GroupPrefetch::kL2AndL1 : GroupPrefetch::kL2;
}

void set_group_prefetch(GroupPrefetch policy) {
    detail::g_near_prefetch.store(policy == GroupPrefetch::kL2AndL1, std::memory_order_relaxed);
}

GroupPrefetch group_prefetch_from_name(const std::string& name) {
    if (name == "auto") return default_group_prefetch();
    if (name == "l2") return GroupPrefetch::kL2;
    if (name == "l2+l1") return GroupPrefetch::kL2AndL1;
    throw make_error("unknown prefetch policy '{}' (auto, l2 or l2+l1)", name);
}

const char* group_prefetch_name(GroupPrefetch policy) {
    return policy == GroupPrefetch::kL2AndL1 ? "l2+l1" : "l2";
}

void set_group_prefetch_from_environment() {
    const char* name = std::getenv("TESSERA_PREFETCH");
    if (name != nullptr && name[0] != '\0') set_group_prefetch(group_prefetch_from_name(name));
}

}  // namespace tessera
