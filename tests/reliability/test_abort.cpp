// ccl_comm_abort and ccl_comm_get_async_error, under cclrun. Each test works on communicators of
// its own (made collectively from the environment) and keeps g_comm healthy to synchronise the
// ranks around the failures it causes.
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "../ranks/common.h"

using namespace test;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
}

// Well under the CCL_TIMEOUT these tests run with (30 s): a wait that ends this fast was ended by
// the abort, not by its deadline.
constexpr double kPrompt = 2.0;

ccl_comm_t new_comm() {
    ccl_comm_t c = nullptr;
    EXPECT_EQ(ccl_comm_create_from_env(&c), CCL_SUCCESS) << ccl_last_error();
    return c;
}

void barrier() { ASSERT_EQ(ccl_barrier(g_comm, nullptr), CCL_SUCCESS) << ccl_last_error(); }

// Calls `abort` on another thread after `delay`, joined on destruction.
class AbortLater {
public:
    AbortLater(ccl_comm_t c, std::chrono::milliseconds delay)
        : thread_([this, c, delay] {
              std::this_thread::sleep_for(delay);
              at_ = Clock::now();
              result_ = ccl_comm_abort(c);
          }) {}
    ~AbortLater() { join(); }
    void join() {
        if (thread_.joinable()) thread_.join();
    }
    Clock::time_point at() const { return at_; }
    ccl_result_t result() const { return result_; }

private:
    Clock::time_point at_{};
    ccl_result_t result_ = CCL_ERROR_INTERNAL;
    std::thread thread_;
};

// Rank 0 waits in a call that its peers never make; another thread of rank 0 aborts. The call
// returns CCL_ERROR_ABORTED at once, and the peers' later calls fail with CCL_ERROR_PEER_FAILURE
// (without waiting for a deadline).
template <class Call>
void abort_while_waiting(Call call) {
    if (g_size < 2) GTEST_SKIP() << "needs two ranks";
    ccl_comm_t c = new_comm();
    if (g_rank == 0) {
        AbortLater later(c, std::chrono::milliseconds(300));
        ccl_result_t r = call(c);
        later.join();
        double late = seconds_since(later.at());
        EXPECT_EQ(later.result(), CCL_SUCCESS);
        EXPECT_EQ(r, CCL_ERROR_ABORTED) << ccl_last_error();
        EXPECT_LT(late, kPrompt) << "the call returned " << late << " s after the abort";
        // And again: the communicator stays aborted.
        EXPECT_FAILS(ccl_barrier(c, nullptr), CCL_ERROR_ABORTED, "abort");
    }
    barrier();  // rank 0 has aborted
    if (g_rank != 0) {
        auto t = Clock::now();
        EXPECT_FAILS(ccl_barrier(c, nullptr), CCL_ERROR_PEER_FAILURE, "abort");
        EXPECT_LT(seconds_since(t), kPrompt);
        ccl_result_t async = CCL_SUCCESS;
        CCL_OK(ccl_comm_get_async_error(c, &async));
        EXPECT_EQ(async, CCL_ERROR_PEER_FAILURE);
    }
    CCL_OK(ccl_comm_destroy(c));
    barrier();
}

TEST(Abort, WakesBlockingAllreduce) {
    abort_while_waiting([](ccl_comm_t c) {
        std::vector<float> x(1000, 1.0f);
        return ccl_allreduce(x.data(), x.data(), x.size(), CCL_FLOAT32, CCL_SUM, c, nullptr,
                             nullptr);
    });
}

TEST(Abort, WakesLargeBroadcast) {
    abort_while_waiting([](ccl_comm_t c) {  // several chunks: rank 0 waits for buffer space
        std::vector<float> x(size_t(4) << 20, 1.0f);
        return ccl_broadcast(x.data(), x.size(), CCL_FLOAT32, 0, c, nullptr, nullptr);
    });
}

