// Compiles a Highway AVX3_DL section's functions for AVX-512 VNNI as well.
// Highway 1.0.3 selects its AVX3_DL target by the AVX512-VNNI CPUID bit but
// compiles it for AVX-VNNI (the VEX form, absent on Ice Lake servers); the
// int8 kernels ask for the EVEX form the selection guarantees.
//
//   TESSERA_VNNI_PUSH          (before HWY_BEFORE_NAMESPACE)
//   HWY_BEFORE_NAMESPACE();
//   TESSERA_VNNI_BEGIN
//   ... kernels ...
//   HWY_AFTER_NAMESPACE();
//   TESSERA_VNNI_POP           (after HWY_AFTER_NAMESPACE)
//
// GCC takes a target pragma inside Highway's own push/pop of options. Clang
// ignores that pragma, and of two pushed target attributes it applies the
// outermost: so the full feature list plus avx512vnni is pushed first.
#pragma once

#include <hwy/base.h>

#if defined(__clang__)
#define TESSERA_VNNI_PUSH HWY_PUSH_ATTRIBUTES(HWY_TARGET_STR ",avx512vnni")
#define TESSERA_VNNI_POP HWY_POP_ATTRIBUTES
#define TESSERA_VNNI_BEGIN
#else
#define TESSERA_VNNI_PUSH
#define TESSERA_VNNI_POP
#define TESSERA_VNNI_BEGIN _Pragma("GCC target(\"avx512vnni\")")
#endif

// The same for AVX-VNNI (VEX, 256-bit) in a Highway AVX2 section
// (ops/int8_dot_extension.h): the functions between TESSERA_AVXVNNI_PUSH/BEGIN and
// TESSERA_AVXVNNI_POP are compiled for AVX2 plus avxvnni; callers check
// int8_dot_extension_enabled() first.
#if defined(__clang__)
#define TESSERA_AVXVNNI_PUSH HWY_PUSH_ATTRIBUTES(HWY_TARGET_STR ",avxvnni")
#define TESSERA_AVXVNNI_POP HWY_POP_ATTRIBUTES
#define TESSERA_AVXVNNI_BEGIN
#else
#define TESSERA_AVXVNNI_PUSH
#define TESSERA_AVXVNNI_POP
#define TESSERA_AVXVNNI_BEGIN _Pragma("GCC target(\"avxvnni\")")
#endif

// The same for ARM's dot product (sdot) in a Highway NEON section on 64-bit
// ARM (ops/int8_dot_extension.h): the functions between TESSERA_DOTPROD_PUSH
// (after HWY_BEFORE_NAMESPACE) and TESSERA_DOTPROD_POP (before
// HWY_AFTER_NAMESPACE) may use it; callers check int8_dot_extension_enabled()
// first.
#if defined(__clang__)
#define TESSERA_DOTPROD_PUSH _Pragma("clang attribute push(__attribute__((target(\"dotprod\"))), apply_to = function)")
#define TESSERA_DOTPROD_POP _Pragma("clang attribute pop")
#else
#define TESSERA_DOTPROD_PUSH _Pragma("GCC push_options") _Pragma("GCC target(\"arch=armv8.2-a+dotprod\")")
#define TESSERA_DOTPROD_POP _Pragma("GCC pop_options")
#endif

// The same for AVX-512 BF16 (vdpbf16ps) in a Highway AVX3_DL section: the
// functions between TESSERA_AVX512BF16_PUSH/BEGIN and TESSERA_AVX512BF16_POP
// are compiled for it too; callers check avx512_bf16_supported() first
// (ops/int8_dot_extension.h).
#if defined(__clang__)
#define TESSERA_AVX512BF16_PUSH HWY_PUSH_ATTRIBUTES(HWY_TARGET_STR ",avx512bf16")
#define TESSERA_AVX512BF16_POP HWY_POP_ATTRIBUTES
#define TESSERA_AVX512BF16_BEGIN
#else
#define TESSERA_AVX512BF16_PUSH
#define TESSERA_AVX512BF16_POP
#define TESSERA_AVX512BF16_BEGIN _Pragma("GCC target(\"avx512bf16\")")
#endif
