// Step frames: random rows round-trip in every format (exactly for F32 and
// packed exact partials, within the format's rounding for F16 and Q8_0); a payload whose size
// does not match its header, an empty step, or one whose size wraps 64 bits
// is refused naming the peer; non-finite rows are found wherever they sit.
#include "cluster/session/messages.h"
#include "util/rng.h"

#include "test_errors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

namespace tessera {

using test::error_of;

TEST(StepMessages, RandomRowsRoundTripInEveryFormat) {
    Rng rng(7);
    for (int trial = 0; trial < 20; ++trial) {
        const uint32_t n_tok = 1 + static_cast<uint32_t>(rng.next_u64() % 5);
        const uint32_t width = 32 * (1 + static_cast<uint32_t>(rng.next_u64() % 4));
        std::vector<float> rows(static_cast<size_t>(n_tok) * width);
        for (float& x : rows) x = static_cast<float>(static_cast<int64_t>(rng.next_u64() % 2001) - 1000) / 100.0f;
        for (WireFormat f : {WireFormat::F32, WireFormat::F16, WireFormat::Q8_0}) {
            const StepHeader h{3, 17, n_tok, width, f};
            std::vector<uint8_t> wire;
            encode_step(h, rows.data(), wire);
            EXPECT_EQ(wire.size(), kStepHeaderBytes + wire_rows_bytes(f, width, n_tok));
            std::vector<float> back;
            const StepHeader got = decode_step(wire, back, "peer");
            EXPECT_EQ(got.layer, 3u);
            EXPECT_EQ(got.pos0, 17u);
            ASSERT_EQ(back.size(), rows.size());
            const float tolerance = f == WireFormat::F32 ? 0.0f : f == WireFormat::F16 ? 0.01f : 0.1f;
            for (size_t i = 0; i < rows.size(); ++i) EXPECT_NEAR(back[i], rows[i], tolerance) << wire_format_name(f);
        }
        std::vector<double> exact(rows.begin(), rows.end());
        std::vector<uint8_t> wire;
        encode_exact_step({1, 0, n_tok, width, WireFormat::Fixed}, exact.data(), wire);
        std::vector<double> back;
        decode_exact_step(wire, back, "peer");
        EXPECT_EQ(back, exact);
    }
}

TEST(StepMessages, MalformedStepsAreRefusedNamingThePeer) {
    std::vector<float> rows;
    const auto step = [](uint32_t n_tok, uint32_t width, uint32_t format, size_t body) {
        std::vector<uint8_t> p(kStepHeaderBytes + body, 0);
        std::memcpy(p.data() + 8, &n_tok, 4);
        std::memcpy(p.data() + 12, &width, 4);
        std::memcpy(p.data() + 16, &format, 4);
        return p;
    };
    // Found by fuzzing: an empty step reached memcpy with a null destination.
    EXPECT_NE(error_of([&] { decode_step(step(0, 64, 0, 0), rows, "10.0.0.2:9999"); }).find("10.0.0.2:9999: step of 0 rows x 64 is empty"),
              std::string::npos);
    EXPECT_NE(error_of([&] { decode_step(step(1, 0, 0, 0), rows, "peer"); }).find("is empty"), std::string::npos);
    // 4 * 2^31 * 2^31 wraps to 0 bytes: an empty body must not pass.
    EXPECT_NE(error_of([&] { decode_step(step(1u << 31, 1u << 31, 0, 0), rows, "peer"); }).find("impossibly large"),
              std::string::npos);
    EXPECT_NE(error_of([&] { decode_step(step(2, 4, 0, 31), rows, "peer"); }).find("needs 32 bytes, the message has 31"),
              std::string::npos);
    EXPECT_NE(error_of([&] { decode_step(step(1, 4, 9, 16), rows, "peer"); }).find("unknown row format 9"),
              std::string::npos);
    EXPECT_NE(error_of([&] { decode_step(step(1, 33, 2, 100), rows, "peer"); }).find("not a multiple of 32"),
              std::string::npos);
    EXPECT_NE(error_of([&] { decode_step(std::vector<uint8_t>(10), rows, "peer"); }).find("truncated"),
              std::string::npos);
}

// Zero blocks take a byte per 32 values: a 64 MiB frame could claim 2^31
// values (16 GiB of doubles). The receiver's bound is checked first.
TEST(StepMessages, ExactPartialsClaimingTooManyValuesAreRefusedBeforeAllocating) {
    const uint32_t n_tok = 1u << 16, width = 1u << 15;  // 2^31 values
    std::vector<uint8_t> p(kStepHeaderBytes + (static_cast<size_t>(n_tok) * width) / 32, 0);
    const uint32_t format = static_cast<uint32_t>(WireFormat::Fixed);
    std::memcpy(p.data() + 8, &n_tok, 4);
    std::memcpy(p.data() + 12, &width, 4);
    std::memcpy(p.data() + 16, &format, 4);
    std::vector<double> rows;
    EXPECT_NE(error_of([&] { decode_exact_step(p, rows, "peer"); }).find("where at most 8388608 values were due"),
              std::string::npos);
    EXPECT_NE(error_of([&] { decode_exact_step(p, rows, "peer", 4096); }).find("at most 4096"), std::string::npos);
    EXPECT_TRUE(rows.empty());
}

TEST(StepMessages, NonFiniteValuesAreFoundAnywhere) {
    for (size_t n : {1u, 7u, 64u, 1000u}) {
        for (size_t at = 0; at < n; at += std::max<size_t>(1, n / 5)) {
            for (double bad : {std::nan(""), std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity()}) {
                std::vector<double> d(n, 1.5);
                d[at] = bad;
                EXPECT_NE(error_of([&] { require_finite(d.data(), n, "peer"); }).find("peer sent a non-finite value"),
                          std::string::npos);
                std::vector<float> f(n, -2.0f);
                f[at] = static_cast<float>(bad);
                EXPECT_NE(error_of([&] { require_finite(f.data(), n, "peer"); }).find("at index " + std::to_string(at)),
                          std::string::npos);
            }
        }
        const std::vector<float> fine(n, std::numeric_limits<float>::max());
        EXPECT_EQ(error_of([&] { require_finite(fine.data(), n, "peer"); }), test::kNoError);
    }
}

}  // namespace tessera

