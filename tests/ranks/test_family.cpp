// The collective family beyond allreduce/broadcast/barrier: reduce, allgather, allgatherv,
// reduce_scatter, alltoall and alltoallv on every rank of cclrun's job. Every datatype and
// reduction, counts 0, 1, odd and larger than the shared-memory buffer (CCL_SHM_BUFFER_SIZE; also
// registered with 64K so that "larger" is cheap), every root, in place where ccl.h defines it,
// uneven counts with zeros for the v-variants, nonblocking calls (one at a time and many
// outstanding), match_id caching with new buffers on every call, groups, unaligned buffers. Each
// rank checks its results against a reference it computes on its own (reference.h).
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common.h"
#include "reference.h"

using namespace test;

namespace {

Ctx world() { return Ctx{g_comm, g_rank, g_size}; }

// Odd and small counts; the large ones are separate (and fewer) to keep the run short.
const size_t kCounts[] = {0, 1, 3, 17, 31, 1000};  // 31 x 8 B: a full eager slot
// Element counts of messages larger than the shared-memory buffer: large_count(type)
// (reference.h) follows CCL_SHM_BUFFER_SIZE, so that the 64K variant runs them cheaply.

TEST(Reduce, EveryTypeOpAndCount) {
    uint64_t seed = 1;
    int root = 0;
    for (ccl_datatype_t t : kTypes)
        for (ccl_reduction_t op : kOps)
            for (size_t count : kCounts) {
                for (bool in_place : {false, true}) {
                    root = (root + 1) % g_size;  // every root, over the loop
                    EXPECT_TRUE(run_reduce(world(), t, op, count, root, in_place, ++seed));
                }
            }
}

TEST(Reduce, EveryRootAndLargeCounts) {
    uint64_t seed = 1000;
    for (int root = 0; root < g_size; ++root) {
        EXPECT_TRUE(run_reduce(world(), CCL_FLOAT32, CCL_SUM, large_count(CCL_FLOAT32), root, false,
                               ++seed));
        EXPECT_TRUE(run_reduce(world(), CCL_FLOAT64, CCL_MIN, large_count(CCL_FLOAT64), root, true,
                               ++seed));
        EXPECT_TRUE(run_reduce(world(), CCL_INT8, CCL_PROD, 4097, root, true, ++seed));
        EXPECT_TRUE(run_reduce(world(), CCL_BFLOAT16, CCL_AVG, 1, root, false, ++seed));
        EXPECT_TRUE(run_reduce(world(), CCL_UINT16, CCL_MAX, 20001, root, false, ++seed));
    }
}

TEST(ReduceScatter, EveryTypeOpAndCount) {
    uint64_t seed = 2000;
    for (ccl_datatype_t t : kTypes)
        for (ccl_reduction_t op : kOps)
            for (size_t count : kCounts)
                for (bool in_place : {false, true})
                    EXPECT_TRUE(run_reduce_scatter(world(), t, op, count, in_place, ++seed));
}

TEST(ReduceScatter, LargeCounts) {
    uint64_t seed = 3000;
    for (bool in_place : {false, true}) {
        // Every block larger than the buffer.
        EXPECT_TRUE(run_reduce_scatter(world(), CCL_FLOAT64, CCL_SUM, large_count(CCL_FLOAT64),
                                       in_place, ++seed));
        // The whole send larger than the buffer, the blocks smaller (with more than one rank).
        EXPECT_TRUE(run_reduce_scatter(world(), CCL_INT32, CCL_MAX,
                                       large_count(CCL_INT32) / size_t(g_size) | 1, in_place,
                                       ++seed));
        EXPECT_TRUE(run_reduce_scatter(world(), CCL_FLOAT16, CCL_AVG, 33333, in_place, ++seed));
    }
}

TEST(Allgather, EveryTypeAndCount) {
    uint64_t seed = 4000;
    for (ccl_datatype_t t : kTypes)
        for (size_t count : {0, 1, 3, 17, 1000, 4097})
            for (bool in_place : {false, true})
                EXPECT_TRUE(run_allgather(world(), t, count, in_place, ++seed));
}

TEST(Allgather, LargeCounts) {
    uint64_t seed = 5000;
    for (bool in_place : {false, true}) {
        EXPECT_TRUE(
            run_allgather(world(), CCL_FLOAT64, large_count(CCL_FLOAT64), in_place, ++seed));
        EXPECT_TRUE(
            run_allgather(world(), CCL_UINT8, large_count(CCL_INT64) + 2, in_place, ++seed));
    }
}

// Patterns of uneven per-rank counts, zeros included.
std::vector<std::vector<size_t>> gatherv_patterns(int n) {
    std::vector<std::vector<size_t>> p;
    std::vector<size_t> v(size_t(n), 0);
    for (int r = 0; r < n; ++r) v[size_t(r)] = r % 3 == 1 ? 0 : 5 + 7 * size_t(r);
    p.push_back(v);
    p.push_back(std::vector<size_t>(size_t(n), 0));  // all zero
    v.assign(size_t(n), 0);
    v[size_t(n - 1)] = 1001;  // only the last rank
    p.push_back(v);
    for (int r = 0; r < n; ++r) v[size_t(r)] = size_t(r);  // rank 0 contributes nothing
    p.push_back(v);
    for (int r = 0; r < n; ++r) v[size_t(r)] = size_t(n - r) * 3 + 1;  // all odd, decreasing
    p.push_back(v);
    return p;
}

TEST(Allgatherv, UnevenCountsWithZeros) {
    uint64_t seed = 6000;
    const ccl_datatype_t types[] = {CCL_INT8,     CCL_UINT16,  CCL_FLOAT16, CCL_INT32,
                                    CCL_BFLOAT16, CCL_FLOAT32, CCL_FLOAT64, CCL_UINT64};
    for (const auto& counts : gatherv_patterns(g_size))
        for (ccl_datatype_t t : types)
            for (bool in_place : {false, true})
                EXPECT_TRUE(run_allgatherv(world(), t, counts, in_place, ++seed));
}

TEST(Allgatherv, LargeBlocks) {
    uint64_t seed = 7000;
    std::vector<size_t> counts(size_t(g_size), 3);
    counts[0] = large_count(
        CCL_FLOAT32);  // one block larger than the shared-memory buffer, the others tiny
    if (g_size > 2) counts[2] = 0;
    for (bool in_place : {false, true})
        EXPECT_TRUE(run_allgatherv(world(), CCL_FLOAT32, counts, in_place, ++seed));
    // All large together, each smaller than the buffer.
    for (int r = 0; r < g_size; ++r)
        counts[size_t(r)] = large_count(CCL_INT32) / 3 + size_t(r) * 17;
    EXPECT_TRUE(run_allgatherv(world(), CCL_INT32, counts, false, ++seed));
}

TEST(Alltoall, EveryTypeAndCount) {
    uint64_t seed = 8000;
    for (ccl_datatype_t t : kTypes)
        for (size_t count : kCounts)
            for (bool in_place : {false, true})
                EXPECT_TRUE(run_alltoall(world(), t, count, in_place, ++seed));
}

TEST(Alltoall, LargeCounts) {
    uint64_t seed = 9000;
    for (bool in_place : {false, true}) {
        EXPECT_TRUE(run_alltoall(world(), CCL_FLOAT64, large_count(CCL_FLOAT64), in_place, ++seed));
        EXPECT_TRUE(run_alltoall(world(), CCL_INT16, 20001, in_place, ++seed));
    }
}

TEST(Alltoallv, UnevenCountsWithZeros) {
    uint64_t seed = 10000;
    // Varied, with zeros scattered over the matrix (the diagonal included for some ranks).
    auto varied = [](int from, int to) -> size_t {
        return (from * 3 + to * 5) % 4 == 0 ? 0 : 1 + size_t(from * 7 + to * 11) % 50;
    };
    for (ccl_datatype_t t : kTypes) EXPECT_TRUE(run_alltoallv(world(), t, varied, ++seed));
    auto zero = [](int, int) -> size_t { return 0; };
    auto self_only = [](int from, int to) -> size_t { return from == to ? 9 : 0; };
    auto to_rank0 = [](int, int to) -> size_t { return to == 0 ? 13 : 0; };
    auto from_last = [n = g_size](int from, int to) -> size_t {
        return from == n - 1 ? 3 + size_t(to) : 0;
    };
    for (ccl_datatype_t t : {CCL_INT8, CCL_FLOAT16, CCL_FLOAT64}) {
        EXPECT_TRUE(run_alltoallv(world(), t, zero, ++seed));
        EXPECT_TRUE(run_alltoallv(world(), t, self_only, ++seed));
        EXPECT_TRUE(run_alltoallv(world(), t, to_rank0, ++seed));
        EXPECT_TRUE(run_alltoallv(world(), t, from_last, ++seed));
    }
}

TEST(Alltoallv, LargeBlocks) {
    uint64_t seed = 11000;
    // Every block larger than the shared-memory buffer would make 8 ranks slow: the blocks to and
    // from rank 0 are large, the rest small or empty.
    auto counts = [](int from, int to) -> size_t {
        if (from == 0 || to == 0) return large_count(CCL_FLOAT64) + size_t(from + to);
        return (from + to) % 3 == 0 ? 0 : 11;
    };
    EXPECT_TRUE(run_alltoallv(world(), CCL_FLOAT64, counts, ++seed));
    // Only rank 0 sends large blocks (the others send small ones, rank 1's to rank 0 larger than
    // the first round's piece): writers with nothing left beside one that needs more rounds or
    // single copy.
    auto mixed = [](int from, int to) -> size_t {
        if (from == 0) return large_count(CCL_FLOAT64) + size_t(to);
        if (from == 1 && to == 0) return 700;
        return (from + to) % 3 == 0 ? 0 : 11;
    };
    EXPECT_TRUE(run_alltoallv(world(), CCL_FLOAT64, mixed, ++seed));
    // Rank 0's blocks large, rank 1's mid-size (24 KB), the rest small: where single copy takes
    // blocks from the one size below the other (the .cma variant: from 8 KiB, below 64 KiB), rank
    // 1 goes single copy and every rank with it, rank 0's large blocks too.
    auto bounded = [](int from, int to) -> size_t {
        if (from == 0) return large_count(CCL_FLOAT64) + size_t(to);
        if (from == 1) return 3000 + size_t(to);
        return (from + to) % 3 == 0 ? 0 : 11;
    };
    EXPECT_TRUE(run_alltoallv(world(), CCL_FLOAT64, bounded, ++seed));
}

// Each collective nonblocking, waited on right away.
TEST(Nonblocking, EachCollective) {
    uint64_t seed = 12000;
    How nb{true, nullptr};
    for (size_t count : {size_t(0), size_t(1), size_t(999), large_count(CCL_INT32)}) {
        for (bool in_place : {false, true}) {
            if (in_place && count > 999) continue;  // keep the run short
            EXPECT_TRUE(
                run_reduce(world(), CCL_FLOAT32, CCL_SUM, count, g_size - 1, in_place, ++seed, nb));
            EXPECT_TRUE(
                run_reduce_scatter(world(), CCL_INT32, CCL_SUM, count, in_place, ++seed, nb));
            EXPECT_TRUE(run_allgather(world(), CCL_FLOAT32, count, in_place, ++seed, nb));
            EXPECT_TRUE(run_alltoall(world(), CCL_INT64, count / 2, in_place, ++seed, nb));
            std::vector<size_t> counts(static_cast<size_t>(g_size));
            for (int r = 0; r < g_size; ++r) counts[size_t(r)] = r % 2 ? 0 : count + size_t(r);
            EXPECT_TRUE(run_allgatherv(world(), CCL_UINT8, counts, in_place, ++seed, nb));
        }
        auto v = [count](int from, int to) -> size_t {
            return (from + to) % 2 ? 0 : count / 4 + size_t(to);
        };
        EXPECT_TRUE(run_alltoallv(world(), CCL_BFLOAT16, v, ++seed, nb));
    }
}

// Every collective of the family outstanding at once (issued in one order, waited in reverse),
// then checked: they ran in issue order on separate buffers.
TEST(Nonblocking, ManyOutstanding) {
    const int n = g_size, me = g_rank;
    for (int it = 0; it < 3; ++it) {
        const size_t count = it == 2 ? large_count(CCL_INT64) / 2 + 1 : size_t(101 + it * 400);
        const uint64_t seed = 13000 + uint64_t(it) * 100;
        std::vector<ccl_request_t> reqs;
        ccl_request_t req = nullptr;

        std::vector<float> red_in(count), red_out(count);
        fill(red_in.data(), count, CCL_FLOAT32, me, seed + 1);
        const int root = it % n;
        CCL_OK(ccl_reduce(red_in.data(), red_out.data(), count, CCL_FLOAT32, CCL_SUM, root, g_comm,
                          nullptr, &req));
        reqs.push_back(req);

        std::vector<int32_t> ag_in(count), ag_out(count * size_t(n));
        fill(ag_in.data(), count, CCL_INT32, me, seed + 2);
        CCL_OK(ccl_allgather(ag_in.data(), ag_out.data(), count, CCL_INT32, g_comm, nullptr, &req));
        reqs.push_back(req);

        std::vector<double> rs_in(count * size_t(n)), rs_out(count);
        fill(rs_in.data(), rs_in.size(), CCL_FLOAT64, me, seed + 3, CCL_MAX);
        CCL_OK(ccl_reduce_scatter(rs_in.data(), rs_out.data(), count, CCL_FLOAT64, CCL_MAX, g_comm,
                                  nullptr, &req));
        reqs.push_back(req);

        std::vector<int16_t> a2a(count * size_t(n));  // in place
        fill(a2a.data(), a2a.size(), CCL_INT16, me, seed + 4);
        CCL_OK(ccl_alltoall(a2a.data(), a2a.data(), count, CCL_INT16, g_comm, nullptr, &req));
        reqs.push_back(req);

        std::vector<size_t> gv(static_cast<size_t>(n));
        for (int r = 0; r < n; ++r) gv[size_t(r)] = r == 1 ? 0 : count / size_t(r + 1);
        size_t gv_total = 0, gv_off = 0;
        for (int r = 0; r < n; ++r) {
            if (r == me) gv_off = gv_total;
            gv_total += gv[size_t(r)];
        }
        std::vector<uint8_t> agv_out(gv_total + 1);  // in place
        fill(agv_out.data() + gv_off, gv[size_t(me)], CCL_UINT8, me, seed + 5);
        CCL_OK(ccl_allgatherv(agv_out.data() + gv_off, gv[size_t(me)], agv_out.data(), gv.data(),
                              CCL_UINT8, g_comm, nullptr, &req));
        reqs.push_back(req);

        auto vc = [count](int from, int to) -> size_t {
            return (from + 2 * to) % 3 == 0 ? 0 : count / 8 + size_t(from);
        };
        std::vector<size_t> sc(static_cast<size_t>(n)), rc(static_cast<size_t>(n));
        size_t stot = 0, rtot = 0;
        for (int j = 0; j < n; ++j) {
            stot += sc[size_t(j)] = vc(me, j);
            rtot += rc[size_t(j)] = vc(j, me);
        }
        std::vector<float> a2av_in(stot + 1), a2av_out(rtot + 1);
        fill(a2av_in.data(), stot, CCL_FLOAT32, me, seed + 6);
        CCL_OK(ccl_alltoallv(a2av_in.data(), sc.data(), a2av_out.data(), rc.data(), CCL_FLOAT32,
                             g_comm, nullptr, &req));
        reqs.push_back(req);

        std::vector<int32_t> ar(count);
        for (size_t i = 0; i < count; ++i) ar[i] = int32_t(i % 100) + me;
        CCL_OK(
            ccl_allreduce(ar.data(), ar.data(), count, CCL_INT32, CCL_SUM, g_comm, nullptr, &req));
        reqs.push_back(req);

        for (auto r = reqs.rbegin(); r != reqs.rend(); ++r) {
            CCL_OK(ccl_wait(*r));
            CCL_OK(ccl_request_free(*r));
        }

        const std::string what = "many outstanding, iteration " + std::to_string(it);
        if (me == root) {
            EXPECT_EQ(check_reduced(red_out.data(), count, CCL_FLOAT32, CCL_SUM, seed + 1, n, 0,
                                    what + " reduce"),
                      0u);
        }
        for (int r = 0; r < n; ++r)
            EXPECT_EQ(check_block(ag_out.data() + size_t(r) * count, count, CCL_INT32, r, seed + 2,
                                  0, what + " allgather"),
                      0u);
        EXPECT_EQ(check_reduced(rs_out.data(), count, CCL_FLOAT64, CCL_MAX, seed + 3, n,
                                size_t(me) * count, what + " reduce_scatter"),
                  0u);
        for (int r = 0; r < n; ++r)
            EXPECT_EQ(check_block(a2a.data() + size_t(r) * count, count, CCL_INT16, r, seed + 4,
                                  size_t(me) * count, what + " alltoall"),
                      0u);
        size_t off = 0;
        for (int r = 0; r < n; ++r) {
            EXPECT_EQ(check_block(agv_out.data() + off, gv[size_t(r)], CCL_UINT8, r, seed + 5, 0,
                                  what + " allgatherv"),
                      0u);
            off += gv[size_t(r)];
        }
        off = 0;
        for (int r = 0; r < n; ++r) {
            size_t first = 0;
            for (int k = 0; k < me; ++k) first += vc(r, k);
            EXPECT_EQ(check_block(a2av_out.data() + off, vc(r, me), CCL_FLOAT32, r, seed + 6, first,
                                  what + " alltoallv"),
                      0u);
            off += vc(r, me);
        }
        for (size_t i = 0; i < count; ++i)
            if (ar[i] != n * int32_t(i % 100) + n * (n - 1) / 2) {
                ADD_FAILURE() << what << " allreduce: element " << i << " is " << ar[i];
                break;
            }
    }
}

// ccl_test polling and attr.synchronous on the new collectives.
TEST(Nonblocking, TestAndSynchronous) {
    const size_t count = 5000;
    std::vector<int64_t> in(count), out(count * size_t(g_size));
    fill(in.data(), count, CCL_INT64, g_rank, 14000);
    ccl_request_t req = nullptr;
    CCL_OK(ccl_allgather(in.data(), out.data(), count, CCL_INT64, g_comm, nullptr, &req));
    int done = 0;
    for (long polls = 0; !done; ++polls) {
        CCL_OK(ccl_test(req, &done));
        std::this_thread::yield();
        ASSERT_LT(polls, 100000000L) << "allgather never completed";
    }
    CCL_OK(ccl_request_free(req));
    for (int r = 0; r < g_size; ++r)
        EXPECT_EQ(check_block(out.data() + size_t(r) * count, count, CCL_INT64, r, 14000, 0,
                              "polled allgather"),
                  0u);

    ccl_coll_attr_t attr = CCL_COLL_ATTR_INIT;
    attr.synchronous = 1;
    std::vector<float> rs(count * size_t(g_size)), res(count);
    fill(rs.data(), rs.size(), CCL_FLOAT32, g_rank, 14001);
    CCL_OK(ccl_reduce_scatter(rs.data(), res.data(), count, CCL_FLOAT32, CCL_SUM, g_comm, &attr,
                              &req));
    done = 0;
    CCL_OK(ccl_test(req, &done));
    EXPECT_EQ(done, 1) << "a synchronous call's request is complete when the call returns";
    CCL_OK(ccl_request_free(req));
    EXPECT_EQ(check_reduced(res.data(), count, CCL_FLOAT32, CCL_SUM, 14001, g_size,
                            size_t(g_rank) * count, "synchronous reduce_scatter"),
              0u);
}

// Cached under a match_id: repeated calls with new buffers (fresh vectors each time) and new
// data, blocking and nonblocking.
TEST(Cache, RepeatedCallsWithNewBuffers) {
    uint64_t seed = 15000;
    std::vector<size_t> gv(static_cast<size_t>(g_size));
    for (int r = 0; r < g_size; ++r) gv[size_t(r)] = r % 3 == 2 ? 0 : 40 + size_t(r) * 3;
    auto vc = [](int from, int to) -> size_t { return (from + to) % 2 ? 0 : 20 + size_t(from); };
    for (int k = 0; k < 6; ++k) {
        for (bool nonblocking : {false, true}) {
            // One match_id per call site (and per blocking-ness: the same one would be fine, but
            // this keeps the two paths' entries apart).
            auto how = [&](const char* id) { return How{nonblocking, id}; };
            const bool in_place = k % 2 == 1;
            const char* sfx = nonblocking ? "-nb" : "-b";
            std::string ids[7];
            const char* names[7] = {"fam-reduce", "fam-reduce-big", "fam-rs",  "fam-ag",
                                    "fam-agv",    "fam-a2a",        "fam-a2av"};
            for (int i = 0; i < 7; ++i) ids[i] = std::string(names[i]) + sfx;
            EXPECT_TRUE(run_reduce(world(), CCL_FLOAT32, CCL_SUM, 777, 0, in_place, ++seed,
                                   how(ids[0].c_str())));
            EXPECT_TRUE(run_reduce(world(), CCL_INT32, CCL_MAX, large_count(CCL_INT32), g_size / 2,
                                   in_place, ++seed, how(ids[1].c_str())));
            EXPECT_TRUE(run_reduce_scatter(world(), CCL_BFLOAT16, CCL_SUM, 333, in_place, ++seed,
                                           how(ids[2].c_str())));
            EXPECT_TRUE(
                run_allgather(world(), CCL_INT8, 4097, in_place, ++seed, how(ids[3].c_str())));
            EXPECT_TRUE(
                run_allgatherv(world(), CCL_FLOAT64, gv, in_place, ++seed, how(ids[4].c_str())));
            EXPECT_TRUE(
                run_alltoall(world(), CCL_UINT32, 55, in_place, ++seed, how(ids[5].c_str())));
            EXPECT_TRUE(run_alltoallv(world(), CCL_FLOAT16, vc, ++seed, how(ids[6].c_str())));
        }
    }
}

// A cached match_id reused for another family call is refused on every rank at submit, and the
// communicator goes on working.
TEST(Cache, SignatureMismatchIsRefused) {
    How how{false, "fam-mismatch"};
    EXPECT_TRUE(run_allgather(world(), CCL_INT32, 10, false, 16000, how));
    std::vector<int32_t> a(11 * size_t(g_size)), b(11 * size_t(g_size));
    ccl_coll_attr_t attr = how.attr();
    EXPECT_FAILS(ccl_allgather(a.data(), b.data(), 11, CCL_INT32, g_comm, &attr, nullptr),
                 CCL_ERROR_INVALID_USAGE, "fam-mismatch");
    EXPECT_FAILS(ccl_alltoall(a.data(), b.data(), 10, CCL_INT32, g_comm, &attr, nullptr),
                 CCL_ERROR_INVALID_USAGE, "fam-mismatch");
    EXPECT_FAILS(
        ccl_reduce_scatter(a.data(), b.data(), 10, CCL_INT32, CCL_SUM, g_comm, &attr, nullptr),
        CCL_ERROR_INVALID_USAGE, "fam-mismatch");
    expect_comm_still_works();
    EXPECT_TRUE(run_allgather(world(), CCL_INT32, 10, true, 16001, how));

    How rhow{false, "fam-mismatch-root"};
    EXPECT_TRUE(run_reduce(world(), CCL_INT32, CCL_SUM, 10, 0, false, 16002, rhow));
    if (g_size > 1) {
        attr = rhow.attr();
        EXPECT_FAILS(
            ccl_reduce(a.data(), b.data(), 10, CCL_INT32, CCL_SUM, 1, g_comm, &attr, nullptr),
            CCL_ERROR_INVALID_USAGE, "fam-mismatch-root");
    }
    expect_comm_still_works();
}

// The family's blocking and nonblocking calls recorded in a group, issued by ccl_group_end.
TEST(Group, FamilyInAGroup) {
    const size_t count = 257;
    const int n = g_size, me = g_rank;
    std::vector<float> red_in(count), red_out(count);
    std::vector<int32_t> ag_in(count), ag_out(count * size_t(n));
    std::vector<int64_t> a2a_in(count * size_t(n)), a2a_out(count * size_t(n));
    std::vector<double> rs_in(count * size_t(n)), rs_out(count);
    fill(red_in.data(), count, CCL_FLOAT32, me, 17001);
    fill(ag_in.data(), count, CCL_INT32, me, 17002);
    fill(a2a_in.data(), a2a_in.size(), CCL_INT64, me, 17003);
    fill(rs_in.data(), rs_in.size(), CCL_FLOAT64, me, 17004, CCL_MIN);
    ccl_request_t req = nullptr;
    CCL_OK(ccl_group_start());
    CCL_OK(ccl_reduce(red_in.data(), red_out.data(), count, CCL_FLOAT32, CCL_SUM, n - 1, g_comm,
                      nullptr, nullptr));
    CCL_OK(ccl_allgather(ag_in.data(), ag_out.data(), count, CCL_INT32, g_comm, nullptr, &req));
    CCL_OK(ccl_alltoall(a2a_in.data(), a2a_out.data(), count, CCL_INT64, g_comm, nullptr, nullptr));
    CCL_OK(ccl_reduce_scatter(rs_in.data(), rs_out.data(), count, CCL_FLOAT64, CCL_MIN, g_comm,
                              nullptr, nullptr));
    CCL_OK(ccl_group_end());
    CCL_OK(ccl_wait(req));
    CCL_OK(ccl_request_free(req));
    if (me == n - 1) {
        EXPECT_EQ(check_reduced(red_out.data(), count, CCL_FLOAT32, CCL_SUM, 17001, n, 0, "group"),
                  0u);
    }
    for (int r = 0; r < n; ++r) {
        EXPECT_EQ(check_block(ag_out.data() + size_t(r) * count, count, CCL_INT32, r, 17002, 0,
                              "group allgather"),
                  0u);
        EXPECT_EQ(check_block(a2a_out.data() + size_t(r) * count, count, CCL_INT64, r, 17003,
                              size_t(me) * count, "group alltoall"),
                  0u);
    }
    EXPECT_EQ(check_reduced(rs_out.data(), count, CCL_FLOAT64, CCL_MIN, 17004, n,
                            size_t(me) * count, "group reduce_scatter"),
              0u);
}

// Buffers that are not aligned to their element size.
TEST(Family, UnalignedBuffers) {
    const int n = g_size, me = g_rank;
    for (size_t offset : {1, 3}) {
        const size_t count = 20001;
        const uint64_t seed = 18000 + offset;
        std::vector<char> in(count * 4 * size_t(n) + 8), out(count * 4 * size_t(n) + 8);
        fill(in.data() + offset, count * size_t(n), CCL_FLOAT32, me, seed);
        CCL_OK(ccl_alltoall(in.data() + offset, out.data() + offset, count, CCL_FLOAT32, g_comm,
                            nullptr, nullptr));
        for (int r = 0; r < n; ++r)
            EXPECT_EQ(check_block(out.data() + offset + size_t(r) * count * 4, count, CCL_FLOAT32,
                                  r, seed, size_t(me) * count, "unaligned alltoall"),
                      0u);
        CCL_OK(ccl_reduce_scatter(in.data() + offset, out.data() + offset, count, CCL_FLOAT32,
                                  CCL_SUM, g_comm, nullptr, nullptr));
        // reduce_scatter reads the same input as a reduction of SUM values: same generator.
        EXPECT_EQ(check_reduced(out.data() + offset, count, CCL_FLOAT32, CCL_SUM, seed, n,
                                size_t(me) * count, "unaligned reduce_scatter"),
                  0u);
        CCL_OK(ccl_allgather(in.data() + offset, out.data() + offset, count, CCL_FLOAT32, g_comm,
                             nullptr, nullptr));
        for (int r = 0; r < n; ++r)
            EXPECT_EQ(check_block(out.data() + offset + size_t(r) * count * 4, count, CCL_FLOAT32,
                                  r, seed, 0, "unaligned allgather"),
                      0u);
        CCL_OK(ccl_reduce(in.data() + offset, out.data() + offset, count, CCL_FLOAT32, CCL_SUM, 0,
                          g_comm, nullptr, nullptr));
        if (me == 0) {
            EXPECT_EQ(check_reduced(out.data() + offset, count, CCL_FLOAT32, CCL_SUM, seed, n, 0,
                                    "unaligned reduce"),
                      0u);
        }
    }
}

// The new collectives interleaved with the old ones, many small calls in a row.
TEST(Family, InterleavedWithAllreduceBroadcastBarrier) {
    const int n = g_size, me = g_rank;
    for (int it = 0; it < 150; ++it) {
        int64_t x = me + it, sum = 0;
        CCL_OK(ccl_reduce(&x, &sum, 1, CCL_INT64, CCL_SUM, it % n, g_comm, nullptr, nullptr));
        if (me == it % n) {
            EXPECT_EQ(sum, int64_t(n) * it + n * (n - 1) / 2) << "iteration " << it;
        }
        std::vector<int32_t> all(size_t(n), -1);
        int32_t mine = me * 1000 + it;
        CCL_OK(ccl_allgather(&mine, all.data(), 1, CCL_INT32, g_comm, nullptr, nullptr));
        for (int r = 0; r < n; ++r) EXPECT_EQ(all[size_t(r)], r * 1000 + it) << "iteration " << it;
        double d = me + 0.5 * it;
        CCL_OK(ccl_allreduce(&d, &d, 1, CCL_FLOAT64, CCL_MAX, g_comm, nullptr, nullptr));
        EXPECT_EQ(d, n - 1 + 0.5 * it);
        std::vector<int16_t> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
        for (int j = 0; j < n; ++j) a[size_t(j)] = int16_t(me * 16 + j + it);
        CCL_OK(ccl_alltoall(a.data(), b.data(), 1, CCL_INT16, g_comm, nullptr, nullptr));
        for (int r = 0; r < n; ++r) EXPECT_EQ(b[size_t(r)], int16_t(r * 16 + me + it));
        std::vector<uint8_t> rs(static_cast<size_t>(n), uint8_t(it));
        uint8_t got = 0;
        CCL_OK(
            ccl_reduce_scatter(rs.data(), &got, 1, CCL_UINT8, CCL_SUM, g_comm, nullptr, nullptr));
        EXPECT_EQ(got, uint8_t(n * it));
        int64_t v = me == it % n ? it : -1;
        CCL_OK(ccl_broadcast(&v, 1, CCL_INT64, it % n, g_comm, nullptr, nullptr));
        EXPECT_EQ(v, it);
        if (it % 10 == 0) {
            CCL_OK(ccl_barrier(g_comm, nullptr));
        }
    }
}

}  // namespace
