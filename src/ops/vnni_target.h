// Compiles the functions between TESSERA_VNNI_BEGIN and TESSERA_VNNI_END for
// AVX-512 VNNI as well as their Highway target. Highway 1.0.3 selects its
// AVX3_DL target by the AVX512-VNNI CPUID bit but compiles it for AVX-VNNI
// (the VEX form, absent on Ice Lake servers); the int8 kernels ask for the
// EVEX form the selection guarantees. GCC takes a target pragma (scoped by
// Highway's own push/pop of options); clang ignores that pragma and needs an
// attribute pushed onto every function instead.
#pragma once

#if defined(__clang__)
#define TESSERA_VNNI_BEGIN _Pragma("clang attribute push(__attribute__((target(\"avx512vnni\"))), apply_to = function)")
#define TESSERA_VNNI_END _Pragma("clang attribute pop")
#else
#define TESSERA_VNNI_BEGIN _Pragma("GCC target(\"avx512vnni\")")
#define TESSERA_VNNI_END
#endif
