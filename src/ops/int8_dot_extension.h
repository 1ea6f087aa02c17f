// The int8 dot-product instructions that Highway 1.0.3 has no target for:
// - x86 AVX-VNNI: the VEX-encoded (256-bit) vpdpbusd of Intel's Alder Lake and
//   later client CPUs (and the Xeons and AMD Zen 5 cores that also have
//   AVX-512). On a CPU with AVX2 and AVX-VNNI but no AVX-512, Highway's best
//   target is AVX2, whose grouped kernels then use vpdpbusd instead of maddubs.
// - ARM's dot-product extension (sdot, vdotq_s32; Armv8.2-A, e.g. the
//   Cortex-A76 of a Raspberry Pi 5): Highway's NEON target then uses it in
//   every grouped kernel (*_groups_neon_dotprod-inl.h) instead of widening
//   multiplies.
// Either forms the same integers as the kernels without it: the same bits.
//
// cpu_target.h names the pairings "AVX2_VNNI" and "NEON_DOTPROD"; asking for
// "avx2" or "neon" turns the instruction off, so both kernels can be compared
// and tested on one CPU.
#pragma once

namespace tessera {

// Whether this CPU executes the extension of its architecture (x86: CPUID
// leaf 7, subleaf 1, EAX bit 4; ARM64: HWCAP_ASIMDDP; otherwise false).
bool int8_dot_extension_supported();

// Whether the AVX2 / NEON grouped kernels use it now: supported, and not
// turned off by allow_int8_dot_extension(false).
bool int8_dot_extension_enabled();

// Allows (the default) or forbids it; read on every grouped product, so it
// takes effect at once.
void allow_int8_dot_extension(bool allowed);

// Whether this x86 CPU executes AVX-512's BF16 instructions (vdpbf16ps;
// CPUID leaf 7, subleaf 1, EAX bit 5: Cooper Lake, Sapphire Rapids, Zen 4 and
// later). Highway's AVX3_DL target then takes BF16 products with it
// (ops/bf16_pairs-inl.h); elsewhere fused multiply-adds give its bits.
bool avx512_bf16_supported();

}  // namespace tessera
