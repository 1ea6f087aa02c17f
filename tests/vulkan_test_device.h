// The Vulkan device under test: TESSERA_VULKAN_DEVICE (scripts/gpu_device_check.sh
// picks a real GPU there), else 0 (lavapipe where it is the only one).
#pragma once

#include <cstdlib>

namespace tessera::test {

inline int vulkan_device_index() {
    const char* v = std::getenv("TESSERA_VULKAN_DEVICE");
    return v != nullptr ? std::atoi(v) : 0;
}

}  // namespace tessera::test
