#include "ops/int8_dot_extension.h"

#include <atomic>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#elif defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

namespace tessera {

namespace {
std::atomic<bool> g_allowed{true};
}  // namespace

bool int8_dot_extension_supported() {
    static const bool supported = [] {
#if defined(__x86_64__) || defined(__i386__)
        unsigned a = 0, b = 0, c = 0, d = 0;
        // The AVX2 target (which alone uses it) already implies the OS saves
        // the YMM state, so the CPUID bit is the whole question.
        return __get_cpuid_count(7, 1, &a, &b, &c, &d) != 0 && ((a >> 4) & 1u) != 0;
#elif defined(__aarch64__) && defined(__linux__)
        return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
#else
        return false;
#endif
    }();
    return supported;
}

bool int8_dot_extension_enabled() {
    return g_allowed.load(std::memory_order_relaxed) && int8_dot_extension_supported();
}

bool avx512_bf16_supported() {
    static const bool supported = [] {
#if defined(__x86_64__) || defined(__i386__)
        // Asked only by the AVX3_DL target, which implies the OS saves the
        // ZMM state.
        unsigned a = 0, b = 0, c = 0, d = 0;
        return __get_cpuid_count(7, 1, &a, &b, &c, &d) != 0 && ((a >> 5) & 1u) != 0;
#else
        return false;
#endif
    }();
    return supported;
}

void allow_int8_dot_extension(bool allowed) { g_allowed.store(allowed, std::memory_order_relaxed); }

}  // namespace tessera
