// How the grouped kernels (ops/row_groups.h) ask for the weights they stream
// before they load them, and the policy that chooses how.
//
// GroupPrefetch::kL2: a kernel asks for the lines kGroupPrefetchBytes ahead of
// the block it starts on into L2. A hardware prefetcher stops at every 4 KiB
// boundary (huge pages or not) and restarts cold after it, so a stream left to
// it waits for memory again and again; a kernel that asks for its bytes two
// pages ahead keeps them in flight. Q4_K streamed ~1.2x faster with it on the
// Zen 4 the kernels were first tuned on (8 KiB beat 1, 2, 4 and 16 KiB), Q4_0
// and Q8_0 the same with or without it. (Those builds may not have emitted
// every prefetch they asked for: see prefetch_lines.)
//
// GroupPrefetch::kL2AndL1: the lines kL1PolicyFarBytes ahead into L2 and
// kL1PolicyNearBytes ahead into L1. On an Intel Xeon (Sapphire Rapids class,
// 2 vCPUs), with the far prefetch alone the loads still waited on L2: a
// grouped matrix-vector product streamed at 0.83-0.89 of a read loop (Q4_0,
// Q4_K; benchmarks/stream_bench) and generation reached 0.76-0.80 of the
// bandwidth ceiling at 2 threads. With the near prefetch as well, the product
// streams at 0.92-0.99 of the read loop (12 + 3 KiB beat 8 + 1, 2, 3 and
// 4 KiB, 6 + 1.5 and 16 + 4 KiB). A line asked for 3 KiB ahead is mostly in L2
// by then, so the L1 miss buffer it holds is freed within an L2 latency. On
// Zen 4, where the kernels were tuned, the far prefetch alone measured best
// (into L1 instead of L2 was 2-8% slower).
//
// GroupPrefetch::kNone: no software prefetch; the hardware prefetchers alone.
// On a 2-vCPU AMD EPYC Zen 4 (family 19h), generation of the 1.1B shape (one
// binary, `tessera bench -n 64 -r 3`, policies alternating, medians):
//   1 thread:  Q8_0 17.9-18.1 tok/s with l2 -> 28.1-28.5 without, Q4_0
//              36.6-38.0 -> 51.3-52.1, Q4_K 37.1-37.3 -> 48.3, Q6_K 27.8-28.8
//              -> 24.7, F16 11.2-11.6 -> 10.9-11.0;
//   2 threads: Q4_K 51.3-54.1 -> 57.9-58.4, Q8_0 27.5-29.5 -> 30.4-31.3, Q6_K
//              37.9-38.6 -> 38.0-44.9.
// The read loop too streamed ~1.5x faster without it (20 -> 31 GB/s at 1
// thread).
//
// GroupPrefetch::kNoneByType: kNone, but kL2 for the types whose kernels run
// below the memory's speed without it (runs_below_memory_speed). The same
// host, every type (`tessera bench -n 48 -r 3`, none / l2 alternating, two
// rounds, tok/s at 1 thread): Q8_0, Q4_0, Q4_K (above), Q5_K 38.9 / 33.6,
// IQ4_XS 55.9 / 43.4, IQ4_NL 53.5 / 40.1, MXFP4 55.0 / 49.3 stream faster
// without; Q6_K 26.4 / 29.4, Q5_0 34.3 / 35.7, Q5_1 29.9 / 30.8, Q2_K 80.7 /
// 82.4, Q3_K 57.1 / 56.2, F16 11.0 / 11.5 and BF16 11.9 / 12.8, the types
// that stay at 0.6-0.77 of the read loop without prefetch, run as fast or
// faster with the far prefetch (at 2 threads, noisier: Q6_K 39.0 / 46.1,
// Q5_0 52 / 66, Q2_K 115 / 129). So the default on family 19h is kNoneByType.
// Then the AVX-512 kernels stopped reloading each weight vector for every
// use (ops/register_pin.h) and Q2_K/Q3_K's decode lost two thirds of its
// shifts; measured again (two rounds, none / l2): Q6_K 30.7, 33.4 / 26.7,
// 25.2, Q5_0 31.0, 34.0 / 30.7, 32.1 and Q2_K 75.7, 79.8 / 67.6 now stream
// faster without; Q3_K (34.8-39.7 / 56.5-58.1) and Q5_1 (14.9-22.1 /
// 27.6-28.6) still need it.
//
// GroupPrefetch::kByType: kL2AndL1 for the types whose kernels do the most
// work a byte among those that stream near the ceiling (Q5_K, Q6_K, IQ4_XS:
// prefers_near_prefetch), kL2 for the rest. On a Zen 5 EPYC (2 vCPUs,
// benchmarks/stream_bench, two runs) the near prefetch streamed Q6_K's product
// 4-15% faster, Q5_K's 2-16%, IQ4_XS's 0-6%, at 1 and 2 threads; Q4_K's moved
// by -4 to +4%, Q3_K's by -2 to +5%, and the 32-element block types (Q4_0,
// Q8_0, Q5_0, IQ4_NL, MXFP4) and Q2_K lost 3-14%. So the default is kL2AndL1 on Intel CPUs,
// kByType on AMD family 1Ah (Zen 5), kNone on AMD family 19h (Zen 3/4), kL2
// elsewhere (earlier AMD, ARM: unmeasured with the others). `tessera
// --prefetch` (TESSERA_PREFETCH) chooses any; the results are the same bits.
#pragma once

