// Keeps a loaded SIMD vector in a register for all its uses.
//
// On x86, GCC folds a vector load into each instruction that uses the value
// (as its memory operand), so a weight vector that a kernel's decode uses
// three or four times (masked, shifted, merged with its high bits) is loaded
// three or four times. Zen 4 loads one 512-bit vector per cycle: those
// repeated loads, not the arithmetic, bounded the grouped kernels (Q6_K's
// one-column product over weights in L2: 39 GB/s folded, 52 GB/s pinned).
// An empty asm statement that claims to change the value makes the compiler
// load it once into a register and use that register. It emits nothing and
// changes no result.
#pragma once

namespace tessera {

template <class V>
inline __attribute__((always_inline)) void pin_register(V& v) {
#if defined(__x86_64__) || defined(__i386__)
    __asm__("" : "+v"(v));
#else
    (void)v;  // ARM has no load-and-operate instructions: nothing is folded
#endif
}

// Two values in one statement: the kernel that loads a weight vector and its
// high-bit vector per step pins both at once (measured faster in a token's
// product than two statements, which let the compiler share the high-bit
// vector's load between steps).
template <class V>
inline __attribute__((always_inline)) void pin_registers(V& a, V& b) {
#if defined(__x86_64__) || defined(__i386__)
    __asm__("" : "+v"(a), "+v"(b));
#else
    (void)a;
    (void)b;
#endif
}

}  // namespace tessera
