// The one UTF-8 module against a scalar reference written here from the
// standard's table (Unicode 15, table 3-7), on random code points and random
// bytes: every well-formed character decodes whole, every ill-formed byte
// sequence is refused at the same byte, nothing reads past the end.
#include "util/rng.h"
#include "util/utf8.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

// Reference: the well-formed sequence lengths by first two bytes.
size_t reference_length(const std::string& s) {
    const auto b = [&](size_t i) { return static_cast<uint8_t>(s[i]); };
    const auto cont = [](uint8_t c) { return c >= 0x80 && c <= 0xBF; };
    if (s.empty()) return 0;
    if (b(0) < 0x80) return 1;
    struct Row { uint8_t lead_lo, lead_hi, second_lo, second_hi; size_t n; };
    static const Row rows[] = {{0xC2, 0xDF, 0x80, 0xBF, 2}, {0xE0, 0xE0, 0xA0, 0xBF, 3}, {0xE1, 0xEC, 0x80, 0xBF, 3},
                               {0xED, 0xED, 0x80, 0x9F, 3}, {0xEE, 0xEF, 0x80, 0xBF, 3}, {0xF0, 0xF0, 0x90, 0xBF, 4},
                               {0xF1, 0xF3, 0x80, 0xBF, 4}, {0xF4, 0xF4, 0x80, 0x8F, 4}};
    for (const Row& r : rows) {
        if (b(0) < r.lead_lo || b(0) > r.lead_hi) continue;
        if (s.size() < r.n || b(1) < r.second_lo || b(1) > r.second_hi) return 0;
        for (size_t k = 2; k < r.n; ++k) {
            if (!cont(b(k))) return 0;
        }
        return r.n;
    }
    return 0;
}

uint32_t random_code_point(Rng& rng) {
    for (;;) {
        const uint64_t pick = rng.next_u64();
        const uint32_t limit[] = {0x80, 0x800, 0x10000, 0x110000};
        const uint32_t cp = static_cast<uint32_t>((pick >> 8) % limit[pick & 3]);
        if (cp < 0xD800 || cp > 0xDFFF) return cp;  // surrogates are not characters
    }
}

TEST(Utf8, RandomCodePointsRoundTrip) {
    Rng rng(11);
    for (int i = 0; i < 20000; ++i) {
        const uint32_t cp = random_code_point(rng);
        std::string s;
        append_utf8(s, cp);
        const size_t want = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
        ASSERT_EQ(s.size(), want) << cp;
        const Utf8Step step = next_utf8(s);
        EXPECT_EQ(step.kind, Utf8Step::Complete) << cp;
        EXPECT_EQ(step.length, want) << cp;
        EXPECT_EQ(utf8_char_bytes(s, 0), want) << cp;
        // Cut short, it is the start of a character, not an error.
        if (want > 1) EXPECT_EQ(next_utf8(std::string_view(s).substr(0, want - 1)).kind, Utf8Step::Incomplete) << cp;
    }
}

TEST(Utf8, RandomBytesAgreeWithTheStandardsTable) {
    Rng rng(12);
    for (int i = 0; i < 50000; ++i) {
        std::string s(1 + rng.next_u64() % 5, '\0');
        for (char& c : s) c = static_cast<char>(0x80 + rng.next_u64() % 0x80 - (rng.next_u64() % 4 == 0 ? 0x80 : 0));
        const Utf8Step step = next_utf8(s);
        ASSERT_GE(step.length, 1u);
        ASSERT_LE(step.length, 4u);
        const size_t ref = reference_length(s);
        if (ref > 0) {
            EXPECT_EQ(step.kind, Utf8Step::Complete);
            EXPECT_EQ(step.length, ref);
        } else {
            EXPECT_NE(step.kind, Utf8Step::Complete);
            if (step.kind == Utf8Step::Incomplete) EXPECT_EQ(step.length, s.size());
            if (step.kind == Utf8Step::Invalid) EXPECT_LE(step.length, s.size());
        }
        const size_t at = rng.next_u64() % s.size();
        const size_t n = utf8_char_bytes(s, at);
        EXPECT_GE(n, 1u);
        EXPECT_LE(at + n, s.size());
    }
}

TEST(Utf8, OffsetsAndLengthCountCharacters) {
    const std::string s = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80";  // a é € 😀
    EXPECT_EQ(utf8_offsets(s), (std::vector<size_t>{0, 1, 3, 6, 10}));
    EXPECT_EQ(utf8_length(s), 4u);
    EXPECT_EQ(utf8_offsets(""), std::vector<size_t>{0});
    // A stray continuation byte belongs to the character before it.
    EXPECT_EQ(utf8_length("\x80x"), 1u);
}

}  // namespace
}  // namespace tessera
