// AVX-VNNI: the VEX-encoded (256-bit) int8 dot product of Intel's Alder Lake
// and later client CPUs (and the Xeons and AMD Zen 5 cores that also have
// AVX-512). Highway 1.0.3 has no target for it: on a CPU with AVX2 and
// AVX-VNNI but no AVX-512, its best target is AVX2, whose grouped int8
// kernels then use vpdpbusd instead of maddubs (same integers, same bits).
//
// cpu_target.h names that pairing "AVX2_VNNI"; asking for "avx2" turns the
// instruction off, so both kernels can be compared and tested on one CPU.
#pragma once

namespace tessera {

// Whether this CPU executes AVX-VNNI (CPUID leaf 7, subleaf 1, EAX bit 4).
bool avx_vnni_supported();

// Whether the AVX2 target's grouped kernels use it now: supported, and not
// turned off by allow_avx_vnni(false).
bool avx_vnni_enabled();

// Allows (the default) or forbids AVX-VNNI; read on every grouped product,
// so it takes effect at once.
void allow_avx_vnni(bool allowed);

}  // namespace tessera