namespace tessera {

// A batch's runs round-trip; the step flag travels beside the format; a
// truncated, padded, empty or out-of-range table and unknown flags are refused.
TEST(StepMessages, SequenceRunsAndStepFlags) {
    const std::vector<SeqRun> runs = {{0, 5, 1}, {3, 0, 17, true}, {2, 1000, 1}};
    std::vector<uint8_t> bytes;
    encode_seq_runs(runs, bytes);
    const std::vector<SeqRun> back = decode_seq_runs(bytes, "peer");
    ASSERT_EQ(back.size(), runs.size());
    for (size_t i = 0; i < runs.size(); ++i) {
        EXPECT_EQ(back[i].seq, runs[i].seq);
        EXPECT_EQ(back[i].pos0, runs[i].pos0);
        EXPECT_EQ(back[i].n_tok, runs[i].n_tok);
        EXPECT_EQ(back[i].all_logits, runs[i].all_logits);
    }
    std::vector<uint8_t> bad_flag = bytes;
    bad_flag[4 + 12] = 2;  // run 0's all_logits
    EXPECT_THROW(decode_seq_runs(bad_flag, "peer"), Error);
    std::vector<uint8_t> cut(bytes.begin(), bytes.end() - 1);
    EXPECT_THROW(decode_seq_runs(cut, "peer"), Error);
    std::vector<uint8_t> padded = bytes;
    padded.push_back(0);
    EXPECT_THROW(decode_seq_runs(padded, "peer"), Error);
    std::vector<uint8_t> none(4, 0);
    EXPECT_THROW(decode_seq_runs(none, "peer"), Error);
    std::vector<uint8_t> empty_run = bytes;
    std::fill(empty_run.begin() + 12, empty_run.begin() + 16, 0);  // run 0's n_tok
    EXPECT_THROW(decode_seq_runs(empty_run, "peer"), Error);
    std::vector<uint8_t> huge = bytes;
    huge[0] = 0xff, huge[1] = 0xff, huge[2] = 0xff, huge[3] = 0x7f;
    EXPECT_THROW(decode_seq_runs(huge, "peer"), Error);

    StepHeader h{3, 0, 2, 32, WireFormat::F32, kStepOverRuns};
    std::vector<float> rows(64, 1.0f), got;
    encode_step(h, rows.data(), bytes);
    EXPECT_EQ(decode_step(bytes, got, "peer").flags, kStepOverRuns);
    bytes[18] = 0x80;  // an unknown flag
    EXPECT_THROW(decode_step(bytes, got, "peer"), Error);
}

}  // namespace tessera
