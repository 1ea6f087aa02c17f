// The grouped kernels' prefetch policy (ops/group_prefetch.h): named, chosen
// per CPU vendor, settable from the environment, and speed only: every
// target's grouped kernel gives the canonical bits under either policy, over
// matrices long enough that both prefetch distances run past their end.

// kquants_hwy.cpp's target set, so that Q4_K's loop visits each of its targets.
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128)
#define HWY_WANT_AVX3_DL
#include <hwy/targets.h>

#include "ops/dot_kernels.h"
#include "ops/group_prefetch.h"
#include "ops/int8_dot_extension.h"
#include "ops/kquants_hwy.h"
#include "ops/row_groups.h"
#include "test_errors.h"
#include "util/rng.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace tessera {

namespace {

// A field of the first CPU in what the operating system says of it
// ("vendor_id", "cpu family": x86 only; empty elsewhere).
std::string cpuinfo_field(const std::string& name) {
    std::ifstream in("/proc/cpuinfo");
    for (std::string line; std::getline(in, line);) {
        if (line.rfind(name, 0) == 0 && line.find(':') != std::string::npos) return line.substr(line.find(':') + 2);
    }
    return "";
}

// Restores the policy in force when the test started.
struct PolicyGuard {
    GroupPrefetch saved = group_prefetch();
    ~PolicyGuard() { set_group_prefetch(saved); }
};

}  // namespace

TEST(GroupPrefetch, PoliciesAreNamedAndTheDefaultFollowsTheVendor) {
    PolicyGuard guard;
    EXPECT_EQ(group_prefetch_from_name("l2"), GroupPrefetch::kL2);
    EXPECT_EQ(group_prefetch_from_name("l2+l1"), GroupPrefetch::kL2AndL1);
    EXPECT_EQ(group_prefetch_from_name("by-type"), GroupPrefetch::kByType);
    EXPECT_EQ(group_prefetch_from_name("none"), GroupPrefetch::kNone);
    EXPECT_EQ(group_prefetch_from_name("none-by-type"), GroupPrefetch::kNoneByType);
    EXPECT_EQ(group_prefetch_from_name("auto"), default_group_prefetch());
    EXPECT_STREQ(group_prefetch_name(GroupPrefetch::kL2), "l2");
    EXPECT_STREQ(group_prefetch_name(GroupPrefetch::kL2AndL1), "l2+l1");
    EXPECT_STREQ(group_prefetch_name(GroupPrefetch::kByType), "by-type");
    EXPECT_STREQ(group_prefetch_name(GroupPrefetch::kNone), "none");
    EXPECT_STREQ(group_prefetch_name(GroupPrefetch::kNoneByType), "none-by-type");
    const std::string unknown = test::error_of([] { group_prefetch_from_name("l3"); });
    EXPECT_NE(unknown.find("unknown prefetch policy 'l3' (auto, l2, l2+l1, by-type, none or none-by-type)"), std::string::npos) << unknown;
    EXPECT_NE(test::error_of([] { group_prefetch_from_name(""); }).find("unknown prefetch policy ''"),
              std::string::npos);

    // Intel CPUs prefetch into L1 as well (measured there), AMD's Zen 5
    // (family 26) for the types it streamed faster with it, AMD's Zen 3/4
    // (family 25) only for the types whose kernels are slower than its
    // memory without (the rest streamed faster without); every other CPU
    // keeps the far prefetch alone. (An ARM build under
    // qemu-user reads the x86 host's /proc/cpuinfo: only x86 asks.)
#if defined(__x86_64__) || defined(__i386__)
    const std::string vendor = cpuinfo_field("vendor_id");
    const bool intel = vendor == "GenuineIntel";
    const bool zen5 = vendor == "AuthenticAMD" && cpuinfo_field("cpu family") == "26";
    const bool zen4 = vendor == "AuthenticAMD" && cpuinfo_field("cpu family") == "25";
#else
    const bool intel = false, zen5 = false, zen4 = false;
#endif
    EXPECT_EQ(default_group_prefetch(), intel  ? GroupPrefetch::kL2AndL1
                                        : zen5 ? GroupPrefetch::kByType
                                        : zen4 ? GroupPrefetch::kNoneByType
                                               : GroupPrefetch::kL2)
        << cpuinfo_field("vendor_id") << " family " << cpuinfo_field("cpu family");

    // What a kernel of each type asks for under each policy: by-type the L1
    // prefetch as well for Q5_K, Q6_K and IQ4_XS only; none nothing at all;
    // none-by-type the far prefetch for the types slow without it (Q5_1,
    // Q3_K, F16, BF16) and nothing for the rest.
    constexpr Ahead N = Ahead::kNone, L2 = Ahead::kL2, L1 = Ahead::kL2AndL1;
    const struct {
        QuantType type;
        Ahead l2, l2_l1, by_type, none, none_by_type;
    } expected[] = {
        {QuantType::Q4_0, L2, L1, L2, N, N},     {QuantType::Q8_0, L2, L1, L2, N, N},
        {QuantType::Q4_K, L2, L1, L2, N, N},     {QuantType::Q5_K, L2, L1, L1, N, N},
        {QuantType::Q6_K, L2, L1, L1, N, N},    {QuantType::IQ4_XS, L2, L1, L1, N, N},
        {QuantType::IQ4_NL, L2, L1, L2, N, N},   {QuantType::MXFP4, L2, L1, L2, N, N},
        {QuantType::Q5_0, L2, L1, L2, N, N},    {QuantType::Q5_1, L2, L1, L2, N, L2},
        {QuantType::Q3_K, L2, L1, L2, N, L2},    {QuantType::Q2_K, L2, L1, L2, N, N},
        {QuantType::F16, L2, L1, L2, N, L2},     {QuantType::BF16, L2, L1, L2, N, L2},
        {QuantType::F32, L2, L1, L2, N, N},      {QuantType::BF16_F32ACT, L2, L1, L2, N, N},
    };
    for (const auto& e : expected) {
        const std::pair<GroupPrefetch, Ahead> under[] = {{GroupPrefetch::kL2, e.l2},
                                                         {GroupPrefetch::kL2AndL1, e.l2_l1},
                                                         {GroupPrefetch::kByType, e.by_type},
                                                         {GroupPrefetch::kNone, e.none},
                                                         {GroupPrefetch::kNoneByType, e.none_by_type}};
        for (const auto& [policy, ahead] : under) {
            set_group_prefetch(policy);
            EXPECT_EQ(group_prefetch(), policy);
            EXPECT_EQ(near_prefetch(e.type), ahead) << quant_type_name(e.type) << " " << group_prefetch_name(policy);
            EXPECT_EQ(ahead_under(policy, e.type), ahead);
        }
    }
    // The far prefetch runs further ahead when the near one follows it.
    EXPECT_EQ(far_prefetch_bytes(Ahead::kL2), kGroupPrefetchBytes);
    EXPECT_GT(far_prefetch_bytes(Ahead::kL2AndL1), kL1PolicyNearBytes);
}

