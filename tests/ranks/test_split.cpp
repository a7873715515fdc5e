// ccl_comm_split: halves, odd/even, singletons, one color with reversed and tied keys (the new
// order follows key, then parent rank), CCL_UNDEFINED giving NULL, nested splits; sub-communicators
// used interleaved with their parent (blocking, and nonblocking on both at once), two of them used
// concurrently from two threads, a parent destroyed before its child, every collective of the
// family on a sub-communicator, the match_id cache telling communicators apart, and a broken child
// leaving its parent and siblings working.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "common.h"
#include "reference.h"

using namespace test;

namespace {

using RankFn = std::function<int(int parent_rank)>;

Ctx ctx_of(ccl_comm_t c) {
    Ctx x{c, -1, -1};
    EXPECT_EQ(ccl_comm_rank(c, &x.rank), CCL_SUCCESS) << ccl_last_error();
    EXPECT_EQ(ccl_comm_size(c, &x.size), CCL_SUCCESS) << ccl_last_error();
    return x;
}

// The parent ranks of the new communicator that parent rank `me` lands in, in their new order
// (key, then parent rank), as MPI_Comm_split defines it. Empty for CCL_UNDEFINED.
std::vector<int> expected_members(const Ctx& parent, const RankFn& color, const RankFn& key) {
    std::vector<int> members;
    const int mine = color(parent.rank);
    if (mine == CCL_UNDEFINED) return members;
    for (int r = 0; r < parent.size; ++r)
        if (color(r) == mine) members.push_back(r);
    std::stable_sort(members.begin(), members.end(), [&](int a, int b) { return key(a) < key(b); });
    return members;
}

// Splits `parent` (every rank calls this with the same functions) and checks the result: NULL
// for CCL_UNDEFINED, else the expected size, rank and rank order (each new rank broadcasts its
// parent rank in turn), and an allreduce over the new communicator only. Returns the new
// communicator (NULL for CCL_UNDEFINED) for the caller to use and destroy.
ccl_comm_t split_checked(const Ctx& parent, const RankFn& color, const RankFn& key,
                         const std::string& what) {
    ccl_comm_t sub = reinterpret_cast<ccl_comm_t>(uintptr_t(0x1230));  // must be overwritten
    ccl_result_t r = ccl_comm_split(parent.comm, color(parent.rank), key(parent.rank), &sub);
    if (r != CCL_SUCCESS) {
        ADD_FAILURE() << what << ": ccl_comm_split: " << ccl_strerror(r) << ": "
                      << ccl_last_error();
        return nullptr;
    }
    const std::vector<int> members = expected_members(parent, color, key);
    if (members.empty()) {
        EXPECT_EQ(sub, nullptr) << what << ": CCL_UNDEFINED must give NULL";
        return nullptr;
    }
    if (!sub) {
        ADD_FAILURE() << what << ": NULL communicator for color " << color(parent.rank);
        return nullptr;
    }
    Ctx c = ctx_of(sub);
    const int want_rank =
        int(std::find(members.begin(), members.end(), parent.rank) - members.begin());
    EXPECT_EQ(c.size, int(members.size())) << what << ": size";
    EXPECT_EQ(c.rank, want_rank) << what << ": rank";
    if (c.size != int(members.size()) || c.rank != want_rank) return sub;
    for (int k = 0; k < c.size; ++k) {
        int32_t v = c.rank == k ? parent.rank : -1;
        EXPECT_EQ(ccl_broadcast(&v, 1, CCL_INT32, k, sub, nullptr, nullptr), CCL_SUCCESS)
            << what << ": " << ccl_last_error();
        EXPECT_EQ(v, members[size_t(k)]) << what << ": parent rank of new rank " << k;
    }
    int64_t sum = parent.rank;
    EXPECT_EQ(ccl_allreduce(&sum, &sum, 1, CCL_INT64, CCL_SUM, sub, nullptr, nullptr), CCL_SUCCESS)
        << what << ": " << ccl_last_error();
    EXPECT_EQ(sum, std::accumulate(members.begin(), members.end(), int64_t(0))) << what;
    return sub;
}

Ctx world() { return Ctx{g_comm, g_rank, g_size}; }
int halves(int r) { return r < g_size / 2 ? 0 : 1; }
int parity(int r) { return r % 2; }
int same_key(int) { return 0; }
int key_is_rank(int r) { return r; }

void destroy(ccl_comm_t c) {
    if (c) {
        EXPECT_EQ(ccl_comm_destroy(c), CCL_SUCCESS) << ccl_last_error();
    }
}

TEST(Split, Halves) {
    destroy(split_checked(world(), halves, key_is_rank, "halves"));
    destroy(split_checked(world(), halves, same_key, "halves, equal keys"));
}

TEST(Split, OddEven) { destroy(split_checked(world(), parity, key_is_rank, "odd/even")); }

TEST(Split, Singletons) {
    ccl_comm_t c = split_checked(world(), key_is_rank, same_key, "singletons");
    if (c) {
        std::vector<float> in(100, 2.5f), out(100);
        CCL_OK(ccl_allgather(in.data(), out.data(), in.size(), CCL_FLOAT32, c, nullptr, nullptr));
        EXPECT_EQ(out, in);
    }
    destroy(c);
}

TEST(Split, OneColorReversedAndTiedKeys) {
    destroy(split_checked(
        world(), [](int) { return 7; }, [](int r) { return g_size - r; }, "reversed keys"));
    destroy(split_checked(
        world(), [](int) { return 0; }, [](int r) { return -r; }, "negative keys"));
    // Ties broken by parent rank: the odd ranks first, each half in parent order.
    destroy(split_checked(
        world(), [](int) { return 3; }, [](int r) { return 1 - r % 2; }, "tied keys"));
    // Large colors, keys shared by pairs and ranked in reverse.
    destroy(split_checked(
        world(), [](int r) { return 1000000 + r % 3; }, [](int r) { return -(r / 2); },
        "large colors, paired keys"));
}

TEST(Split, Undefined) {
    destroy(split_checked(
        world(), [](int r) { return r % 3 == 1 ? CCL_UNDEFINED : 0; }, key_is_rank,
        "every third rank undefined"));
    destroy(split_checked(
        world(), [](int) { return CCL_UNDEFINED; }, key_is_rank, "all undefined"));
    // Only rank 0 defined.
    destroy(split_checked(
        world(), [](int r) { return r == 0 ? 5 : CCL_UNDEFINED; }, key_is_rank, "only rank 0"));
}

TEST(Split, Nested) {
    ccl_comm_t half = split_checked(world(), halves, key_is_rank, "halves");
    ASSERT_NE(half, nullptr);
    Ctx h = ctx_of(half);
    // Split the half again, by parity of the rank in the half, reversed.
    ccl_comm_t quarter = split_checked(
        h, parity, [](int r) { return -r; }, "nested odd/even of a half");
    ASSERT_NE(quarter, nullptr);
    Ctx q = ctx_of(quarter);
    // And a third level: singletons of the quarter, then an allreduce of parent ranks.
    ccl_comm_t single = split_checked(q, key_is_rank, same_key, "nested singletons");
    ASSERT_NE(single, nullptr);
    int64_t v = g_rank;
    CCL_OK(ccl_allreduce(&v, &v, 1, CCL_INT64, CCL_SUM, single, nullptr, nullptr));
    EXPECT_EQ(v, g_rank);
    // Destroyed out of order; the middle one last.
    destroy(single);
    destroy(half);
    v = 1;
    CCL_OK(ccl_allreduce(&v, &v, 1, CCL_INT64, CCL_SUM, quarter, nullptr, nullptr));
    EXPECT_EQ(v, q.size);
    destroy(quarter);
    expect_comm_still_works();
}

// The sum over the members of `sub` (in parent ranks) of `f`.
int64_t sum_over(const std::vector<int>& members, const std::function<int64_t(int)>& f) {
    int64_t s = 0;
    for (int r : members) s += f(r);
    return s;
}

TEST(Split, InterleavedWithParent) {
    ccl_comm_t sub = split_checked(world(), parity, key_is_rank, "odd/even");
    ASSERT_NE(sub, nullptr);
    const std::vector<int> members = expected_members(world(), parity, key_is_rank);
    // Alternating blocking calls.
    for (int it = 0; it < 60; ++it) {
        int64_t a = g_rank + it, b = g_rank * 3 + it;
        CCL_OK(ccl_allreduce(&a, &a, 1, CCL_INT64, CCL_SUM, g_comm, nullptr, nullptr));
        CCL_OK(ccl_allreduce(&b, &b, 1, CCL_INT64, CCL_SUM, sub, nullptr, nullptr));
        EXPECT_EQ(a, int64_t(g_size) * it + g_size * (g_size - 1) / 2);
        EXPECT_EQ(b, sum_over(members, [&](int r) { return int64_t(r) * 3 + it; }));
    }
    // Nonblocking on both at once, waited in either order; then a blocking call on one while the
    // other's nonblocking one is outstanding.
    for (int it = 0; it < 20; ++it) {
        const size_t n = it % 2 ? 100000 : 7;
        std::vector<int32_t> a(n), b(n), c(n);
        for (size_t i = 0; i < n; ++i) {
            a[i] = g_rank + int32_t(i % 50);
            b[i] = 2 * g_rank + int32_t(i % 50) + it;
            c[i] = g_rank;
        }
        ccl_request_t ra = nullptr, rb = nullptr;
        CCL_OK(ccl_allreduce(a.data(), a.data(), n, CCL_INT32, CCL_SUM, g_comm, nullptr, &ra));
        CCL_OK(ccl_allreduce(b.data(), b.data(), n, CCL_INT32, CCL_SUM, sub, nullptr, &rb));
        if (it % 2) std::swap(ra, rb);
        CCL_OK(ccl_wait(ra));
        CCL_OK(ccl_wait(rb));
        CCL_OK(ccl_request_free(ra));
        CCL_OK(ccl_request_free(rb));
        const int64_t ms = int64_t(members.size());
        for (size_t i = 0; i < n; ++i) {
            if (a[i] != g_size * (g_size - 1) / 2 + g_size * int32_t(i % 50) ||
                b[i] !=
                    sum_over(members, [](int r) { return 2 * r; }) + ms * (int32_t(i % 50) + it)) {
                ADD_FAILURE() << "iteration " << it << " element " << i << ": " << a[i] << ", "
                              << b[i];
                break;
            }
        }
        CCL_OK(ccl_allreduce(c.data(), c.data(), n, CCL_INT32, CCL_MAX, sub, nullptr, &rb));
        int32_t x = 1;
        CCL_OK(ccl_allreduce(&x, &x, 1, CCL_INT32, CCL_SUM, g_comm, nullptr, nullptr));
        EXPECT_EQ(x, g_size);
        CCL_OK(ccl_wait(rb));
        CCL_OK(ccl_request_free(rb));
        EXPECT_EQ(c[0], members.back());
        EXPECT_EQ(c[n - 1], members.back());
    }
    destroy(sub);
}

// What a thread reports: its first failure (checked by the main thread).
struct ThreadResult {
    std::string error;
    void fail(const std::string& what) {
        if (error.empty()) error = what;
    }
};

std::string failed(const char* call, ccl_result_t r) {
    return std::string(call) + ": " + ccl_strerror(r) + ": " + ccl_last_error();
}

// One thread's work on its sub-communicator: allreduces (blocking and nonblocking), allgathers,
// alltoalls and reduces, checked against the parent ranks of its members.
void sub_worker(ccl_comm_t comm, std::vector<int> members, int salt, ThreadResult* out) {
    int rank = -1;
    ccl_comm_rank(comm, &rank);
    const int n = int(members.size());
    for (int it = 0; it < 100 && out->error.empty(); ++it) {
        const std::string at = "salt " + std::to_string(salt) + " iteration " + std::to_string(it);
        std::vector<int32_t> a(5 + size_t(salt) * 1000);
        for (size_t i = 0; i < a.size(); ++i) a[i] = g_rank * salt + int32_t(i % 9) + it;
        ccl_request_t req = nullptr;
        ccl_result_t r = it % 3 == 0 ? ccl_allreduce(a.data(), a.data(), a.size(), CCL_INT32,
                                                     CCL_SUM, comm, nullptr, &req)
                                     : ccl_allreduce(a.data(), a.data(), a.size(), CCL_INT32,
                                                     CCL_SUM, comm, nullptr, nullptr);
        if (r == CCL_SUCCESS && req) r = ccl_wait(req);
        if (req) ccl_request_free(req);
        if (r != CCL_SUCCESS) return out->fail(failed("allreduce", r));
        int64_t base = 0;
        for (int m : members) base += m * salt;
        for (size_t i = 0; i < a.size(); ++i)
            if (a[i] != base + n * (int32_t(i % 9) + it))
                return out->fail(at + ": allreduce element " + std::to_string(i));

        std::vector<int64_t> mine(3, int64_t(g_rank) * 100 + it), all(3 * size_t(n), -1);
        r = ccl_allgather(mine.data(), all.data(), 3, CCL_INT64, comm, nullptr, nullptr);
        if (r != CCL_SUCCESS) return out->fail(failed("allgather", r));
        for (int k = 0; k < n; ++k)
            if (all[3 * size_t(k) + 2] != int64_t(members[size_t(k)]) * 100 + it)
                return out->fail(at + ": allgather block " + std::to_string(k));

        std::vector<int32_t> s(static_cast<size_t>(n)), d(size_t(n), -1);
        for (int j = 0; j < n; ++j) s[size_t(j)] = g_rank * 1000 + j * 10 + salt;
        r = ccl_alltoall(s.data(), d.data(), 1, CCL_INT32, comm, nullptr, nullptr);
        if (r != CCL_SUCCESS) return out->fail(failed("alltoall", r));
        for (int k = 0; k < n; ++k)
            if (d[size_t(k)] != members[size_t(k)] * 1000 + rank * 10 + salt)
                return out->fail(at + ": alltoall block " + std::to_string(k));

        const int root = it % n;
        int64_t v = g_rank, got = -1;
        r = ccl_reduce(&v, &got, 1, CCL_INT64, CCL_MAX, root, comm, nullptr, nullptr);
        if (r != CCL_SUCCESS) return out->fail(failed("reduce", r));
        if (rank == root && got != *std::max_element(members.begin(), members.end()))
            return out->fail(at + ": reduce");
    }
}

TEST(Split, TwoSubCommunicatorsFromTwoThreads) {
    ccl_comm_t a = split_checked(world(), parity, key_is_rank, "odd/even");
    ccl_comm_t b = split_checked(
        world(), halves, [](int r) { return -r; }, "halves reversed");
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    ThreadResult ra, rb;
    std::thread ta(sub_worker, a, expected_members(world(), parity, key_is_rank), 1, &ra);
    std::thread tb(sub_worker, b, expected_members(world(), halves, [](int r) { return -r; }), 2,
                   &rb);
    ta.join();
    tb.join();
    EXPECT_EQ(ra.error, "") << "odd/even communicator";
    EXPECT_EQ(rb.error, "") << "halves communicator";
    destroy(a);
    destroy(b);
    expect_comm_still_works();
}

TEST(Split, ParentDestroyedBeforeChild) {
    // A duplicate of the world (one color, keys in rank order) stands in for the parent.
    ccl_comm_t dup = split_checked(world(), same_key, key_is_rank, "duplicate");
    ASSERT_NE(dup, nullptr);
    ccl_comm_t child = split_checked(ctx_of(dup), halves, key_is_rank, "child of the duplicate");
    ASSERT_NE(child, nullptr);
    const std::vector<int> members = expected_members(world(), halves, key_is_rank);
    // Work outstanding on the child while the parent goes away.
    std::vector<float> f(50000);
    for (size_t i = 0; i < f.size(); ++i) f[i] = float(g_rank + int(i % 7));
    ccl_request_t req = nullptr;
    CCL_OK(ccl_allreduce(f.data(), f.data(), f.size(), CCL_FLOAT32, CCL_SUM, child, nullptr, &req));
    CCL_OK(ccl_comm_destroy(dup));
    CCL_OK(ccl_wait(req));
    CCL_OK(ccl_request_free(req));
    const float base = float(sum_over(members, [](int r) { return r; }));
    for (size_t i = 0; i < f.size(); ++i)
        if (f[i] != base + float(members.size() * (i % 7))) {
            ADD_FAILURE() << "element " << i << " is " << f[i];
            break;
        }
    // The child goes on working, every collective of the family included.
    Ctx c = ctx_of(child);
    EXPECT_TRUE(run_allgather(c, CCL_INT32, 100, false, 1));
    EXPECT_TRUE(run_reduce(c, CCL_FLOAT64, CCL_SUM, 100, c.size - 1, false, 2));
    EXPECT_TRUE(run_alltoall(c, CCL_INT8, 33, true, 3));
    // And can be split again.
    ccl_comm_t grandchild = split_checked(c, parity, key_is_rank, "grandchild");
    destroy(child);
    ASSERT_NE(grandchild, nullptr);
    EXPECT_TRUE(run_reduce_scatter(ctx_of(grandchild), CCL_INT16, CCL_SUM, 10, false, 4));
    destroy(grandchild);
    expect_comm_still_works();
}

void every_collective(ccl_comm_t comm, const std::vector<int>& members, uint64_t seed) {
    Ctx c = ctx_of(comm);
    const int n = c.size;
    for (bool nonblocking : {false, true}) {
        How how{nonblocking, nullptr};
        // Larger than the shared-memory buffer: blocking only, to keep the run short.
        const size_t large = nonblocking ? 4097 : large_count(CCL_FLOAT32);
        for (size_t count : {size_t(0), size_t(1), size_t(1001), large}) {
            for (int root = 0; root < n; ++root) {
                if (count == large && root != 0 && root != n - 1) continue;
                EXPECT_TRUE(
                    run_reduce(c, CCL_FLOAT32, CCL_SUM, count, root, root % 2, ++seed, how));
            }
            for (bool in_place : {false, true}) {
                EXPECT_TRUE(
                    run_reduce_scatter(c, CCL_INT32, CCL_MAX, count, in_place, ++seed, how));
                EXPECT_TRUE(run_allgather(c, CCL_FLOAT16, count, in_place, ++seed, how));
                EXPECT_TRUE(run_alltoall(c, CCL_UINT8, count, in_place, ++seed, how));
                std::vector<size_t> counts(static_cast<size_t>(n));
                for (int r = 0; r < n; ++r) counts[size_t(r)] = r % 2 ? count : count / 2;
                EXPECT_TRUE(run_allgatherv(c, CCL_FLOAT64, counts, in_place, ++seed, how));
            }
            auto v = [count](int from, int to) -> size_t {
                return (from + to) % 3 == 1 ? 0 : count / 3 + size_t(from);
            };
            EXPECT_TRUE(run_alltoallv(c, CCL_INT64, v, ++seed, how));
        }
    }
    for (ccl_datatype_t t : kTypes)
        for (ccl_reduction_t op : kOps) {
            ++seed;
            EXPECT_TRUE(run_reduce(c, t, op, 5, int(seed % uint64_t(n)), false, seed));
            EXPECT_TRUE(run_reduce_scatter(c, t, op, 3, false, ++seed));
        }
    // The original three and point to point.
    std::vector<int32_t> x(1000);
    for (size_t i = 0; i < x.size(); ++i) x[i] = g_rank + int32_t(i);
    CCL_OK(ccl_allreduce(x.data(), x.data(), x.size(), CCL_INT32, CCL_SUM, comm, nullptr, nullptr));
    const int32_t psum = int32_t(sum_over(members, [](int r) { return r; }));
    EXPECT_EQ(x[999], psum + n * 999);
    for (int root = 0; root < n; ++root) {
        int64_t b = c.rank == root ? g_rank : -1;
        CCL_OK(ccl_broadcast(&b, 1, CCL_INT64, root, comm, nullptr, nullptr));
        EXPECT_EQ(b, members[size_t(root)]);
    }
    CCL_OK(ccl_barrier(comm, nullptr));
    int64_t out = g_rank, in = -1;
    CCL_OK(ccl_send(&out, 1, CCL_INT64, (c.rank + 1) % n, comm, nullptr));
    CCL_OK(ccl_recv(&in, 1, CCL_INT64, (c.rank + n - 1) % n, comm, nullptr));
    EXPECT_EQ(in, members[size_t((c.rank + n - 1) % n)]);
}

TEST(Split, EveryCollectiveOnASubCommunicator) {
    ccl_comm_t half = split_checked(
        world(), halves, [](int r) { return -r; }, "halves reversed");
    ASSERT_NE(half, nullptr);
    every_collective(half, expected_members(world(), halves, [](int r) { return -r; }), 100);
    destroy(half);
    ccl_comm_t odd = split_checked(world(), parity, key_is_rank, "odd/even");
    ASSERT_NE(odd, nullptr);
    every_collective(odd, expected_members(world(), parity, key_is_rank), 100000);
    destroy(odd);
    expect_comm_still_works();
}

TEST(Split, ManyInARow) {
    for (int it = 0; it < 20; ++it) {
        const int m = 1 + it % 3;
        ccl_comm_t c = split_checked(
            world(), [m](int r) { return r % m; }, [it](int r) { return it % 2 ? -r : r; },
            "split " + std::to_string(it));
        destroy(c);
    }
    expect_comm_still_works();
}

// The match_id cache tells communicators apart: a match_id cached on the parent, reused on a
// child, is refused (on every rank, before any communication); both go on working.
TEST(Split, CacheTellsCommunicatorsApart) {
    ccl_comm_t sub = split_checked(world(), halves, key_is_rank, "halves");
    ASSERT_NE(sub, nullptr);
    Ctx c = ctx_of(sub);
    How how{false, "split-cache-site"};
    EXPECT_TRUE(run_allgather(world(), CCL_INT32, 64, false, 1, how));
    std::vector<int32_t> in(64), out(64 * size_t(c.size));
    ccl_coll_attr_t attr = how.attr();
    EXPECT_FAILS(ccl_allgather(in.data(), out.data(), 64, CCL_INT32, sub, &attr, nullptr),
                 CCL_ERROR_INVALID_USAGE, "split-cache-site");
    expect_comm_still_works();
    EXPECT_TRUE(run_allgather(c, CCL_INT32, 64, false, 2, How{false, "split-cache-sub"}));
    EXPECT_TRUE(run_allgather(c, CCL_INT32, 64, false, 3, How{false, "split-cache-sub"}));
    EXPECT_TRUE(run_allgather(world(), CCL_INT32, 64, true, 4, how));
    destroy(sub);
}

// A child broken by ranks disagreeing (an alltoallv with mismatched counts) fails on every one of
// its ranks and says so afterwards; its parent and its sibling go on working. Last: it
// deliberately breaks a communicator (its own).
TEST(Split, BrokenChildLeavesParentAndSiblingWorking) {
    ccl_comm_t a = split_checked(world(), halves, key_is_rank, "halves");
    ccl_comm_t b = split_checked(world(), halves, key_is_rank, "halves again");
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    Ctx c = ctx_of(a);
    // recvcounts[next] is one more than what that rank sends here (with one rank, that is itself).
    std::vector<size_t> sc(size_t(c.size), 4), rc(size_t(c.size), 4);
    rc[size_t((c.rank + 1) % c.size)] = 5;
    std::vector<int32_t> s(4 * size_t(c.size), 1), d(5 * size_t(c.size), 0);
    ccl_result_t r =
        ccl_alltoallv(s.data(), sc.data(), d.data(), rc.data(), CCL_INT32, a, nullptr, nullptr);
    EXPECT_EQ(r, CCL_ERROR_INVALID_USAGE) << ccl_strerror(r) << ": " << ccl_last_error();
    int x = 1;
    r = ccl_allreduce(&x, &x, 1, CCL_INT32, CCL_SUM, a, nullptr, nullptr);
    EXPECT_NE(r, CCL_SUCCESS) << "a broken communicator must refuse further collectives";
    EXPECT_NE(std::string(ccl_last_error()).find("broken"), std::string::npos) << ccl_last_error();
    destroy(a);
    expect_comm_still_works();
    EXPECT_TRUE(run_alltoall(ctx_of(b), CCL_INT32, 4, false, 5));
    destroy(b);
    expect_comm_still_works();
}

}  // namespace