TEST(Abort, WakesBlockingReceive) {
    abort_while_waiting([](ccl_comm_t c) {
        int32_t v = 0;
        return ccl_recv(&v, 1, CCL_INT32, 1, c, nullptr);
    });
}

TEST(Abort, WakesWaitOnASmallReceive) {
    // Nothing else pending: the receive has no execution until the wait (Communicator::recv_now).
    abort_while_waiting([](ccl_comm_t c) {
        int64_t v = 0;
        ccl_request_t r = nullptr;
        EXPECT_EQ(ccl_recv(&v, 1, CCL_INT64, 1, c, &r), CCL_SUCCESS);
        ccl_result_t result = ccl_wait(r);
        ccl_request_free(r);
        return result;
    });
}

TEST(Abort, WakesWaitOnRequests) {
    // Two nonblocking calls: one a worker waits in, one queued behind it; ccl_wait on both.
    abort_while_waiting([](ccl_comm_t c) {
        std::vector<float> x(1000, 1.0f), y(1000, 2.0f);
        ccl_request_t a = nullptr, b = nullptr;
        EXPECT_EQ(ccl_allreduce(x.data(), x.data(), x.size(), CCL_FLOAT32, CCL_SUM, c, nullptr, &a),
                  CCL_SUCCESS);
        EXPECT_EQ(ccl_broadcast(y.data(), y.size(), CCL_FLOAT32, 0, c, nullptr, &b), CCL_SUCCESS);
        ccl_result_t ra = ccl_wait(a), rb = ccl_wait(b);
        EXPECT_EQ(rb, CCL_ERROR_ABORTED) << ccl_last_error();
        int done = 0;
        EXPECT_EQ(ccl_test(a, &done), CCL_ERROR_ABORTED);
        EXPECT_EQ(done, 1);
        ccl_request_free(a);
        ccl_request_free(b);
        return ra;
    });
}

TEST(Abort, WakesRequestLeftToTheWorker) {
    // Nobody waits: the worker alone is in the collective when the abort comes; the request
    // completes by itself.
    abort_while_waiting([](ccl_comm_t c) {
        std::vector<float> x(1000, 1.0f);
        ccl_request_t a = nullptr;
        EXPECT_EQ(ccl_allreduce(x.data(), x.data(), x.size(), CCL_FLOAT32, CCL_SUM, c, nullptr, &a),
                  CCL_SUCCESS);
        int done = 0;
        ccl_result_t r = CCL_SUCCESS;
        auto until = Clock::now() + std::chrono::seconds(10);
        while (!done && Clock::now() < until) {
            r = ccl_test(a, &done);
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        EXPECT_EQ(done, 1);
        ccl_request_free(a);
        return r;
    });
}

// A watchdog thread gives up on a call that waits: it aborts the communicator and destroys it
// while the main thread is still inside the call. Destroy returns at once; the communicator is
// released when the call, woken by the abort, returns (ccl.h). The handle is gone at once: later
// calls are refused, never run.
TEST(Abort, WatchdogAbortsAndDestroysWhileACallWaits) {
    if (g_size < 2) GTEST_SKIP() << "needs two ranks";
    ccl_comm_t c = new_comm();
    if (g_rank == 0) {
        ccl_result_t aborted = CCL_ERROR_INTERNAL, destroyed = CCL_ERROR_INTERNAL;
        Clock::time_point at{};
        std::thread watchdog([&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(300));
            at = Clock::now();
            aborted = ccl_comm_abort(c);
            destroyed = ccl_comm_destroy(c);
        });
        std::vector<float> x(1000, 1.0f);  // the peers never make this call
        ccl_result_t r =
            ccl_allreduce(x.data(), x.data(), x.size(), CCL_FLOAT32, CCL_SUM, c, nullptr, nullptr);
        watchdog.join();
        EXPECT_EQ(aborted, CCL_SUCCESS);
        EXPECT_EQ(destroyed, CCL_SUCCESS);
        EXPECT_EQ(r, CCL_ERROR_ABORTED) << ccl_last_error();
        EXPECT_LT(seconds_since(at), kPrompt);
        EXPECT_FAILS(ccl_barrier(c, nullptr), CCL_ERROR_INVALID_ARGUMENT, "destroyed");
        EXPECT_FAILS(ccl_comm_destroy(c), CCL_ERROR_INVALID_ARGUMENT, "destroyed");
        EXPECT_FAILS(ccl_comm_abort(c), CCL_ERROR_INVALID_ARGUMENT, "destroyed");
    }
    barrier();
    if (g_rank != 0) {
        EXPECT_FAILS(ccl_barrier(c, nullptr), CCL_ERROR_PEER_FAILURE, "abort");
        CCL_OK(ccl_comm_destroy(c));
    }
    barrier();
}

