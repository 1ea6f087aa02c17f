// Stop strings: found across piece boundaries, never shown even in part,
// and text that only looked like a stop string's start is released.
#include "engine/stop_strings.h"

#include <gtest/gtest.h>

namespace tessera {

TEST(StopStrings, StopsAcrossPiecesAndHidesTheStop) {
    StopStrings s({"\nUser:", "###"});
    std::string shown;
    for (const char* piece : {"Hello", " there", "\nUs", "er", ": more"}) shown += s.push(piece);
    EXPECT_TRUE(s.stopped());
    EXPECT_EQ(shown, "Hello there");
    EXPECT_EQ(s.push("x"), "");
    EXPECT_EQ(s.flush(), "");
}

TEST(StopStrings, ReleasesFalseStartsAndEverythingWithoutStops) {
    StopStrings s({"###"});
    EXPECT_EQ(s.push("a#"), "a");
    EXPECT_EQ(s.push("#b"), "##b");
    EXPECT_EQ(s.push("##"), "");
    EXPECT_EQ(s.flush(), "##");
    EXPECT_FALSE(s.stopped());
    StopStrings none({});
    EXPECT_EQ(none.push("abc"), "abc");
    StopStrings empty_stop({""});
    EXPECT_EQ(empty_stop.push("abc"), "abc");
    EXPECT_FALSE(empty_stop.stopped());
}

}  // namespace tessera
