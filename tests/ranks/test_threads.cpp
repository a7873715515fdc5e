// Threads: several communicators, created one at a time in the same order on every rank, each used
// concurrently from its own thread (blocking and nonblocking calls); requests started on one thread
// and waited, tested or freed on another; groups belong to their thread. Meant to run under TSan
// too: the threads share only ccl handles, and each reports through its own result slot.
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "common.h"

using namespace test;

namespace {

// Each thread reports its first failure here; the main thread turns it into a test failure
// (gtest assertions stay on the main thread).
struct ThreadResult {
    std::string error;
    void fail(const std::string& what) {
        if (error.empty()) error = what;
    }
};

std::string describe(const char* call, ccl_result_t r) {
    return std::string(call) + ": " + ccl_strerror(r) + ": " + ccl_last_error();
}

// The value of rank r, element i, communicator c, iteration it: small integers, exact in float.
int32_t val(int r, size_t i, int c, int it) { return (r + 1) * (c + 2) + int32_t(i % 5) + it; }
int32_t sum_all(size_t i, int c, int it) {
    int32_t s = 0;
    for (int r = 0; r < g_size; ++r) s += val(r, i, c, it);
    return s;
}

constexpr int kComms = 3;
constexpr int kIters = 200;

// One thread's work on its own communicator: allreduces (blocking and, every few iterations,
// nonblocking), broadcasts from a moving root, an occasional barrier. Then it destroys it.
void comm_worker(ccl_comm_t comm, int c, ThreadResult* out) {
    std::vector<int32_t> a(3 + size_t(c) * 5);
    std::vector<float> f(1000 + size_t(c) * 20000);
    std::vector<int64_t> b(17);
    for (int it = 0; it < kIters && out->error.empty(); ++it) {
        for (size_t i = 0; i < a.size(); ++i) a[i] = val(g_rank, i, c, it);
        ccl_result_t r =
            ccl_allreduce(a.data(), a.data(), a.size(), CCL_INT32, CCL_SUM, comm, nullptr, nullptr);
        if (r != CCL_SUCCESS) {
            out->fail(describe("allreduce", r));
            break;
        }
        for (size_t i = 0; i < a.size(); ++i)
            if (a[i] != sum_all(i, c, it)) {
                out->fail("comm " + std::to_string(c) + " iteration " + std::to_string(it) +
                          ": allreduce element " + std::to_string(i) + " is " +
                          std::to_string(a[i]) + ", want " + std::to_string(sum_all(i, c, it)));
                break;
            }

        const int root = (it + c) % g_size;
        for (size_t i = 0; i < b.size(); ++i)
            b[i] = g_rank == root ? int64_t(c) * 1000000 + it * 100 + int64_t(i) : -1;
        ccl_request_t breq = nullptr;
        const bool nonblocking = it % 4 == 1;
        if (nonblocking) {
            // A larger nonblocking allreduce overlapping the broadcast's issue.
            for (size_t i = 0; i < f.size(); ++i) f[i] = float(val(g_rank, i, c, it));
            ccl_request_t freq = nullptr;
            r = ccl_allreduce(f.data(), f.data(), f.size(), CCL_FLOAT32, CCL_SUM, comm, nullptr,
                              &freq);
            if (r != CCL_SUCCESS) {
                out->fail(describe("nonblocking allreduce", r));
                break;
            }
            r = ccl_broadcast(b.data(), b.size(), CCL_INT64, root, comm, nullptr, &breq);
            if (r == CCL_SUCCESS) r = ccl_wait(breq);
            if (r == CCL_SUCCESS) r = ccl_request_free(breq);
            ccl_result_t rf = ccl_wait(freq);
            if (rf == CCL_SUCCESS) rf = ccl_request_free(freq);
            if (r != CCL_SUCCESS || rf != CCL_SUCCESS) {
                out->fail(describe("nonblocking broadcast/wait", r != CCL_SUCCESS ? r : rf));
                break;
            }
            for (size_t i = 0; i < f.size(); ++i)
                if (f[i] != float(sum_all(i, c, it))) {
                    out->fail("comm " + std::to_string(c) + " iteration " + std::to_string(it) +
                              ": nonblocking allreduce element " + std::to_string(i));
                    break;
                }
        } else {
            r = ccl_broadcast(b.data(), b.size(), CCL_INT64, root, comm, nullptr, nullptr);
            if (r != CCL_SUCCESS) {
                out->fail(describe("broadcast", r));
                break;
            }
        }
        for (size_t i = 0; i < b.size(); ++i)
            if (b[i] != int64_t(c) * 1000000 + it * 100 + int64_t(i)) {
                out->fail("comm " + std::to_string(c) + " iteration " + std::to_string(it) +
                          ": broadcast element " + std::to_string(i));
                break;
            }
        if (it % 50 == 0) {
            r = ccl_barrier(comm, nullptr);
            if (r != CCL_SUCCESS) out->fail(describe("barrier", r));
        }
    }
    // Destroyed by its own thread, concurrently with the other communicators' work.
    ccl_result_t r = ccl_comm_destroy(comm);
    if (r != CCL_SUCCESS) out->fail(describe("destroy", r));
}

TEST(Threads, OneCommunicatorPerThread) {
    for (int round = 0; round < 2; ++round) {
        ccl_comm_t comms[kComms] = {};
        for (int c = 0; c < kComms; ++c) CCL_OK(ccl_comm_create_from_env(&comms[c]));
        ThreadResult results[kComms];
        std::vector<std::thread> threads;
        for (int c = 0; c < kComms; ++c)
            threads.emplace_back(comm_worker, comms[c], c, &results[c]);
        for (auto& t : threads) t.join();
        for (int c = 0; c < kComms; ++c)
            EXPECT_EQ(results[c].error, "") << "round " << round << ", communicator " << c;
        if (HasFailure()) break;  // a hang found once need not cost another CCL_TIMEOUT
    }
    int v = 1;
    CCL_OK(ccl_allreduce(&v, &v, 1, CCL_INT32, CCL_SUM, g_comm, nullptr, nullptr));
    EXPECT_EQ(v, g_size);
}

// Requests started by the main thread, completed by others: one thread waits and frees, another
// polls with ccl_test, each on its own requests.
TEST(Threads, RequestsHandledByAnotherThread) {
    const int n = 40;
    std::vector<std::vector<int32_t>> bufs(n);
    std::vector<ccl_request_t> reqs(n, nullptr);
    for (int j = 0; j < n; ++j) {
        bufs[size_t(j)].resize(1 + size_t(j) * 100);
        for (size_t i = 0; i < bufs[size_t(j)].size(); ++i)
            bufs[size_t(j)][i] = val(g_rank, i, 7, j);
        CCL_OK(ccl_allreduce(bufs[size_t(j)].data(), bufs[size_t(j)].data(), bufs[size_t(j)].size(),
                             CCL_INT32, CCL_SUM, g_comm, nullptr, &reqs[size_t(j)]));
    }
    ThreadResult waiter, tester;
    // Even requests: waited and freed.
    std::thread tw([&] {
        for (int j = 0; j < n; j += 2) {
            ccl_result_t r = ccl_wait(reqs[size_t(j)]);
            if (r == CCL_SUCCESS) r = ccl_request_free(reqs[size_t(j)]);
            if (r != CCL_SUCCESS) waiter.fail(describe("wait/free", r));
        }
    });
    // Odd requests: polled to completion (for at most 30 s each: a bound against a hang), then
    // freed.
    std::thread tt([&] {
        for (int j = 1; j < n; j += 2) {
            int done = 0;
            auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
            while (!done) {
                ccl_result_t r = ccl_test(reqs[size_t(j)], &done);
                if (r != CCL_SUCCESS) {
                    tester.fail(describe("test", r));
                    return;
                }
                if (std::chrono::steady_clock::now() > deadline) {
                    tester.fail("request " + std::to_string(j) + " never completed");
                    return;
                }
                std::this_thread::yield();
            }
            ccl_result_t r = ccl_request_free(reqs[size_t(j)]);
            if (r != CCL_SUCCESS) tester.fail(describe("free", r));
        }
    });
    tw.join();
    tt.join();
    EXPECT_EQ(waiter.error, "");
    EXPECT_EQ(tester.error, "");
    // Joining the threads ordered their completion observations before these reads.
    for (int j = 0; j < n; ++j)
        for (size_t i = 0; i < bufs[size_t(j)].size(); ++i)
            if (bufs[size_t(j)][i] != sum_all(i, 7, j)) {
                ADD_FAILURE() << "request " << j << " element " << i;
                break;
            }
}

// A request started on a thread that then exits is still waited on fine by the main thread.
TEST(Threads, RequestOutlivesItsThread) {
    std::vector<float> buf(5000);
    for (size_t i = 0; i < buf.size(); ++i) buf[i] = float(val(g_rank, i, 8, 0));
    ccl_request_t req = nullptr;
    ccl_result_t started = CCL_ERROR_INTERNAL;
    std::thread t([&] {
        started = ccl_allreduce(buf.data(), buf.data(), buf.size(), CCL_FLOAT32, CCL_SUM, g_comm,
                                nullptr, &req);
    });
    t.join();
    ASSERT_EQ(started, CCL_SUCCESS);
    CCL_OK(ccl_wait(req));
    CCL_OK(ccl_request_free(req));
    for (size_t i = 0; i < buf.size(); ++i)
        if (buf[i] != float(sum_all(i, 8, 0))) {
            ADD_FAILURE() << "element " << i;
            break;
        }
}

// Groups belong to the calling thread: an open group on the main thread does not capture another
// thread's calls, and another thread cannot end it.
TEST(Threads, GroupsArePerThread) {
    ccl_comm_t other = nullptr;
    CCL_OK(ccl_comm_create_from_env(&other));
    int32_t mine = g_rank + 1;
    CCL_OK(ccl_group_start());
    CCL_OK(ccl_allreduce(&mine, &mine, 1, CCL_INT32, CCL_SUM, g_comm, nullptr, nullptr));
    ccl_result_t end_elsewhere = CCL_SUCCESS, call_elsewhere = CCL_ERROR_INTERNAL;
    int32_t theirs = g_rank + 1;
    std::thread t([&] {
        end_elsewhere = ccl_group_end();  // this thread has no group open
        call_elsewhere =
            ccl_allreduce(&theirs, &theirs, 1, CCL_INT32, CCL_MAX, other, nullptr, nullptr);
    });
    t.join();
    EXPECT_EQ(end_elsewhere, CCL_ERROR_INVALID_USAGE);
    EXPECT_EQ(call_elsewhere, CCL_SUCCESS);
    EXPECT_EQ(theirs, g_size) << "the other thread's blocking call did not run at once";
    EXPECT_EQ(mine, g_rank + 1) << "the group was issued early";
    CCL_OK(ccl_group_end());
    EXPECT_EQ(mine, g_size * (g_size + 1) / 2);
    CCL_OK(ccl_comm_destroy(other));
}

// ccl_last_error is per thread: two threads failing in different ways at once each read their
// own message.
TEST(Threads, LastErrorIsPerThread) {
    ThreadResult results[2];
    auto body = [](int which, ThreadResult* out) {
        int b = 0, c = 0;
        for (int i = 0; i < 2000; ++i) {
            ccl_result_t r = which == 0 ? ccl_get_version(nullptr, &b, &c) : ccl_wait(nullptr);
            std::string msg = ccl_last_error();
            if (r != CCL_ERROR_INVALID_ARGUMENT ||
                msg.find(which == 0 ? "major" : "request") == std::string::npos) {
                out->fail("iteration " + std::to_string(i) + ": " + ccl_strerror(r) + ": " + msg);
                return;
            }
        }
    };
    std::thread t0(body, 0, &results[0]), t1(body, 1, &results[1]);
    t0.join();
    t1.join();
    EXPECT_EQ(results[0].error, "");
    EXPECT_EQ(results[1].error, "");
}

}  // namespace
