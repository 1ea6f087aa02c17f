// Progress off a terminal: a line at each quarter and one at the end, never
// more; on a terminal, one line redrawn in place.
#include "util/progress.h"

#include <gtest/gtest.h>

#include <string>

namespace tessera {

TEST(Progress, QuarterLinesOffATerminal) {
    Progress::set_terminal_for_testing(0);
    testing::internal::CaptureStderr();
    {
        Progress p("loading", 100.0, "MiB");
        for (int i = 0; i <= 100; ++i) p.update(i);
        p.finish();
    }
    const std::string out = testing::internal::GetCapturedStderr();
    Progress::set_terminal_for_testing(-1);
    int lines = 0;
    for (const char c : out) lines += c == '\n';
    EXPECT_EQ(lines, 5) << out;  // 0% (the start), 25%, 50%, 75%, then the final 100%
    EXPECT_NE(out.find("loading: 100% (100.0/100.0 MiB"), std::string::npos) << out;
    EXPECT_EQ(out.find('\r'), std::string::npos);
}

TEST(Progress, OneRedrawnLineOnATerminal) {
    Progress::set_terminal_for_testing(1);
    testing::internal::CaptureStderr();
    {
        Progress p("shipping", 10.0, "MiB");
        p.update(5.0);
        p.finish();
    }
    const std::string out = testing::internal::GetCapturedStderr();
    Progress::set_terminal_for_testing(-1);
    EXPECT_NE(out.find("\rshipping ["), std::string::npos) << out;
    EXPECT_NE(out.find("100%"), std::string::npos) << out;
    EXPECT_EQ(out.back(), '\n');
}

}  // namespace tessera
