// Which SIMD target the kernels run on, and a way to ask for a lesser one.
//
// Highway picks the best target the CPU supports when a kernel is first
// called. A user may ask for a lesser one (TESSERA_CPU_TARGET=avx2, or
// --cpu-target): to compare kernels on one machine, or to check that nodes
// of different CPU kinds compute the same bits, as the exact distributed
// modes promise.
#pragma once

#include <string>
#include <vector>

namespace tessera {

// The name of the target the block kernels (ops/dot_kernels.h) dispatch to
// now: "AVX3_DL" (AVX-512 with VNNI), "AVX3" (AVX-512), "AVX2_VNNI" (AVX2
// with AVX-VNNI, ops/int8_dot_extension.h), "AVX2", "SSE4", "SSSE3",
// "NEON_DOTPROD" (NEON with the dot product), "NEON", "SVE", "EMU128", ...
std::string cpu_target_name();

// The names limit_cpu_target takes on this CPU, best first.
std::vector<std::string> cpu_target_names();

// Makes `name` (case-insensitive, as cpu_target_names gives it; "avx512" and
// "avx512-vnni" too; "avx2" / "neon" without the int8 dot extension, "avx2_vnni" /
// "neon_dotprod" with it; "portable", "scalar" or "emu128" for the portable
// fallback, whichever the build has) the best target every kernel may use
// from now on. Call it before any kernel runs. Throws Error for a name this
// CPU cannot run.
void limit_cpu_target(const std::string& name);

// limit_cpu_target(TESSERA_CPU_TARGET) where that variable is set.
void limit_cpu_target_from_environment();

}  // namespace tessera
