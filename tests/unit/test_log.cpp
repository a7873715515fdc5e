#include <gtest/gtest.h>
#include <unistd.h>

#include <regex>
#include <string>

#include "base/log.h"

using ccl::LogLevel;

TEST(Log, FillsPlaceholdersInOrderWithPlainText) {
    ccl::Logger l(LogLevel::info);
    const char* none = nullptr;
    testing::internal::CaptureStderr();
    l.info("a {} b {} c {} d {} e {} f {}", 42, "x", std::string("y"), 2.5, none, size_t(7));
    std::string out = testing::internal::GetCapturedStderr();
    EXPECT_NE(out.find("a 42 b x c y d 2.5 e (null) f 7"), std::string::npos) << out;
    EXPECT_NE(out.find("[ccl I "), std::string::npos) << out;
}

TEST(Log, KeepsUnmatchedBracesAndDropsLinesBelowTheLevel) {
    ccl::Logger l(LogLevel::warn);
    testing::internal::CaptureStderr();
    l.info("hidden {}", 1);
    l.debug("hidden too");
    l.warn("{} of {} {}", 1);
    std::string out = testing::internal::GetCapturedStderr();
    EXPECT_EQ(out.find("hidden"), std::string::npos) << out;
    EXPECT_NE(out.find("1 of {} {}"), std::string::npos) << out;
}

TEST(Log, LevelNamesAreTheOnesCclLogLevelTakes) {
    EXPECT_STREQ(ccl::log_level_name(LogLevel::warn), "warn");
    EXPECT_STREQ(ccl::log_level_name(LogLevel::error), "error");
    EXPECT_STREQ(ccl::log_level_name(LogLevel::trace), "trace");
}

// Lines say where and when (pid, host, time of day) and, once a communicator has set it, the
// job rank: the first rank set stays.
TEST(Log, LinesNameProcessHostTimeAndTheFirstRankSet) {
    ccl::Logger l(LogLevel::info);
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    testing::internal::CaptureStderr();
    l.info("before");
    ccl::log_rank(3);
    ccl::log_rank(5);
    l.info("after");
    std::string out = testing::internal::GetCapturedStderr();
    const std::regex line(std::string(R"(\[ccl I )") + std::to_string(getpid()) + " " + host +
                          R"( \d\d:\d\d:\d\d\.\d\d\d( rank 3)?\] (before|after))");
    EXPECT_TRUE(std::regex_search(out, line)) << out;
    EXPECT_NE(out.find(" rank 3] after"), std::string::npos) << out;
    EXPECT_EQ(out.find("rank 5"), std::string::npos) << out;
}
