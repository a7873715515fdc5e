// The single-copy probe and large transfers in slices (shm/cma.h); the bounds chosen from the
// probe: test_planner.cpp.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "base/team.h"
#include "shm/cma.h"

TEST(Cma, ProbeTimesAReadOrFails) {
    const uint64_t word = 42;
    double ns = ccl::shm::cma_probe(getpid(), &word, sizeof word);
    if (ns < 0) GTEST_SKIP() << "process_vm_readv is not allowed here";
    EXPECT_GT(ns, 0);
    EXPECT_LT(ns, 1e8);
    EXPECT_LT(ccl::shm::cma_probe(getpid(), nullptr, sizeof word), 0);  // a bad address fails
}

// The rank's team of `threads` (base/team.h) and transfers cut at `slice`.
void team_of(int threads, size_t slice) {
    ccl::team_configure(threads);
    ccl::shm::cma_slice(slice);
}

// The tests of threaded transfers: skipped where single copy is not allowed; each leaves
// transfers on one thread again, as the process started, however it ends.
class CmaThreads : public ::testing::Test {
protected:
    void SetUp() override {
        const uint64_t probe = 42;
        if (ccl::shm::cma_probe(getpid(), &probe, sizeof probe) < 0)
            GTEST_SKIP() << "process_vm_readv is not allowed here";
    }
    void TearDown() override { team_of(1, 2u << 20); }
};
class CmaTeam : public CmaThreads, public ::testing::WithParamInterface<int> {};
INSTANTIATE_TEST_SUITE_P(Threads, CmaTeam, ::testing::Values(2, 4),
                         [](const auto& info) { return std::to_string(info.param); });

// Large transfers in parts on the team's threads: every byte arrives, wherever the slice
// boundaries fall (or the pages, with fewer slices than parts), with several transfers at once;
// nothing outside the range is touched.
TEST_P(CmaTeam, SlicedTransfersCopyEveryByte) {
    team_of(GetParam(), 4096);
    auto check = [](unsigned seed) {
        for (size_t bytes : {size_t(0), size_t(1), size_t(4097), size_t(8191), size_t(8192),
                             size_t(3 * 4096 + 17), size_t(1 << 20) + 123}) {
            for (size_t skew : {size_t(0), size_t(1), size_t(4095)}) {
                std::vector<unsigned char> src(bytes + skew + 64), dst(bytes + 128, 0xee);
                for (size_t i = 0; i < src.size(); ++i) src[i] = (unsigned char)(i * 131 + seed);
                unsigned char* from = src.data() + skew;
                ccl::shm::cma_read(ccl::this_process(), dst.data() + 64, from, bytes);
                for (size_t i = 0; i < bytes; ++i)
                    ASSERT_EQ(dst[64 + i], from[i]) << "read " << bytes << " at " << i;
                for (size_t i = 0; i < 64; ++i) ASSERT_EQ(dst[i], 0xee);
                for (size_t i = 64 + bytes; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xee);
                std::fill(dst.begin(), dst.end(), 0xee);
                ccl::shm::cma_write(ccl::this_process(), dst.data() + 64, from, bytes);
                for (size_t i = 0; i < bytes; ++i)
                    ASSERT_EQ(dst[64 + i], from[i]) << "write " << bytes << " at " << i;
                for (size_t i = 64 + bytes; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xee);
            }
        }
    };
    std::vector<std::thread> threads;
    for (unsigned t = 0; t < 3; ++t) threads.emplace_back(check, t);
    check(7);
    for (auto& t : threads) t.join();
}

// Transfers shorter than two slices but of two parts (1 MiB) or more go in parts cut at pages.
TEST_P(CmaTeam, ShortTransfersCutAtPages) {
    team_of(GetParam(), 2u << 20);
    for (size_t bytes : {size_t(2) << 20, (size_t(3) << 20) + 4095}) {
        std::vector<unsigned char> src(bytes + 100), dst(bytes + 128, 0xee);
        for (size_t i = 0; i < src.size(); ++i) src[i] = (unsigned char)(i * 29 + 3);
        ccl::shm::cma_read(ccl::this_process(), dst.data() + 64, src.data() + 77, bytes);
        ASSERT_EQ(std::memcmp(dst.data() + 64, src.data() + 77, bytes), 0) << bytes;
        for (size_t i = 0; i < 64; ++i) ASSERT_EQ(dst[i], 0xee);
        for (size_t i = 64 + bytes; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xee);
    }
}