// Destroy from another thread while a call waits, without an abort: the call goes on and
// completes with its own (right) result once the peers join it; then the communicator is released.
TEST(Abort, DestroyWhileACallWaitsIsDeferred) {
    if (g_size < 2) GTEST_SKIP() << "needs two ranks";
    ccl_comm_t c = new_comm();
    std::vector<int32_t> x(100, g_rank + 1);
    if (g_rank == 0) {
        ccl_result_t destroyed = CCL_ERROR_INTERNAL;
        std::thread other([&] {
            // Until the main thread is inside: a call with a bad datatype is refused for the
            // datatype while nobody is, for the thread inside once it is.
            int32_t probe = 0;
            const auto until = Clock::now() + std::chrono::seconds(20);
            while (Clock::now() < until &&
                   ccl_allreduce(&probe, &probe, 1, ccl_datatype_t(99), CCL_SUM, c, nullptr,
                                 nullptr) != CCL_ERROR_INVALID_USAGE)
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
            destroyed = ccl_comm_destroy(c);
            int32_t go = 1;  // now the peers join the allreduce
            for (int r = 1; r < g_size; ++r)
                EXPECT_EQ(ccl_send(&go, 1, CCL_INT32, r, g_comm, nullptr), CCL_SUCCESS);
        });
        ccl_result_t r;
        do  // refused while the other thread's probe happens to be inside: again
            r = ccl_allreduce(x.data(), x.data(), x.size(), CCL_INT32, CCL_SUM, c, nullptr,
                              nullptr);
        while (r == CCL_ERROR_INVALID_USAGE);
        other.join();
        EXPECT_EQ(destroyed, CCL_SUCCESS) << ccl_last_error();
        EXPECT_EQ(r, CCL_SUCCESS) << ccl_last_error();
        EXPECT_FAILS(ccl_barrier(c, nullptr), CCL_ERROR_INVALID_ARGUMENT, "destroyed");
    } else {
        int32_t go = 0;
        CCL_OK(ccl_recv(&go, 1, CCL_INT32, 0, g_comm, nullptr));
        CCL_OK(
            ccl_allreduce(x.data(), x.data(), x.size(), CCL_INT32, CCL_SUM, c, nullptr, nullptr));
        CCL_OK(ccl_comm_destroy(c));
    }
    EXPECT_EQ(x, std::vector<int32_t>(100, g_size * (g_size + 1) / 2));
    barrier();
}

