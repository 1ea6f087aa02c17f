#include "ops/cpu_target.h"

#include "ops/avx_vnni.h"
#include "ops/dot_kernels.h"
#include "util/error.h"

#include <hwy/targets.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>

namespace tessera {

namespace {

std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
    return s;
}

}  // namespace

// AVX-VNNI is not a Highway target; it qualifies AVX2 (ops/avx_vnni.h).
constexpr const char* kAvx2Vnni = "AVX2_VNNI";

std::string cpu_target_name() {
    const std::vector<int64_t> targets = simd_block_targets();
    if (targets.empty()) return "scalar";
    if (targets.front() == HWY_AVX2 && avx_vnni_enabled()) return kAvx2Vnni;
    return hwy::TargetName(targets.front());
}

std::vector<std::string> cpu_target_names() {
    std::vector<std::string> names;
    for (int64_t t : simd_block_targets()) {
        if (t == HWY_AVX2 && avx_vnni_supported()) names.emplace_back(kAvx2Vnni);
        names.emplace_back(hwy::TargetName(t));
    }
    return names;
}

void limit_cpu_target(const std::string& name) {
    std::string want = lower(name);
    if (want == "avx512") want = "avx3";
    if (want == "avx512-vnni" || want == "avx512_vnni") want = "avx3_dl";
    // Highway's portable fallback is SCALAR under GCC and EMU128 under clang:
    // either name, or "portable", means whichever this build has.
    const bool fallback = want == "portable" || want == "scalar" || want == "emu128";
    // "avx2_vnni": AVX2 with AVX-VNNI; "avx2": AVX2 with maddubs only.
    const bool avx2_vnni = want == lower(kAvx2Vnni) || want == "avx2-vnni" || want == "avx-vnni";
    if (avx2_vnni) want = avx_vnni_supported() ? "avx2" : "(none)";
    for (int64_t t : simd_block_targets()) {
        const bool is_fallback = t == HWY_SCALAR || t == HWY_EMU128;
        if (fallback ? !is_fallback : lower(hwy::TargetName(t)) != want) continue;
        if (t == HWY_AVX2) allow_avx_vnni(avx2_vnni);
        // Highway's bits: a better target has a lower bit. Keep this one and
        // every lesser one the CPU supports.
        hwy::SetSupportedTargetsForTest(hwy::SupportedTargets() & ~(t - 1));
        return;
    }
    std::string known;
    for (const std::string& n : cpu_target_names()) {
        if (!known.empty()) known += ", ";
        known += lower(n);
    }
    throw make_error("unknown or unsupported CPU target '{}' (this CPU runs: {})", name, known);
}

void limit_cpu_target_from_environment() {
    if (const char* name = std::getenv("TESSERA_CPU_TARGET"); name != nullptr && *name != '\0') {
        limit_cpu_target(name);
    }
}

}  // namespace tessera
