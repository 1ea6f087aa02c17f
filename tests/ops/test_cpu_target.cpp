// The names --cpu-target takes for the int8 dot extensions (AVX2_VNNI,
// NEON_DOTPROD): listed only where the CPU has them, each switching the
// extension on or off, anything else a clear error.
#include "ops/cpu_target.h"
#include "ops/int8_dot_extension.h"
#include "util/error.h"

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace tessera {
namespace {

bool listed(const std::string& name) {
    const std::vector<std::string> names = cpu_target_names();
    return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

TEST(CpuTarget, DotExtensionNamesSwitchItAndUnsupportedOnesAreClearErrors) {
    const bool avx2 = listed("AVX2"), neon = listed("NEON");
    const bool ext = int8_dot_extension_supported();
    EXPECT_EQ(listed("AVX2_VNNI"), avx2 && ext);
    EXPECT_EQ(listed("NEON_DOTPROD"), neon && ext);
    for (const auto& [with, without] : {std::pair<std::string, std::string>{"avx2_vnni", "avx2"},
                                        std::pair<std::string, std::string>{"neon_dotprod", "neon"}}) {
        const std::string upper = with == "avx2_vnni" ? "AVX2_VNNI" : "NEON_DOTPROD";
        if (listed(upper)) {
            limit_cpu_target(with);
            EXPECT_TRUE(int8_dot_extension_enabled()) << with;
            EXPECT_EQ(cpu_target_name(), upper);
            limit_cpu_target(without);
            EXPECT_FALSE(int8_dot_extension_enabled()) << without;
            EXPECT_NE(cpu_target_name(), upper);
        } else {
            // A CPU (or architecture) without it: the name is refused, saying
            // what this CPU runs.
            try {
                limit_cpu_target(with);
                ADD_FAILURE() << with << " was accepted on a CPU without it";
            } catch (const Error& e) {
                EXPECT_NE(std::string(e.what()).find("unknown or unsupported CPU target '" + with + "'"),
                          std::string::npos)
                    << e.what();
            }
        }
    }
    EXPECT_THROW(limit_cpu_target("avx2_vnni_extra"), Error);
    hwy::SetSupportedTargetsForTest(0);
    allow_int8_dot_extension(true);
}

}  // namespace tessera