// After an abort, every call on the communicator fails with CCL_ERROR_ABORTED, on the aborting
// rank, without waiting; abort is idempotent; destroy works.
TEST(Abort, EveryLaterCallIsAborted) {
    ccl_comm_t c = new_comm();
    if (g_rank == 0) {
        CCL_OK(ccl_comm_abort(c));
        CCL_OK(ccl_comm_abort(c));
        auto t = Clock::now();
        std::vector<float> x(64 * size_t(g_size), 1.0f), y(x.size());
        const size_t n = 64;
        EXPECT_FAILS(
            ccl_allreduce(x.data(), y.data(), n, CCL_FLOAT32, CCL_SUM, c, nullptr, nullptr),
            CCL_ERROR_ABORTED, "abort");
        EXPECT_FAILS(ccl_broadcast(x.data(), n, CCL_FLOAT32, 0, c, nullptr, nullptr),
                     CCL_ERROR_ABORTED, "abort");
        EXPECT_FAILS(
            ccl_reduce(x.data(), y.data(), n, CCL_FLOAT32, CCL_SUM, 0, c, nullptr, nullptr),
            CCL_ERROR_ABORTED, "abort");
        EXPECT_FAILS(ccl_allgather(x.data(), y.data(), n, CCL_FLOAT32, c, nullptr, nullptr),
                     CCL_ERROR_ABORTED, "abort");
        EXPECT_FAILS(
            ccl_reduce_scatter(x.data(), y.data(), n, CCL_FLOAT32, CCL_SUM, c, nullptr, nullptr),
            CCL_ERROR_ABORTED, "abort");
        EXPECT_FAILS(ccl_alltoall(x.data(), y.data(), n, CCL_FLOAT32, c, nullptr, nullptr),
                     CCL_ERROR_ABORTED, "abort");
        EXPECT_FAILS(ccl_barrier(c, nullptr), CCL_ERROR_ABORTED, "abort");
        EXPECT_FAILS(ccl_send(x.data(), n, CCL_FLOAT32, 0, c, nullptr), CCL_ERROR_ABORTED, "abort");
        EXPECT_FAILS(ccl_recv(y.data(), n, CCL_FLOAT32, 0, c, nullptr), CCL_ERROR_ABORTED, "abort");
        ccl_comm_t sub = nullptr;
        EXPECT_FAILS(ccl_comm_split(c, 0, 0, &sub), CCL_ERROR_ABORTED, "abort");
        EXPECT_EQ(sub, nullptr);
        // Nonblocking: refused at issue (no request is made).
        ccl_request_t req = nullptr;
        EXPECT_FAILS(ccl_allreduce(x.data(), y.data(), n, CCL_FLOAT32, CCL_SUM, c, nullptr, &req),
                     CCL_ERROR_ABORTED, "abort");
        EXPECT_EQ(req, nullptr);
        // In a group: the group reports it.
        CCL_OK(ccl_group_start());
        EXPECT_EQ(ccl_allreduce(x.data(), y.data(), n, CCL_FLOAT32, CCL_SUM, c, nullptr, nullptr),
                  CCL_SUCCESS);
        EXPECT_FAILS(ccl_group_end(), CCL_ERROR_ABORTED, "abort");
        ccl_result_t async = CCL_SUCCESS;
        CCL_OK(ccl_comm_get_async_error(c, &async));
        EXPECT_EQ(async, CCL_ERROR_ABORTED);
        EXPECT_NE(std::string(ccl_last_error()).find("abort"), std::string::npos)
            << ccl_last_error();
        EXPECT_LT(seconds_since(t), kPrompt);
        // Rank and size still answer.
        int r = -1;
        CCL_OK(ccl_comm_rank(c, &r));
        EXPECT_EQ(r, 0);
    }
    barrier();
    if (g_rank != 0) {  // the peers learn it too
        std::vector<float> x(8, 1.0f);
        EXPECT_FAILS(
            ccl_allreduce(x.data(), x.data(), 8, CCL_FLOAT32, CCL_SUM, c, nullptr, nullptr),
            CCL_ERROR_PEER_FAILURE, "rank 0");
    }
    CCL_OK(ccl_comm_destroy(c));
    EXPECT_FAILS(ccl_comm_abort(c), CCL_ERROR_INVALID_ARGUMENT, "communicator");
    ccl_result_t async = CCL_SUCCESS;
    EXPECT_FAILS(ccl_comm_get_async_error(c, &async), CCL_ERROR_INVALID_ARGUMENT, "communicator");
    EXPECT_FAILS(ccl_comm_abort(nullptr), CCL_ERROR_INVALID_ARGUMENT, "NULL");
    EXPECT_FAILS(ccl_comm_get_async_error(g_comm, nullptr), CCL_ERROR_INVALID_ARGUMENT, "result");
    expect_comm_still_works();
}

