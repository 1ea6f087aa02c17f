// weighted_row_sums on every compiled target this CPU supports against its
// scalar reference: F32 and F16 rows, lengths off the vector width (Q8_0 and
// Q4_0 rows: whole blocks, their nibble halves and block scales), from no
// rows to many, 1 to 17 weight sets (past the 8 held in registers), strided
// rows, weights and outputs; outputs between the strides stay untouched.
#include "ops/quant_traits.h"
#include "ops/weighted_rows.h"
#include "util/fp16.h"
#include "util/rng.h"

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <cmath>
#include <cstring>
#include <vector>

namespace tessera {

TEST(WeightedRows, MatchTheReferenceOnEveryTarget) {
    const std::vector<int64_t> targets = hwy::SupportedAndGeneratedTargets();
    ASSERT_FALSE(targets.empty());
    for (int64_t target : targets) {
        hwy::SetSupportedTargetsForTest(target);
        Rng rng(9);
        for (QuantType type : {QuantType::F32, QuantType::F16, QuantType::Q8_0, QuantType::Q4_0}) {
            const bool blocks = type == QuantType::Q8_0 || type == QuantType::Q4_0;
            const std::vector<int64_t> lengths = blocks ? std::vector<int64_t>{32, 64, 160}
                                                        : std::vector<int64_t>{1, 7, 8, 13, 16, 40, 64, 100};
            for (int64_t n : lengths) {
                for (int64_t n_rows : {0, 1, 5, 300}) {
                    for (int sets : {1, 3, 8, 9, 17}) {
                        const size_t row_stride = quant_row_bytes(type, n) + 6;
                        std::vector<uint8_t> rows(1 + n_rows * row_stride);
                        std::vector<float> values(n);
                        for (int64_t r = 0; r < n_rows; ++r) {
                            for (float& v : values) v = rng.next_normal();
                            scalar_traits(type)->from_float(values.data(), rows.data() + 1 + r * row_stride, n);
                        }
                        const size_t w_stride = static_cast<size_t>(n_rows) + 3;
                        std::vector<float> weights(sets * w_stride);
                        for (float& w : weights) w = rng.next_normal();
                        const size_t out_stride = static_cast<size_t>(n) + 2;
                        std::vector<float> want(sets * out_stride, -7.0f), got(want.size(), -7.0f);
                        weighted_row_sums_scalar(type, rows.data() + 1, row_stride, n_rows, weights.data(), w_stride,
                                                 sets, n, want.data(), out_stride);
                        weighted_row_sums(type, rows.data() + 1, row_stride, n_rows, weights.data(), w_stride, sets,
                                          n, got.data(), out_stride);
                        for (size_t i = 0; i < got.size(); ++i) {
                            ASSERT_NEAR(got[i], want[i], 1e-5 * (1.0 + std::sqrt(static_cast<double>(n_rows))))
                                << hwy::TargetName(target) << " " << quant_type_name(type) << " n " << n << " rows "
                                << n_rows << " sets " << sets << " at " << i;
                        }
                    }
                }
            }
        }
    }
    hwy::SetSupportedTargetsForTest(0);
}

}  // namespace tessera
