// Runs a test body once per SIMD target, then restores normal dispatch.
#pragma once

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <cstdint>
#include <vector>

namespace tessera::test {

// Every target this CPU runs that the build generated, unless given others;
// body receives each target's name.
template <typename Body>
void for_each_target(Body body, const std::vector<int64_t>& targets = hwy::SupportedAndGeneratedTargets()) {
    ASSERT_FALSE(targets.empty());
    for (int64_t target : targets) {
        hwy::SetSupportedTargetsForTest(target);
        body(hwy::TargetName(target));
    }
    hwy::SetSupportedTargetsForTest(0);
}

}  // namespace tessera::test
