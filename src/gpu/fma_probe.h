// Whether a Vulkan device's own fma rounds once, as std::fma does: GLSL
// leaves it to the implementation (lavapipe multiplies and adds), so the
// kernels build a once-rounded fma from doubles (shaders/exact_fma.glsl)
// unless the device gives std::fma's bits on every probe case: products whose
// rounding an unfused fma would lose (fma(a, b, -a*b) is the exact error),
// cancellations, subnormal results, ties, and random triples over the whole
// range. TESSERA_VULKAN_FMA=emulate or =native decides instead (tests, a
// device known to be right).
#pragma once

namespace tessera {

class VulkanContext;

bool probe_native_fma(VulkanContext& context);

}  // namespace tessera
