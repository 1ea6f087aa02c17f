// Keeps a loaded SIMD vector in a register for all its uses.
//
// On x86, GCC folds a vector load into each instruction that uses the value
// (as its memory operand), so a weight vector that a kernel's decode uses
// three or four times (masked, shifted, merged with its high bits) is loaded
// three or four times. Zen 4 loads one 512-bit vector per cycle: those
// repeated loads, not the arithmetic, bounded the grouped kernels (Q6_K's
// one-column product over weights in L2: 39 GB/s folded, 52 GB/s pinned;
// `kernel_bench --gen`). An empty asm statement that claims to change the
// value makes the compiler load it once into a register and use that
// register. It emits nothing and changes no result.
//
// Macros, not functions: the statement must sit in the kernel's own target
// region (a function compiled without AVX-512 cannot take a 512-bit operand
// in a register; clang refuses it). TESSERA_PIN_REGISTERS pins two values in
// one statement: the AVX-512 Q6_K kernel, which loads a weight vector and
// its high-bit vector per step, measured faster in a token's product that
// way (Q6_K, 1 thread: 28.4-30.5 against 26.5-27.1 tok/s) than with two
// statements, which let the compiler share the high-bit vector's load
// between steps; the AVX2 Q5_K/Q6_K kernels use it the same way.
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#define TESSERA_PIN_REGISTER(v) __asm__("" : "+v"(v))
#define TESSERA_PIN_REGISTERS(a, b) __asm__("" : "+v"(a), "+v"(b))
#else
// ARM has no load-and-operate instructions: nothing is folded.
#define TESSERA_PIN_REGISTER(v) ((void)0)
#define TESSERA_PIN_REGISTERS(a, b) ((void)0)
#endif
