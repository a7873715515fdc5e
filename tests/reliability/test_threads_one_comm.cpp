// Two threads on one communicator, which ccl.h forbids (a communicator is used by one thread at a
// time): a call made while another thread is inside a call on the same communicator is refused
// with CCL_ERROR_INVALID_USAGE, touches nothing, and leaves the communicator working; the thread
// inside is not disturbed. Destroying a communicator from another thread while a call is inside
// is deferred until that call returns (ccl.h, docs/reliability.md). Run under cclrun, also under
// ThreadSanitizer and AddressSanitizer.
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "../ranks/common.h"

using namespace test;

namespace {

using Clock = std::chrono::steady_clock;

ccl_comm_t new_comm() {
    ccl_comm_t c = nullptr;
    EXPECT_EQ(ccl_comm_create_from_env(&c), CCL_SUCCESS) << ccl_last_error();
    return c;
}

// Returns once another thread is inside a call on `c`: a call with a bad datatype is refused as
// INVALID_ARGUMENT while nobody is inside (and does nothing), as INVALID_USAGE once someone is.
// While it is inside itself, the other thread's call may be refused: that one tries again.
bool wait_until_inside(ccl_comm_t c) {
    const auto until = Clock::now() + std::chrono::seconds(20);
    float x = 0;
    while (Clock::now() < until) {
        ccl_result_t r = ccl_allreduce(&x, &x, 1, ccl_datatype_t(99), CCL_SUM, c, nullptr, nullptr);
        if (r == CCL_ERROR_INVALID_USAGE) return true;
        EXPECT_EQ(r, CCL_ERROR_INVALID_ARGUMENT) << ccl_last_error();
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return false;
}

#define EXPECT_REFUSED(call) EXPECT_FAILS(call, CCL_ERROR_INVALID_USAGE, "another thread")

// While a thread of rank 0 waits inside a receive on `c`, every call of another of its threads on
// `c` is refused at once; abort, the async error, rank and size still answer. Then the receive
// completes (rank 1 sends only now) and the communicator works on every rank.
TEST(OneThreadAtATime, SecondThreadIsRefused) {
    ccl_comm_t c = new_comm();
    if (g_rank == 0) {
        const size_t n = 8 * size_t(g_size);
        std::vector<int32_t> a(n, 1), b(n, 0);
        std::vector<size_t> counts(size_t(g_size), 8);
        // A group recorded before the other thread gets inside: its end, which would issue the
        // calls, is refused for them.
        ccl_request_t grouped = nullptr;
        CCL_OK(ccl_group_start());
        CCL_OK(ccl_allreduce(a.data(), b.data(), 8, CCL_INT32, CCL_SUM, c, nullptr, nullptr));
        CCL_OK(ccl_allreduce(a.data(), b.data(), 8, CCL_INT32, CCL_SUM, c, nullptr, &grouped));
        int32_t got = -1;
        ccl_result_t received = CCL_ERROR_INTERNAL;
        std::thread inside([&] {
            // At one rank nobody sends: the abort below ends it. Refused while the probe below
            // happens to be inside: again.
            do received = ccl_recv(&got, 1, CCL_INT32, g_size > 1 ? 1 : 0, c, nullptr);
            while (received == CCL_ERROR_INVALID_USAGE);
        });
        EXPECT_TRUE(wait_until_inside(c)) << "the receiving thread never got inside";
        EXPECT_REFUSED(ccl_group_end());
        ASSERT_NE(grouped, nullptr);
        EXPECT_REFUSED(ccl_wait(grouped));
        CCL_OK(ccl_request_free(grouped));
        EXPECT_REFUSED(
            ccl_allreduce(a.data(), b.data(), 8, CCL_INT32, CCL_SUM, c, nullptr, nullptr));
        EXPECT_REFUSED(ccl_broadcast(a.data(), 8, CCL_INT32, 0, c, nullptr, nullptr));
        EXPECT_REFUSED(
            ccl_reduce(a.data(), b.data(), 8, CCL_INT32, CCL_SUM, 0, c, nullptr, nullptr));
        EXPECT_REFUSED(ccl_allgather(a.data(), b.data(), 8, CCL_INT32, c, nullptr, nullptr));
        EXPECT_REFUSED(
            ccl_allgatherv(a.data(), 8, b.data(), counts.data(), CCL_INT32, c, nullptr, nullptr));
        EXPECT_REFUSED(
            ccl_reduce_scatter(a.data(), b.data(), 8, CCL_INT32, CCL_SUM, c, nullptr, nullptr));
        EXPECT_REFUSED(ccl_alltoall(a.data(), b.data(), 8, CCL_INT32, c, nullptr, nullptr));
        EXPECT_REFUSED(ccl_alltoallv(a.data(), counts.data(), b.data(), counts.data(), CCL_INT32, c,
                                     nullptr, nullptr));
        EXPECT_REFUSED(ccl_barrier(c, nullptr));
        EXPECT_REFUSED(ccl_send(a.data(), 1, CCL_INT32, 0, c, nullptr));
        EXPECT_REFUSED(ccl_recv(b.data(), 1, CCL_INT32, 0, c, nullptr));
        ccl_request_t req = nullptr;
        EXPECT_REFUSED(ccl_allreduce(a.data(), b.data(), 8, CCL_INT32, CCL_SUM, c, nullptr, &req));
        EXPECT_REFUSED(ccl_send(a.data(), 1, CCL_INT32, 0, c, &req));
        EXPECT_REFUSED(ccl_recv(b.data(), 1, CCL_INT32, 0, c, &req));
        EXPECT_EQ(req, nullptr);
        ccl_comm_t sub = nullptr;
        EXPECT_REFUSED(ccl_comm_split(c, 0, 0, &sub));
        EXPECT_EQ(sub, nullptr);
        // Calls in a group are refused too (not recorded).
        CCL_OK(ccl_group_start());
        EXPECT_REFUSED(ccl_allreduce(a.data(), b.data(), 8, CCL_INT32, CCL_SUM, c, nullptr, &req));
        CCL_OK(ccl_group_end());
        EXPECT_EQ(req, nullptr);
        EXPECT_EQ(b, std::vector<int32_t>(n, 0)) << "a refused call wrote into its buffer";
        // Any thread, any time.
        int v = -1;
        CCL_OK(ccl_comm_rank(c, &v));
        CCL_OK(ccl_comm_size(c, &v));
        ccl_result_t async = CCL_ERROR_INTERNAL;
        CCL_OK(ccl_comm_get_async_error(c, &async));
        EXPECT_EQ(async, CCL_SUCCESS) << "a refused call broke the communicator";
        if (g_size == 1) {
            CCL_OK(ccl_comm_abort(c));
        } else {
            int32_t go = 1;  // rank 1 may send now
            CCL_OK(ccl_send(&go, 1, CCL_INT32, 1, g_comm, nullptr));
        }
        inside.join();
        if (g_size == 1) {
            EXPECT_EQ(received, CCL_ERROR_ABORTED);
        } else {
            EXPECT_EQ(received, CCL_SUCCESS) << ccl_last_error();
            EXPECT_EQ(got, 42);
        }
    } else if (g_rank == 1) {
        int32_t go = 0, v = 42;
        CCL_OK(ccl_recv(&go, 1, CCL_INT32, 0, g_comm, nullptr));
        CCL_OK(ccl_send(&v, 1, CCL_INT32, 0, c, nullptr));
    }
    if (g_size > 1) expect_comm_still_works(c);
    CCL_OK(ccl_comm_destroy(c));
    expect_comm_still_works();
}

// Threads that race for one communicator: every call either runs alone, with the right result,
// or is refused (some are); none is silently corrupted. At one rank, where a refusal cannot leave
// the ranks with different calls.
TEST(OneThreadAtATime, RacingThreadsRunAloneOrAreRefused) {
    if (g_size != 1) GTEST_SKIP() << "one rank: refusals would leave several ranks out of step";
    ccl_comm_t c = new_comm();
    std::atomic<int> ran{0}, refused{0}, wrong{0}, other{0}, started{0};
    auto hammer = [&](int t) {
        std::vector<int32_t> x(64 + size_t(t) * 1000), y(x.size());
        // All at once, and on for a while: calls of a microsecond end before a thread starts.
        ++started;
        while (started.load() < 3) std::this_thread::yield();
        const auto until = Clock::now() + std::chrono::milliseconds(300);
        for (int it = 0; Clock::now() < until; ++it) {
            for (size_t i = 0; i < x.size(); ++i) x[i] = int32_t(i) * 3 + t + it;
            ccl_request_t req = nullptr;
            ccl_result_t r = ccl_allreduce(x.data(), y.data(), x.size(), CCL_INT32, CCL_SUM, c,
                                           nullptr, it % 4 == 3 ? &req : nullptr);
            if (r == CCL_SUCCESS && req) {
                r = ccl_wait(req);
                ccl_request_free(req);
            }
            if (r == CCL_ERROR_INVALID_USAGE) {
                ++refused;
                continue;
            }
            if (r != CCL_SUCCESS) {
                ++other;
                continue;
            }
            ++ran;
            for (size_t i = 0; i < x.size(); ++i)
                if (y[i] != x[i]) {
                    ++wrong;
                    break;
                }
        }
    };
    std::thread t1(hammer, 1), t2(hammer, 2);
    hammer(0);
    t1.join();
    t2.join();
    EXPECT_EQ(wrong.load(), 0) << ran.load() << " calls ran, " << refused.load() << " refused";
    EXPECT_EQ(other.load(), 0);
    EXPECT_GT(ran.load(), 0);
    // Three threads calling on one communicator for 0.3 s overlap: without the refusals nothing
    // here would tell that they did.
    EXPECT_GT(refused.load(), 0) << "no call was refused: concurrent entry went unseen";
    ccl_result_t async = CCL_ERROR_INTERNAL;
    CCL_OK(ccl_comm_get_async_error(c, &async));
    EXPECT_EQ(async, CCL_SUCCESS);
    CCL_OK(ccl_comm_destroy(c));
}

// A thread destroys the communicator while another loops on calls: each call runs (rightly) or is
// refused, as racing with the destroy or as destroyed, and nothing touches freed memory
// (AddressSanitizer). One rank: the destroyed communicator's peers would wait for calls never made.
TEST(OneThreadAtATime, DestroyRacesWithCalls) {
    if (g_size != 1) GTEST_SKIP() << "one rank";
    for (int round = 0; round < 20; ++round) {
        ccl_comm_t c = new_comm();
        std::atomic<bool> destroyed{false};
        std::atomic<int> wrong{0};
        std::thread user([&] {
            std::vector<float> x(256), y(256);
            while (true) {
                for (size_t i = 0; i < x.size(); ++i) x[i] = float(i);
                ccl_result_t r = ccl_allreduce(x.data(), y.data(), x.size(), CCL_FLOAT32, CCL_SUM,
                                               c, nullptr, nullptr);
                if (r == CCL_SUCCESS) {
                    if (y != x) ++wrong;
                } else if (r == CCL_ERROR_INVALID_ARGUMENT) {
                    break;  // destroyed
                } else if (r != CCL_ERROR_INVALID_USAGE) {
                    ++wrong;
                    break;
                }
            }
            destroyed = true;
        });
        std::this_thread::sleep_for(std::chrono::microseconds(200 * round));
        // At once, or, with a call inside, when that call returns.
        EXPECT_EQ(ccl_comm_destroy(c), CCL_SUCCESS) << ccl_last_error();
        user.join();
        EXPECT_TRUE(destroyed.load());
        EXPECT_EQ(wrong.load(), 0);
    }
}

}  // namespace