#include "ops/quant_type.h"

#include <atomic>
#include <cstdint>
#include <string>

namespace tessera {

inline constexpr int64_t kGroupPrefetchBytes = 8192;
inline constexpr int64_t kL1PolicyFarBytes = 12288;
inline constexpr int64_t kL1PolicyNearBytes = 3072;

enum class GroupPrefetch {
    kL2,       // kGroupPrefetchBytes ahead into L2
    kL2AndL1,  // kL1PolicyFarBytes ahead into L2 and kL1PolicyNearBytes into L1
    kByType,   // kL2AndL1 for the prefers_near_prefetch types, kL2 for the rest
    kNone,     // no software prefetch
    kNoneByType,  // kL2 for the runs_below_memory_speed types, kNone for the rest
};

// What one kernel call asks for ahead of the weights it loads (read once per
// call from the policy in force).
enum class Ahead : uint8_t {
    kNone,      // nothing
    kL2,        // kGroupPrefetchBytes ahead into L2
    kL2AndL1,   // kL1PolicyFarBytes ahead into L2 and kL1PolicyNearBytes into L1
};

// The types kByType streams with the near prefetch as well.
inline constexpr bool prefers_near_prefetch(QuantType type) {
    return type == QuantType::Q5_K || type == QuantType::Q6_K || type == QuantType::IQ4_XS;
}

// The types kNoneByType streams with the far prefetch: their kernels stay
// below the memory's speed without it (on Zen 4, above).
inline constexpr bool runs_below_memory_speed(QuantType type) {
    switch (type) {
        case QuantType::Q5_1:
        case QuantType::Q3_K:
        case QuantType::F16:
        case QuantType::BF16: return true;
        default: return false;
    }
}

// This CPU's default: kL2AndL1 on an Intel CPU, kByType on AMD family 1Ah
// (Zen 5), kNoneByType on AMD family 19h (Zen 3/4), kL2 otherwise.
GroupPrefetch default_group_prefetch();
// The policy in force (the default until set).
GroupPrefetch group_prefetch();
void set_group_prefetch(GroupPrefetch policy);
// "auto" (this CPU's default), "l2", "l2+l1", "by-type", "none" or
// "none-by-type"; anything else is an Error.
GroupPrefetch group_prefetch_from_name(const std::string& name);
const char* group_prefetch_name(GroupPrefetch policy);
// From TESSERA_PREFETCH where it is set (an Error where it names no policy).
void set_group_prefetch_from_environment();

namespace detail {
extern std::atomic<GroupPrefetch> g_group_prefetch;
}  // namespace detail

// What a kernel of weights of `type` asks for under `policy`.
inline Ahead ahead_under(GroupPrefetch policy, QuantType type) {
    switch (policy) {
        case GroupPrefetch::kNone: return Ahead::kNone;
        case GroupPrefetch::kL2AndL1: return Ahead::kL2AndL1;
        case GroupPrefetch::kByType: return prefers_near_prefetch(type) ? Ahead::kL2AndL1 : Ahead::kL2;
        case GroupPrefetch::kNoneByType: return runs_below_memory_speed(type) ? Ahead::kL2 : Ahead::kNone;
        case GroupPrefetch::kL2: break;
    }
    return Ahead::kL2;
}

// What a kernel of `type` asks for ahead now: read once per kernel call.
inline Ahead near_prefetch(QuantType type) {
    return ahead_under(detail::g_group_prefetch.load(std::memory_order_relaxed), type);
}

// Asks for the cache lines of [p, p + bytes) into L2 (a hint: never faults).
// Into L2, not L1 (prefetcht1, not t0): that measured 2-8% faster for every
// grouped type at 2 threads (Zen), as a prefetch to L1 holds one of L1's few
// miss buffers until its line arrives, from memory this far ahead.
// The empty volatile asm keeps each loop: C++ lets a compiler delete a loop
// without side effects (g++ -O2 -ffinite-loops, the default since C++11), and
// a prefetch is none. g++ 12 deleted these loops from most kernels it did not
// unroll first (one branch before the call was enough), so which kernels
// prefetched depended on its inlining order, not on the policy.
inline void prefetch_lines(const uint8_t* p, int64_t bytes) {
    for (int64_t line = 0; line < bytes; line += 64) {
        __builtin_prefetch(p + line, 0, 2);
        asm volatile("");
    }
}

// The same lines into L1 (prefetcht0).
inline void prefetch_lines_l1(const uint8_t* p, int64_t bytes) {
    for (int64_t line = 0; line < bytes; line += 64) {
        __builtin_prefetch(p + line, 0, 3);
        asm volatile("");
    }
}

// How far ahead the far (L2) prefetch runs for `ahead`.
inline constexpr int64_t far_prefetch_bytes(Ahead ahead) {
    return ahead == Ahead::kL2AndL1 ? kL1PolicyFarBytes : kGroupPrefetchBytes;
}

// What a kernel about to read the `bytes` at p asks for: nothing under
// Ahead::kNone, else the same span far_prefetch_bytes(ahead) further on into
// L2 and, under kL2AndL1, kL1PolicyNearBytes further on into L1.
inline void prefetch_ahead(const uint8_t* p, int64_t bytes, Ahead ahead) {
    if (ahead == Ahead::kNone) return;
    prefetch_lines(p + far_prefetch_bytes(ahead), bytes);
    if (ahead == Ahead::kL2AndL1) prefetch_lines_l1(p + kL1PolicyNearBytes, bytes);
}

// The start of a stream (a thread's chunk of a matrix, the next panel): its
// first `bytes`, up to the far distance, into L2 at once: the lines the
// kernel's own prefetch has passed by the time it starts (none under
// Ahead::kNone). Not into L1 as well: those lines come from memory, and a
// burst of them would hold L1's miss buffers for a memory latency (no faster
// at 2 threads on the Xeon).
inline void prefetch_stream_start(const uint8_t* p, int64_t bytes, Ahead ahead) {
    if (ahead == Ahead::kNone) return;
    const int64_t far = far_prefetch_bytes(ahead);
    prefetch_lines(p, bytes < far ? bytes : far);
}

}  // namespace tessera
