#include "ops/group_prefetch.h"

#include "util/error.h"

#include <cstdlib>
#include <cstring>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace tessera {

namespace detail {
std::atomic<GroupPrefetch> g_group_prefetch{default_group_prefetch()};
}  // namespace detail

namespace {
// The CPUID vendor string ("GenuineIntel", "AuthenticAMD"; empty off x86).
std::string cpu_vendor() {
#if defined(__x86_64__) || defined(__i386__)
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid(0, &a, &b, &c, &d) == 0) return "";
    char vendor[13] = {};
    std::memcpy(vendor, &b, 4);
    std::memcpy(vendor + 4, &d, 4);
    std::memcpy(vendor + 8, &c, 4);
    return vendor;
#else
    return "";
#endif
}

// The CPU family as /proc/cpuinfo counts it: the base family, plus the
// extended family where the base is 0xF (AMD's Zen 5: 0xF + 0xB = 0x1A).
unsigned cpu_family() {
#if defined(__x86_64__) || defined(__i386__)
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid(1, &a, &b, &c, &d) == 0) return 0;
    const unsigned base = (a >> 8) & 0xF;
    return base == 0xF ? base + ((a >> 20) & 0xFF) : base;
#else
    return 0;
#endif
}
}  // namespace

GroupPrefetch default_group_prefetch() {
    static const GroupPrefetch policy = [] {
        const std::string vendor = cpu_vendor();
        if (vendor == "GenuineIntel") return GroupPrefetch::kL2AndL1;
        if (vendor == "AuthenticAMD" && cpu_family() == 0x1A) return GroupPrefetch::kByType;
        if (vendor == "AuthenticAMD" && cpu_family() == 0x19) return GroupPrefetch::kNoneByType;
        return GroupPrefetch::kL2;
    }();
    return policy;
}

GroupPrefetch group_prefetch() { return detail::g_group_prefetch.load(std::memory_order_relaxed); }

void set_group_prefetch(GroupPrefetch policy) { detail::g_group_prefetch.store(policy, std::memory_order_relaxed); }

GroupPrefetch group_prefetch_from_name(const std::string& name) {
    if (name == "auto") return default_group_prefetch();
    if (name == "l2") return GroupPrefetch::kL2;
    if (name == "l2+l1") return GroupPrefetch::kL2AndL1;
    if (name == "by-type") return GroupPrefetch::kByType;
    if (name == "none") return GroupPrefetch::kNone;
    if (name == "none-by-type") return GroupPrefetch::kNoneByType;
    throw make_error("unknown prefetch policy '{}' (auto, l2, l2+l1, by-type, none or none-by-type)", name);
}

const char* group_prefetch_name(GroupPrefetch policy) {
    switch (policy) {
        case GroupPrefetch::kL2AndL1: return "l2+l1";
        case GroupPrefetch::kByType: return "by-type";
        case GroupPrefetch::kNone: return "none";
        case GroupPrefetch::kNoneByType: return "none-by-type";
        case GroupPrefetch::kL2: break;
    }
    return "l2";
}

void set_group_prefetch_from_environment() {
    const char* name = std::getenv("TESSERA_PREFETCH");
    if (name != nullptr && name[0] != '\0') set_group_prefetch(group_prefetch_from_name(name));
}

}  // namespace tessera