// A slice that fails (here: a page in the middle is not mapped) fails the whole transfer with
// the system's reason, on the calling thread; the helpers go on serving later transfers.
TEST_P(CmaTeam, SlicedTransferFailureIsReported) {
    team_of(GetParam(), 4096);
    const size_t page = 4096, bytes = 8 * page;
    void* map = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(map, MAP_FAILED);
    char* src = static_cast<char*>(map);
    std::memset(src, 1, bytes);
    ASSERT_EQ(munmap(src + 5 * page, page), 0);
    std::vector<char> dst(bytes);
    try {
        ccl::shm::cma_read(ccl::this_process(), dst.data(), src, bytes);
        ADD_FAILURE() << "a read over an unmapped page succeeded";
    } catch (const ccl::Error& e) {
        EXPECT_EQ(e.code(), CCL_ERROR_SYSTEM);
        EXPECT_NE(std::string(e.what()).find("process_vm_readv"), std::string::npos) << e.what();
    }
    ccl::shm::cma_read(ccl::this_process(), dst.data(), src,
                       5 * page);  // before the hole: fine
    EXPECT_EQ(dst[5 * page - 1], 1);
    munmap(src, 5 * page);
    munmap(src + 6 * page, 2 * page);
}

// Reads from several places at once (cma_read_all): on two threads when they add up to
// kParallelReads and none is cut into slices, else one after another; every block lands where
// asked, and a failing one fails the call.
TEST_F(CmaThreads, ReadAllCopiesEveryBlock) {
    for (size_t slice : {size_t(1) << 30, size_t(4096)}) {  // two threads; then slices instead
        team_of(3, slice);
        const size_t sizes[] = {300000, 1, 0, 500001, 4096, 400000};
        std::vector<std::vector<unsigned char>> src, dst;
        std::vector<ccl::shm::CmaRead> reads;
        size_t total = 0;
        for (size_t b : sizes) {
            src.emplace_back(b + 7);
            dst.emplace_back(b + 64, 0xee);
            for (size_t i = 0; i < src.back().size(); ++i)
                src.back()[i] = (unsigned char)(i * 7 + b);
            reads.push_back({ccl::this_process(), dst.back().data(), src.back().data() + 7, b});
            total += b;
        }
        ASSERT_GE(total, ccl::shm::kParallelReads);
        ccl::shm::cma_read_all(reads.data(), reads.size());
        for (size_t k = 0; k < reads.size(); ++k) {
            for (size_t i = 0; i < sizes[k]; ++i) ASSERT_EQ(dst[k][i], src[k][7 + i]) << k;
            for (size_t i = sizes[k]; i < dst[k].size(); ++i) ASSERT_EQ(dst[k][i], 0xee) << k;
        }
        reads[3].remote = nullptr;  // a bad address
        EXPECT_THROW(ccl::shm::cma_read_all(reads.data(), reads.size()), ccl::Error);
    }
}

// Two functions at once (cma_beside): both run to the end, on two threads where transfers are
// threaded, else one after the other in the order given; an exception of either reaches the
// caller (threaded: once both have ended).
TEST_F(CmaThreads, BesideRunsBothAndRethrows) {
    for (int threads : {1, 3}) {
        team_of(threads, 4096);
        std::vector<int> order;
        std::mutex m;
        std::atomic<int> ran{0};
        auto note = [&](int which) {
            std::lock_guard lock(m);
            order.push_back(which);
            ++ran;
        };
        ccl::shm::cma_beside([&] { note(1); }, [&] { note(2); });
        EXPECT_EQ(ran.load(), 2);
        if (threads == 1) {
            EXPECT_EQ(order, (std::vector<int>{1, 2}));
        }
        std::atomic<bool> other_ended{false};
        EXPECT_THROW(ccl::shm::cma_beside([&] { other_ended = true; },
                                          [] { throw ccl::Error(CCL_ERROR_SYSTEM, "second"); }),
                     ccl::Error);
        EXPECT_TRUE(other_ended.load());
        EXPECT_THROW(ccl::shm::cma_beside([] { throw ccl::Error(CCL_ERROR_SYSTEM, "first"); },
                                          [&] { other_ended = false; }),
                     ccl::Error);
        if (threads > 1) {
            EXPECT_FALSE(other_ended.load());  // the second still ran
        }
    }
}
