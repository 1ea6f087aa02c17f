// Memory this process may still use: the kernel's MemAvailable, capped by the
// limit of the cgroup (v1 memory controller or v2 memory.max) the process is
// in. A planner compares a node's share of the model against it.
#pragma once

#include <cstdint>

namespace tessera {

uint64_t available_memory_bytes();

// This process's resident memory now and at its peak (VmRSS / VmHWM).
uint64_t resident_memory_bytes();
uint64_t peak_resident_memory_bytes();

}  // namespace tessera
