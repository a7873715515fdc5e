// The rank's team (base/team.h) and the data path's split copies and reductions over it.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <vector>

#include "base/reduce.h"
#include "base/team.h"
#include "shm/copy.h"

namespace {

// Every test leaves the process as it started: no team.
class Team : public ::testing::TestWithParam<int> {
protected:
    void SetUp() override { ccl::team_configure(GetParam()); }
    void TearDown() override { ccl::team_configure(1); }
};
INSTANTIATE_TEST_SUITE_P(Threads, Team, ::testing::Values(1, 2, 3, 8),
                         [](const auto& info) { return std::to_string(info.param); });

TEST_P(Team, SizeIsWhatWasAsked) { EXPECT_EQ(ccl::team_size(), GetParam()); }

// Every part runs once, jobs posted from several threads at once included; with a team of one,
// on the caller in order.
TEST_P(Team, EveryPartRunsOnce) {
    auto job = [](size_t parts) {
        std::vector<std::atomic<int>> ran(parts);
        ccl::team_run(parts, [&](size_t p) { ran[p].fetch_add(1); });
        for (size_t p = 0; p < parts; ++p) ASSERT_EQ(ran[p].load(), 1) << p << " of " << parts;
    };
    std::vector<std::thread> threads;
    for (int t = 0; t < 3; ++t)
        threads.emplace_back([&] {
            for (size_t parts : {1, 2, 5, 64}) job(parts);
        });
    for (int i = 0; i < 200; ++i) job(size_t(1 + i % 9));
    for (auto& t : threads) t.join();
    if (GetParam() == 1) {
        std::vector<size_t> order;
        ccl::team_run(4, [&](size_t p) { order.push_back(p); });
        EXPECT_EQ(order, (std::vector<size_t>{0, 1, 2, 3}));
    }
}

// A part that throws fails the job on its caller, once every other part has run; the team goes
// on serving later jobs.
TEST_P(Team, AThrowingPartReachesTheCaller) {
    std::atomic<int> ran{0};
    EXPECT_THROW(ccl::team_run(6,
                               [&](size_t p) {
                                   ran.fetch_add(1);
                                   if (p == 3) throw std::runtime_error("part 3");
                               }),
                 std::runtime_error);
    EXPECT_EQ(ran.load(), 6);
    ran = 0;
    ccl::team_run(6, [&](size_t) { ran.fetch_add(1); });
    EXPECT_EQ(ran.load(), 6);
}

// A part may post a job of its own (a split copy inside a split transfer).
TEST_P(Team, PartsMayPostJobs) {
    std::atomic<int> ran{0};
    ccl::team_run(3, [&](size_t) { ccl::team_run(4, [&](size_t) { ran.fetch_add(1); }); });
    EXPECT_EQ(ran.load(), 12);
}

// Jobs after helpers went to sleep (their poll is microseconds) and jobs too small to wake them
// still run whole.
TEST_P(Team, SleepingHelpersStillServe) {
    for (int i = 0; i < 3; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        std::atomic<int> ran{0};
        ccl::team_run(
            8, [&](size_t) { ran.fetch_add(1); }, i % 2 == 0);
        EXPECT_EQ(ran.load(), 8);
    }
}

// team_split covers [0, n) exactly, at multiples of the granule, in at most `parts` ranges.
TEST_P(Team, SplitCoversTheRange) {
    for (size_t n : {0, 1, 15, 16, 17, 1000, 100003})
        for (size_t parts : {1, 2, 3, 7}) {
            std::vector<std::atomic<int>> hit(n);
            ccl::team_split(n, 16, parts, true, [&](size_t p, size_t b, size_t e) {
                ASSERT_LT(p, parts);
                ASSERT_LT(b, e);
                ASSERT_TRUE(b % 16 == 0);
                for (size_t i = b; i < e; ++i) hit[i].fetch_add(1);
            });
            for (size_t i = 0; i < n; ++i) ASSERT_EQ(hit[i].load(), 1) << n << " " << parts;
        }
}

// copy_wide and reduce_wide give what copy_out and reduce give, byte for byte, wherever the
// parts fall: every datatype and reduction, sizes around the part bound, unaligned buffers.
TEST_P(Team, WideCopiesAndReductionsMatch) {
    for (size_t bytes : {size_t(100), 2 * ccl::kTeamPartBytes - 1, 2 * ccl::kTeamPartBytes + 3,
                         ccl::kTeamWakeBytes + 4097, size_t(3) << 20}) {
        std::vector<unsigned char> src(bytes + 3), dst(bytes + 130, 0xee);
        for (size_t i = 0; i < src.size(); ++i) src[i] = (unsigned char)(i * 37 + 11);
        for (bool stream : {false, true}) {
            std::fill(dst.begin(), dst.end(), 0xee);
            ccl::shm::copy_wide(dst.data() + 65, src.data() + 3, bytes, stream);
            ASSERT_EQ(std::memcmp(dst.data() + 65, src.data() + 3, bytes), 0) << bytes;
            for (size_t i = 0; i < 65; ++i) ASSERT_EQ(dst[i], 0xee);
            for (size_t i = 65 + bytes; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xee);
        }
    }
    for (int t = CCL_INT8; t <= CCL_FLOAT64; ++t)
        for (int o = CCL_SUM; o <= CCL_AVG; ++o) {
            const auto dtype = ccl_datatype_t(t);
            const auto op = ccl_reduction_t(o);
            const size_t es = ccl::dtype_size(dtype), count = (size_t(300) << 10) / es + 5;
            std::vector<std::vector<unsigned char>> in(3,
                                                       std::vector<unsigned char>(count * es + 1));
            for (size_t k = 0; k < in.size(); ++k)
                for (size_t i = 0; i < in[k].size(); ++i)
                    in[k][i] = (unsigned char)((i * 13 + k * 7) % 61);  // no NaN or Inf bytes
            const void* srcs[3] = {in[0].data() + 1, in[1].data() + 1, in[2].data() + 1};
            std::vector<unsigned char> want(count * es), got(count * es);
            ccl::reduce(want.data(), srcs, 3, count, dtype, op, 3);
            ccl::reduce_wide(got.data(), srcs, 3, count, dtype, op, 3);
            ASSERT_EQ(std::memcmp(want.data(), got.data(), want.size()), 0)
                << ccl::dtype_name(dtype) << " " << ccl::op_name(op);
        }
}

// A forked child has none of the helpers: it runs jobs on its one thread.
TEST_P(Team, AForkedChildRunsAlone) {
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        int ran = 0;
        ccl::team_run(5, [&](size_t) { ++ran; });
        _exit(ccl::team_size() == 1 && ran == 5 ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

}  // namespace
