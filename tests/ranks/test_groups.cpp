// Group calls (ccl_group_start / ccl_group_end): calls in a group are only recorded, then issued
// together by the outermost ccl_group_end (small allreduces fused); blocking ones are done when it
// returns, nonblocking ones complete through their requests. Nesting, empty groups, unbalanced
// ends, bad arguments inside a group, many tiny allreduces and a large one.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common.h"

using namespace test;

namespace {

// Small integer values: exact in every type used below, for any order of summation over 8 ranks.
int64_t val(int r, size_t i, int k) { return (r + 1) * 2 + int64_t(i % 11) - 5 + k % 7; }
int64_t sum_all(size_t i, int k) {
    int64_t s = 0;
    for (int r = 0; r < g_size; ++r) s += val(r, i, k);
    return s;
}
int64_t max_all(size_t i, int k) { return val(g_size - 1, i, k); }
int64_t min_all(size_t i, int k) { return val(0, i, k); }

template <class T>
std::vector<T> fill(size_t n, int k) {
    std::vector<T> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = T(val(g_rank, i, k));
    return v;
}

// Counts elements of v that differ from want(i) (reports the first).
template <class T, class F>
size_t wrong(const std::vector<T>& v, F want, const std::string& what) {
    size_t n = 0;
    for (size_t i = 0; i < v.size(); ++i)
        if (v[i] != T(want(i)) && n++ == 0)
            ADD_FAILURE() << what << ": element " << i << " of " << v.size() << " is "
                          << double(v[i]) << ", want " << double(T(want(i)));
    return n;
}

std::vector<int32_t> bcast_data(int root, size_t n, int k) {
    std::vector<int32_t> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = root * 100000 + int32_t(i) * 3 + k;
    return v;
}

// Several small allreduces (types, reductions, sizes, in place or not) and a broadcast, blocking:
// recorded only until ccl_group_end, right after it.
TEST(Groups, BlockingMixedCalls) {
    for (int k = 0; k < 5; ++k) {
        auto a = fill<float>(5, k);
        std::vector<float> a_out(5, -99.0f);
        auto b = fill<double>(7, k);  // in place
        auto c = fill<int8_t>(3, k);
        std::vector<int8_t> c_out(3, 99);
        auto d = fill<int32_t>(1000, k);  // in place
        auto e = fill<int64_t>(1, k);
        std::vector<int64_t> e_out(1, -99);
        const int root = k % g_size;
        auto want_bc = bcast_data(root, 50, k);
        std::vector<int32_t> bc = g_rank == root ? want_bc : std::vector<int32_t>(50, -1);
        auto f = fill<uint16_t>(9, k + 100);  // after the broadcast: not adjacent to the others

        CCL_OK(ccl_group_start());
        CCL_OK(ccl_allreduce(a.data(), a_out.data(), a.size(), CCL_FLOAT32, CCL_SUM, g_comm,
                             nullptr, nullptr));
        CCL_OK(ccl_allreduce(b.data(), b.data(), b.size(), CCL_FLOAT64, CCL_MAX, g_comm, nullptr,
                             nullptr));
        CCL_OK(ccl_allreduce(c.data(), c_out.data(), c.size(), CCL_INT8, CCL_MIN, g_comm, nullptr,
                             nullptr));
        CCL_OK(ccl_allreduce(d.data(), d.data(), d.size(), CCL_INT32, CCL_SUM, g_comm, nullptr,
                             nullptr));
        CCL_OK(ccl_allreduce(e.data(), e_out.data(), e.size(), CCL_INT64, CCL_MAX, g_comm, nullptr,
                             nullptr));
        CCL_OK(ccl_broadcast(bc.data(), bc.size(), CCL_INT32, root, g_comm, nullptr, nullptr));
        CCL_OK(ccl_allreduce(f.data(), f.data(), f.size(), CCL_UINT16, CCL_SUM, g_comm, nullptr,
                             nullptr));
        CCL_OK(ccl_barrier(g_comm, nullptr));
        // Only recorded so far.
        EXPECT_EQ(a_out, std::vector<float>(5, -99.0f)) << "ran before ccl_group_end";
        EXPECT_EQ(c_out, std::vector<int8_t>(3, 99)) << "ran before ccl_group_end";
        CCL_OK(ccl_group_end());

        EXPECT_EQ(wrong(
                      a_out, [&](size_t i) { return sum_all(i, k); }, "float32 sum"),
                  0u);
        EXPECT_EQ(wrong(
                      b, [&](size_t i) { return max_all(i, k); }, "float64 max"),
                  0u);
        EXPECT_EQ(wrong(
                      c_out, [&](size_t i) { return min_all(i, k); }, "int8 min"),
                  0u);
        EXPECT_EQ(wrong(
                      d, [&](size_t i) { return sum_all(i, k); }, "int32 sum"),
                  0u);
        EXPECT_EQ(wrong(
                      e_out, [&](size_t i) { return max_all(i, k); }, "int64 max"),
                  0u);
        EXPECT_EQ(bc, want_bc) << "broadcast in a group, root " << root;
        EXPECT_EQ(wrong(
                      f, [&](size_t i) { return sum_all(i, k + 100); }, "uint16 sum"),
                  0u);
        // Send buffers of out-of-place calls are untouched.
        EXPECT_EQ(a, fill<float>(5, k));
        EXPECT_EQ(c, fill<int8_t>(3, k));
    }
    expect_comm_still_works();
}

// Only the outermost ccl_group_end issues.
TEST(Groups, Nested) {
    auto a = fill<int32_t>(10, 1);
    auto b = fill<float>(20, 2);
    std::vector<int32_t> a_out(10, -1);
    CCL_OK(ccl_group_start());
    CCL_OK(ccl_allreduce(a.data(), a_out.data(), a.size(), CCL_INT32, CCL_SUM, g_comm, nullptr,
                         nullptr));
    CCL_OK(ccl_group_start());
    CCL_OK(ccl_allreduce(b.data(), b.data(), b.size(), CCL_FLOAT32, CCL_MAX, g_comm, nullptr,
                         nullptr));
    CCL_OK(ccl_group_start());
    CCL_OK(ccl_group_end());
    CCL_OK(ccl_group_end());
    EXPECT_EQ(a_out, std::vector<int32_t>(10, -1)) << "an inner ccl_group_end issued the group";
    EXPECT_EQ(b, fill<float>(20, 2)) << "an inner ccl_group_end issued the group";
    CCL_OK(ccl_group_end());
    EXPECT_EQ(wrong(
                  a_out, [](size_t i) { return sum_all(i, 1); }, "outer"),
              0u);
    EXPECT_EQ(wrong(
                  b, [](size_t i) { return max_all(i, 2); }, "inner"),
              0u);
    EXPECT_FAILS(ccl_group_end(), CCL_ERROR_INVALID_USAGE, "group");
    expect_comm_still_works();
}

// Nonblocking calls in a group get their requests at once and complete through them.
TEST(Groups, NonblockingCalls) {
    for (int k = 0; k < 4; ++k) {
        const int n = 6;
        std::vector<std::vector<float>> bufs;
        std::vector<ccl_request_t> reqs(n, nullptr);
        for (int j = 0; j < n; ++j) bufs.push_back(fill<float>(size_t(j) * 50 + 1, k * 10 + j));
        auto blocking = fill<int32_t>(4, k);
        const int root = g_size - 1 - k % g_size;
        auto want_bc = bcast_data(root, 10, k);
        std::vector<int32_t> bc = g_rank == root ? want_bc : std::vector<int32_t>(10, 0);
        ccl_request_t rbc = nullptr;

        CCL_OK(ccl_group_start());
        for (int j = 0; j < n; ++j) {
            CCL_OK(ccl_allreduce(bufs[size_t(j)].data(), bufs[size_t(j)].data(),
                                 bufs[size_t(j)].size(), CCL_FLOAT32, CCL_SUM, g_comm, nullptr,
                                 &reqs[size_t(j)]));
            ASSERT_NE(reqs[size_t(j)], nullptr) << "no request inside the group";
        }
        CCL_OK(ccl_allreduce(blocking.data(), blocking.data(), blocking.size(), CCL_INT32, CCL_MIN,
                             g_comm, nullptr, nullptr));
        CCL_OK(ccl_broadcast(bc.data(), bc.size(), CCL_INT32, root, g_comm, nullptr, &rbc));
        // Recorded, not issued: the requests are not done before ccl_group_end.
        int done = -1;
        CCL_OK(ccl_test(reqs[0], &done));
        EXPECT_EQ(done, 0) << "a request of an open group completed";
        // Waiting for it before the group's end would never end: refused, the group goes on.
        EXPECT_EQ(ccl_wait(reqs[size_t(k % n)]), CCL_ERROR_INVALID_USAGE);
        EXPECT_NE(std::strstr(ccl_last_error(), "ccl_group_end"), nullptr) << ccl_last_error();
        CCL_OK(ccl_group_end());

        // The blocking one is done at group end.
        EXPECT_EQ(wrong(
                      blocking, [&](size_t i) { return min_all(i, k); }, "blocking"),
                  0u);
        for (int j = n - 1; j >= 0; --j) {
            CCL_OK(ccl_wait(reqs[size_t(j)]));
            EXPECT_EQ(wrong(
                          bufs[size_t(j)], [&](size_t i) { return sum_all(i, k * 10 + j); },
                          "nonblocking " + std::to_string(j)),
                      0u);
            CCL_OK(ccl_request_free(reqs[size_t(j)]));
        }
        CCL_OK(ccl_wait(rbc));
        EXPECT_EQ(bc, want_bc);
        CCL_OK(ccl_request_free(rbc));
    }
    expect_comm_still_works();
}

TEST(Groups, EmptyAndUnbalanced) {
    CCL_OK(ccl_group_start());
    CCL_OK(ccl_group_end());
    CCL_OK(ccl_group_start());
    CCL_OK(ccl_group_start());
    CCL_OK(ccl_group_end());
    CCL_OK(ccl_group_end());
    EXPECT_FAILS(ccl_group_end(), CCL_ERROR_INVALID_USAGE, "group");
    EXPECT_FAILS(ccl_group_end(), CCL_ERROR_INVALID_USAGE, "group");
    // The failed ends left nothing behind: a group still works.
    int v = 2;
    CCL_OK(ccl_group_start());
    CCL_OK(ccl_allreduce(&v, &v, 1, CCL_INT32, CCL_SUM, g_comm, nullptr, nullptr));
    CCL_OK(ccl_group_end());
    EXPECT_EQ(v, 2 * g_size);
    expect_comm_still_works();
}

// A bad argument in a group is reported by the call itself and not recorded; the rest of the
// group runs at ccl_group_end.
TEST(Groups, BadArgumentInsideGroup) {
    auto a = fill<float>(33, 5);
    auto b = fill<int64_t>(12, 6);
    float x = 0;
    ccl_request_t bad_req = nullptr, breq = nullptr;
    CCL_OK(ccl_group_start());
    CCL_OK(ccl_allreduce(a.data(), a.data(), a.size(), CCL_FLOAT32, CCL_SUM, g_comm, nullptr,
                         nullptr));
    EXPECT_FAILS(ccl_allreduce(nullptr, &x, 1, CCL_FLOAT32, CCL_SUM, g_comm, nullptr, nullptr),
                 CCL_ERROR_INVALID_ARGUMENT, "send");
    EXPECT_FAILS(
        ccl_allreduce(&x, &x, 1, CCL_FLOAT32, ccl_reduction_t(9), g_comm, nullptr, &bad_req),
        CCL_ERROR_INVALID_ARGUMENT, "reduction");
    EXPECT_EQ(bad_req, nullptr);
    EXPECT_FAILS(ccl_broadcast(&x, 1, CCL_FLOAT32, -1, g_comm, nullptr, nullptr),
                 CCL_ERROR_INVALID_ARGUMENT, "root");
    EXPECT_FAILS(ccl_barrier(nullptr, nullptr), CCL_ERROR_INVALID_ARGUMENT, "NULL");
    CCL_OK(ccl_allreduce(b.data(), b.data(), b.size(), CCL_INT64, CCL_MAX, g_comm, nullptr, &breq));
    CCL_OK(ccl_group_end());
    EXPECT_EQ(wrong(
                  a, [](size_t i) { return sum_all(i, 5); }, "before the bad calls"),
              0u);
    CCL_OK(ccl_wait(breq));
    EXPECT_EQ(wrong(
                  b, [](size_t i) { return max_all(i, 6); }, "after the bad calls"),
              0u);
    CCL_OK(ccl_request_free(breq));
    EXPECT_EQ(x, 0.0f);
    expect_comm_still_works();
}

// The gradient-coalescing case: 100 tiny allreduces in one group, every one right.
TEST(Groups, ManyTinyAllreduces) {
    for (int round = 0; round < 5; ++round) {
        const int n = 100;
        std::vector<std::vector<float>> f(n);
        std::vector<std::vector<int32_t>> in(n), out(n);
        CCL_OK(ccl_group_start());
        for (int j = 0; j < n; ++j) {
            const int k = round * 1000 + j;
            const size_t count = 1 + size_t(j % 9);
            if (j % 3 != 0) {
                f[size_t(j)] = fill<float>(count, k);
                CCL_OK(ccl_allreduce(f[size_t(j)].data(), f[size_t(j)].data(), count, CCL_FLOAT32,
                                     CCL_SUM, g_comm, nullptr, nullptr));
            } else {
                in[size_t(j)] = fill<int32_t>(count, k);
                out[size_t(j)].assign(count, 0);
                CCL_OK(ccl_allreduce(in[size_t(j)].data(), out[size_t(j)].data(), count, CCL_INT32,
                                     j % 2 ? CCL_MAX : CCL_SUM, g_comm, nullptr, nullptr));
            }
        }
        CCL_OK(ccl_group_end());
        for (int j = 0; j < n; ++j) {
            const int k = round * 1000 + j;
            const std::string what = "call " + std::to_string(j);
            if (j % 3 != 0)
                EXPECT_EQ(wrong(
                              f[size_t(j)], [&](size_t i) { return sum_all(i, k); }, what),
                          0u);
            else if (j % 2)
                EXPECT_EQ(wrong(
                              out[size_t(j)], [&](size_t i) { return max_all(i, k); }, what),
                          0u);
            else
                EXPECT_EQ(wrong(
                              out[size_t(j)], [&](size_t i) { return sum_all(i, k); }, what),
                          0u);
        }
    }
    expect_comm_still_works();
}

// A large allreduce in a group, between small ones.
TEST(Groups, LargeAllreduce) {
    auto s1 = fill<float>(3, 1);
    auto big = fill<float>(300000, 2);
    std::vector<float> big_out(big.size(), -1.0f);
    auto s2 = fill<double>(5, 3);
    CCL_OK(ccl_group_start());
    CCL_OK(ccl_allreduce(s1.data(), s1.data(), s1.size(), CCL_FLOAT32, CCL_SUM, g_comm, nullptr,
                         nullptr));
    CCL_OK(ccl_allreduce(big.data(), big_out.data(), big.size(), CCL_FLOAT32, CCL_SUM, g_comm,
                         nullptr, nullptr));
    CCL_OK(ccl_allreduce(s2.data(), s2.data(), s2.size(), CCL_FLOAT64, CCL_SUM, g_comm, nullptr,
                         nullptr));
    CCL_OK(ccl_group_end());
    EXPECT_EQ(wrong(
                  s1, [](size_t i) { return sum_all(i, 1); }, "small before"),
              0u);
    EXPECT_EQ(wrong(
                  big_out, [](size_t i) { return sum_all(i, 2); }, "large"),
              0u);
    EXPECT_EQ(wrong(
                  s2, [](size_t i) { return sum_all(i, 3); }, "small after"),
              0u);
    // Alone in a group, in place.
    CCL_OK(ccl_group_start());
    CCL_OK(ccl_allreduce(big.data(), big.data(), big.size(), CCL_FLOAT32, CCL_SUM, g_comm, nullptr,
                         nullptr));
    CCL_OK(ccl_group_end());
    EXPECT_EQ(wrong(
                  big, [](size_t i) { return sum_all(i, 2); }, "large in place"),
              0u);
}

// One group over two communicators, calls interleaved.
TEST(Groups, TwoCommunicators) {
    ccl_comm_t c = nullptr;
    CCL_OK(ccl_comm_create_from_env(&c));
    for (int k = 0; k < 3; ++k) {
        auto a1 = fill<int32_t>(8, k), a2 = fill<int32_t>(8, k + 50);
        auto b1 = fill<float>(16, k + 1), b2 = fill<float>(16, k + 51);
        CCL_OK(ccl_group_start());
        CCL_OK(
            ccl_allreduce(a1.data(), a1.data(), 8, CCL_INT32, CCL_SUM, g_comm, nullptr, nullptr));
        CCL_OK(ccl_allreduce(a2.data(), a2.data(), 8, CCL_INT32, CCL_MAX, c, nullptr, nullptr));
        CCL_OK(ccl_allreduce(b1.data(), b1.data(), 16, CCL_FLOAT32, CCL_MIN, g_comm, nullptr,
                             nullptr));
        CCL_OK(ccl_allreduce(b2.data(), b2.data(), 16, CCL_FLOAT32, CCL_SUM, c, nullptr, nullptr));
        CCL_OK(ccl_group_end());
        EXPECT_EQ(wrong(
                      a1, [&](size_t i) { return sum_all(i, k); }, "comm 1 a"),
                  0u);
        EXPECT_EQ(wrong(
                      a2, [&](size_t i) { return max_all(i, k + 50); }, "comm 2 a"),
                  0u);
        EXPECT_EQ(wrong(
                      b1, [&](size_t i) { return min_all(i, k + 1); }, "comm 1 b"),
                  0u);
        EXPECT_EQ(wrong(
                      b2, [&](size_t i) { return sum_all(i, k + 51); }, "comm 2 b"),
                  0u);
    }
    CCL_OK(ccl_comm_destroy(c));
    expect_comm_still_works();
}

// Cached calls in a group, the same group issued again with new buffers.
TEST(Groups, CachedCallsInAGroup) {
    ccl_coll_attr_t a1 = CCL_COLL_ATTR_INIT, a2 = CCL_COLL_ATTR_INIT;
    a1.match_id = "group-grad-1";
    a1.to_cache = 1;
    a2.match_id = "group-grad-2";
    a2.to_cache = 1;
    for (int k = 0; k < 5; ++k) {
        auto x = fill<float>(40, k), y = fill<float>(41, k + 20);
        CCL_OK(ccl_group_start());
        CCL_OK(ccl_allreduce(x.data(), x.data(), x.size(), CCL_FLOAT32, CCL_SUM, g_comm, &a1,
                             nullptr));
        CCL_OK(ccl_allreduce(y.data(), y.data(), y.size(), CCL_FLOAT32, CCL_SUM, g_comm, &a2,
                             nullptr));
        CCL_OK(ccl_group_end());
        EXPECT_EQ(wrong(
                      x, [&](size_t i) { return sum_all(i, k); }, "cached 1"),
                  0u);
        EXPECT_EQ(wrong(
                      y, [&](size_t i) { return sum_all(i, k + 20); }, "cached 2"),
                  0u);
    }
    expect_comm_still_works();
}

}  // namespace