TEST(GroupPrefetch, TheEnvironmentChoosesAndANameItDoesNotKnowIsAnError) {
    PolicyGuard guard;
    set_group_prefetch(GroupPrefetch::kL2AndL1);
    setenv("TESSERA_PREFETCH", "l2", 1);
    set_group_prefetch_from_environment();
    EXPECT_EQ(group_prefetch(), GroupPrefetch::kL2);
    setenv("TESSERA_PREFETCH", "l2+l1", 1);
    set_group_prefetch_from_environment();
    EXPECT_EQ(group_prefetch(), GroupPrefetch::kL2AndL1);
    setenv("TESSERA_PREFETCH", "by-type", 1);
    set_group_prefetch_from_environment();
    EXPECT_EQ(group_prefetch(), GroupPrefetch::kByType);
    setenv("TESSERA_PREFETCH", "none", 1);
    set_group_prefetch_from_environment();
    EXPECT_EQ(group_prefetch(), GroupPrefetch::kNone);
    setenv("TESSERA_PREFETCH", "none-by-type", 1);
    set_group_prefetch_from_environment();
    EXPECT_EQ(group_prefetch(), GroupPrefetch::kNoneByType);
    // Unset or empty: the policy stays.
    setenv("TESSERA_PREFETCH", "", 1);
    set_group_prefetch(GroupPrefetch::kL2);
    set_group_prefetch_from_environment();
    EXPECT_EQ(group_prefetch(), GroupPrefetch::kL2);
    setenv("TESSERA_PREFETCH", "everything", 1);
    const std::string from_env = test::error_of([] { set_group_prefetch_from_environment(); });
    EXPECT_NE(from_env.find("unknown prefetch policy 'everything'"), std::string::npos) << from_env;
    EXPECT_EQ(group_prefetch(), GroupPrefetch::kL2);
    unsetenv("TESSERA_PREFETCH");
    set_group_prefetch_from_environment();
    EXPECT_EQ(group_prefetch(), GroupPrefetch::kL2);
}

