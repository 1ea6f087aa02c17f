// Whether a Vulkan device's own fma rounds once, as std::fma does: GLSL
// leaves it to the implementation (lavapipe multiplies and adds), so the
// kernels build a once-rounded fma from doubles (shaders/exact_fma.glsl)
// unless the device gives std::fma's bits on every probe case: products whose
// rounding an unfused fma would lose (fma(a, b, -a*b) is the exact error),
// cancellations, subnormal results, ties, and random triples over the whole
// range (the subnormal cases only where the device keeps subnormals:
// elsewhere neither fma can). TESSERA_VULKAN_FMA=emulate or =native decides
// instead (tests, a device known to be right).
#pragma once

#include <vector>

namespace tessera {

class VulkanContext;

bool probe_native_fma(VulkanContext& context);

// The probe's triples (a, b, c), and its verdict on a device's results for
// them: each fma(a, b, c) with std::fma's bits, the cases with a subnormal
// input or result skipped unless the device keeps subnormals.
std::vector<float> fma_probe_cases();
bool fma_results_round_once(const std::vector<float>& cases, const std::vector<float>& got, bool keeps_subnormals);

}  // namespace tessera