// A healthy communicator has no async error, also after many calls.
TEST(AsyncError, NoneWhileHealthy) {
    ccl_result_t async = CCL_ERROR_INTERNAL;
    CCL_OK(ccl_comm_get_async_error(g_comm, &async));
    EXPECT_EQ(async, CCL_SUCCESS);
    expect_comm_still_works();
    CCL_OK(ccl_comm_get_async_error(g_comm, &async));
    EXPECT_EQ(async, CCL_SUCCESS);
}

// A nonblocking call that fails on the progress worker (the ranks disagree on the collective) is
// reported by ccl_comm_get_async_error before anyone waits on its request, on every rank.
TEST(AsyncError, ReportsWorkerFailure) {
    if (g_size < 2) GTEST_SKIP() << "needs two ranks";
    ccl_comm_t c = new_comm();
    std::vector<float> x(100, 1.0f);
    ccl_request_t req = nullptr;
    // With more than two ranks, a rank may issue after a peer already found the mismatch: its
    // call is then refused at once, and the async error says why all the same.
    ccl_result_t issued =
        g_rank == 0
            ? ccl_allreduce(x.data(), x.data(), x.size(), CCL_FLOAT32, CCL_SUM, c, nullptr, &req)
            : ccl_broadcast(x.data(), x.size(), CCL_FLOAT32, 0, c, nullptr, &req);
    if (g_size == 2) {
        EXPECT_EQ(issued, CCL_SUCCESS) << ccl_last_error();
    }
    if (issued != CCL_SUCCESS) {
        EXPECT_EQ(issued, CCL_ERROR_INVALID_USAGE) << ccl_last_error();
        EXPECT_EQ(req, nullptr);
    }
    ccl_result_t async = CCL_SUCCESS;
    auto until = Clock::now() + std::chrono::seconds(10);
    while (async == CCL_SUCCESS && Clock::now() < until) {
        CCL_OK(ccl_comm_get_async_error(c, &async));
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_EQ(async, CCL_ERROR_INVALID_USAGE) << ccl_last_error();
    // Seen here ("collective mismatch") or reported by the peer that saw it ("invalid usage").
    const std::string why = ccl_last_error();
    EXPECT_TRUE(why.find("mismatch") != std::string::npos ||
                why.find("invalid usage") != std::string::npos)
        << why;
    if (req) {
        EXPECT_EQ(ccl_wait(req), CCL_ERROR_INVALID_USAGE) << ccl_last_error();
        CCL_OK(ccl_request_free(req));
    }
    CCL_OK(ccl_comm_destroy(c));
    barrier();
}

// Aborting one communicator leaves the others alone, also when abort races with its user's
// calls on another thread (TSan checks the races).
TEST(Abort, RacesWithCallsOnAnotherThread) {
    ccl_comm_t c = new_comm();
    std::atomic<bool> stop{false};
    std::thread user([&] {
        std::vector<float> x(256, 1.0f);
        while (!stop.load()) {
            ccl_result_t r = ccl_allreduce(x.data(), x.data(), x.size(), CCL_FLOAT32, CCL_SUM, c,
                                           nullptr, nullptr);
            if (r != CCL_SUCCESS) {
                EXPECT_TRUE(r == CCL_ERROR_ABORTED || r == CCL_ERROR_PEER_FAILURE)
                    << ccl_strerror(r) << ": " << ccl_last_error();
                break;
            }
        }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    // Not ASSERT: the thread must be joined whatever happens.
    if (g_rank == g_size - 1) {
        EXPECT_EQ(ccl_comm_abort(c), CCL_SUCCESS) << ccl_last_error();
    }
    // Every rank's loop ends: the aborting rank's at once, the others' through shared memory.
    auto t = Clock::now();
    user.join();
    EXPECT_LT(seconds_since(t), kPrompt);
    stop = true;
    CCL_OK(ccl_comm_destroy(c));
    expect_comm_still_works();
}

}  // namespace