TEST(GroupPrefetch, EveryTargetGivesTheCanonicalBitsUnderEitherPolicy) {
    PolicyGuard guard;
    for (QuantType type : {QuantType::Q4_0, QuantType::Q8_0, QuantType::Q4_K}) {
        const QuantType vdt = scalar_traits(type)->vec_dot_type;
        // 8 super-blocks of Q4_K or 64 blocks of Q4_0/Q8_0 per row: groups of
        // 18-34 KiB, longer than either far distance, in 3 groups.
        const int64_t n = 2048;
        const int n_groups = 3;
        Rng rng(11);
        std::vector<uint8_t> plain(quant_row_bytes(type, n) * n_groups * kGroupRows);
        std::vector<float> v(static_cast<size_t>(n));
        for (int64_t r = 0; r < n_groups * kGroupRows; ++r) {
            for (float& f : v) f = rng.next_normal();
            scalar_traits(type)->from_float(v.data(), plain.data() + r * quant_row_bytes(type, n), n);
        }
        const uint64_t gb = group_bytes(type, n);
        std::vector<uint8_t> w(gb * n_groups);
        for (int g = 0; g < n_groups; ++g) {
            group_rows(type, plain.data() + g * kGroupRows * quant_row_bytes(type, n), quant_row_bytes(type, n),
                       kGroupRows, n, w.data() + g * gb);
        }
        const int cols = 3;
        const size_t x_stride = quant_row_bytes(vdt, n);
        std::vector<uint8_t> x(cols * x_stride);
        std::vector<int32_t> sums(static_cast<size_t>(cols * n / 32));
        for (int c = 0; c < cols; ++c) {
            for (float& f : v) f = rng.next_normal();
            uint8_t* xc = x.data() + c * x_stride;
            scalar_traits(vdt)->from_float(v.data(), xc, n);
            if (vdt != QuantType::Q8_0) continue;
            for (int64_t b = 0; b < n / 32; ++b) {
                for (int i = 0; i < 32; ++i) sums[c * (n / 32) + b] += static_cast<int8_t>(xc[b * 34 + 2 + i]);
            }
        }
        const size_t y_stride = static_cast<size_t>(n_groups * kGroupRows);
        std::vector<float> canon(cols * y_stride);
        vec_dot_groups_canonical(type, n, w.data(), gb, n_groups, x.data(), x_stride, cols, canon.data(), y_stride);
        std::vector<std::pair<int64_t, bool>> runs;
        const std::vector<int64_t> targets =
            type == QuantType::Q4_K ? hwy::SupportedAndGeneratedTargets() : simd_block_targets();
        for (int64_t target : targets) {
            if ((target == HWY_AVX2 || target == HWY_NEON) && int8_dot_extension_supported()) {
                runs.emplace_back(target, true);
            }
            runs.emplace_back(target, false);
        }
        int tested = 0;
        for (const auto& [target, with_dot] : runs) {
            hwy::SetSupportedTargetsForTest(target);
            allow_int8_dot_extension(with_dot);
            const QuantTraits& simd = type == QuantType::Q4_K ? *kquants_simd_traits(type) : *simd_block_traits(type);
            if (simd.vec_dot_groups == nullptr) continue;
            for (GroupPrefetch policy :
                 {GroupPrefetch::kL2, GroupPrefetch::kL2AndL1, GroupPrefetch::kByType, GroupPrefetch::kNone,
                  GroupPrefetch::kNoneByType}) {
                set_group_prefetch(policy);
                for (int c = 1; c <= cols; ++c) {
                    std::vector<float> got(cols * y_stride, -7.0f);
                    simd.vec_dot_groups(n, w.data(), gb, n_groups, x.data(), x_stride, sums.data(),
                                        static_cast<size_t>(n / 32), c, got.data(), y_stride, 0, 0, false);
                    ASSERT_EQ(0, std::memcmp(got.data(), canon.data(), c * y_stride * sizeof(float)))
                        << hwy::TargetName(target) << (with_dot ? "+dot " : " ") << quant_type_name(type) << " "
                        << group_prefetch_name(policy) << " columns " << c;
                }
            }
            ++tested;
        }
        hwy::SetSupportedTargetsForTest(0);
        allow_int8_dot_extension(true);
        EXPECT_EQ(tested, static_cast<int>(runs.size())) << quant_type_name(type);
    }
}

}  // namespace tessera
