#include "ops/cpu_target.h"

#include "ops/int8_dot_extension.h"
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

// The Highway target an int8 dot-product extension qualifies
// (ops/int8_dot_extension.h), and the name of the pair; nullptr for others.
const char* extended_name(int64_t target) {
    if (target == HWY_AVX2) return "AVX2_VNNI";
    if (target == HWY_NEON) return "NEON_DOTPROD";
    return nullptr;
}

std::string cpu_target_name() {
    const std::vector<int64_t> targets = simd_block_targets();
    if (targets.empty()) return "scalar";
    if (extended_name(targets.front()) != nullptr && int8_dot_extension_enabled()) {
        return extended_name(targets.front());
    }
    return hwy::TargetName(targets.front());
}

std::vector<std::string> cpu_target_names() {
    std::vector<std::string> names;
    for (int64_t t : simd_block_targets()) {
        if (extended_name(t) != nullptr && int8_dot_extension_supported()) names.emplace_back(extended_name(t));
        names.emplace_back(hwy::TargetName(t));
    }
    return names;
}

void limit_cpu_target(const std::string& name) {
    std::string want = lower(name);
    if (want == "avx512") want = "avx3";
    if (want == "avx512-vnni" || want == "avx512_vnni") want = "avx3_dl";
    if (want == "avx2-vnni" || want == "avx-vnni") want = "avx2_vnni";
    if (want == "neon-dotprod" || want == "dotprod") want = "neon_dotprod";
    // Highway's portable fallback is SCALAR under GCC and EMU128 under clang:
    // either name, or "portable", means whichever this build has.
    const bool fallback = want == "portable" || want == "scalar" || want == "emu128";
    for (int64_t t : simd_block_targets()) {
        const bool is_fallback = t == HWY_SCALAR || t == HWY_EMU128;
        // "avx2_vnni" / "neon_dotprod": the target with its extension;
        // "avx2" / "neon": the target without it.
        const bool extended = extended_name(t) != nullptr && int8_dot_extension_supported() &&
                              want == lower(extended_name(t));
        if (!extended && (fallback ? !is_fallback : lower(hwy::TargetName(t)) != want)) continue;
        if (extended_name(t) != nullptr) allow_int8_dot_extension(extended);
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
