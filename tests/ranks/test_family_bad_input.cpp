// Bad input to the collective family, point to point and ccl_comm_split: each refused call gets
// its error code and a message, on every rank that makes it, before any communication, and the
// communicator still works afterwards. Last, ranks that disagree (alltoallv counts that do not
// match, other roots or counts, small rounds against others) get CCL_ERROR_INVALID_USAGE on every
// rank (across nodes: the ranks that see it; the others' next call fails), on communicators made
// for the purpose, leaving the main one working.
#include <sys/mman.h>

#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "common.h"
#include "reference.h"

using namespace test;

namespace {

// The call fails with `code` and its message mentions one of `w1`, `w2`.
#define EXPECT_FAILS_EITHER(call, code, w1, w2)                                                \
    do {                                                                                       \
        ccl_result_t r_ = (call);                                                              \
        EXPECT_EQ(r_, code) << #call << ": " << ccl_last_error();                              \
        std::string m_ = ccl_last_error();                                                     \
        EXPECT_TRUE(m_.find(w1) != std::string::npos || m_.find(w2) != std::string::npos)      \
            << #call << ": message '" << m_ << "' mentions neither '" << w1 << "' nor '" << w2 \
            << "'";                                                                            \
    } while (0)

constexpr size_t kCount = 4;
const ccl_datatype_t kBadType = ccl_datatype_t(99);
const ccl_reduction_t kBadOp = ccl_reduction_t(42);

// Buffers big enough for any call below with kCount elements per block.
struct Bufs {
    std::vector<int32_t> send, recv;
    std::vector<size_t> counts;
    Bufs()
        : send(kCount * size_t(g_size) + 8, 1),
          recv(kCount * size_t(g_size) + 8, 2),
          counts(size_t(g_size), kCount) {}
};

TEST(FamilyBadInput, NullBuffers) {
    Bufs b;
    int32_t* s = b.send.data();
    int32_t* r = b.recv.data();
    const size_t* c = b.counts.data();
    const int root = g_size - 1;
    EXPECT_FAILS(ccl_reduce(nullptr, r, kCount, CCL_INT32, CCL_SUM, root, g_comm, nullptr, nullptr),
                 CCL_ERROR_INVALID_ARGUMENT, "send");
    // recv NULL is refused at the root only; the other ranks make their call fail too (a NULL
    // send) so that nobody enters a collective alone.
    if (g_rank == root)
        EXPECT_FAILS(
            ccl_reduce(s, nullptr, kCount, CCL_INT32, CCL_SUM, root, g_comm, nullptr, nullptr),
            CCL_ERROR_INVALID_ARGUMENT, "recv");
    else
        EXPECT_FAILS(ccl_reduce(nullptr, nullptr, kCount, CCL_INT32, CCL_SUM, root, g_comm, nullptr,
                                nullptr),
                     CCL_ERROR_INVALID_ARGUMENT, "send");
    EXPECT_FAILS(ccl_allgather(nullptr, r, kCount, CCL_INT32, g_comm, nullptr, nullptr),
                 CCL_ERROR_INVALID_ARGUMENT, "send");
    EXPECT_FAILS(ccl_allgather(s, nullptr, kCount, CCL_INT32, g_comm, nullptr, nullptr),
                 CCL_ERROR_INVALID_ARGUMENT, "recv");
    EXPECT_FAILS(ccl_allgatherv(nullptr, kCount, r, c, CCL_INT32, g_comm, nullptr, nullptr),
                 CCL_ERROR_INVALID_ARGUMENT, "send");
    EXPECT_FAILS(ccl_allgatherv(s, kCount, nullptr, c, CCL_INT32, g_comm, nullptr, nullptr),
                 CCL_ERROR_INVALID_ARGUMENT, "recv");
    EXPECT_FAILS(ccl_allgatherv(s, kCount, r, nullptr, CCL_INT32, g_comm, nullptr, nullptr),
                 CCL_ERROR_INVALID_ARGUMENT, "recvcounts");
    EXPECT_FAILS(
        ccl_reduce_scatter(nullptr, r, kCount, CCL_INT32, CCL_SUM, g_comm, nullptr, nullptr),
        CCL_ERROR_INVALID_ARGUMENT, "send");
    EXPECT_FAILS(
        ccl_reduce_scatter(s, nullptr, kCount, CCL_INT32, CCL_SUM, g_comm, nullptr, nullptr),
        CCL_ERROR_INVALID_ARGUMENT, "recv");
    EXPECT_FAILS(ccl_alltoall(nullptr, r, kCount, CCL_INT32, g_comm, nullptr, nullptr),
                 CCL_ERROR_INVALID_ARGUMENT, "send");
    EXPECT_FAILS(ccl_alltoall(s, nullptr, kCount, CCL_INT32, g_comm, nullptr, nullptr),
                 CCL_ERROR_INVALID_ARGUMENT, "recv");
    EXPECT_FAILS(ccl_alltoallv(nullptr, c, r, c, CCL_INT32, g_comm, nullptr, nullptr),
                 CCL_ERROR_INVALID_ARGUMENT, "send");
    EXPECT_FAILS(ccl_alltoallv(s, c, nullptr, c, CCL_INT32, g_comm, nullptr, nullptr),
                 CCL_ERROR_INVALID_ARGUMENT, "recv");
    EXPECT_FAILS(ccl_alltoallv(s, nullptr, r, c, CCL_INT32, g_comm, nullptr, nullptr),
                 CCL_ERROR_INVALID_ARGUMENT, "sendcounts");
    EXPECT_FAILS(ccl_alltoallv(s, c, r, nullptr, CCL_INT32, g_comm, nullptr, nullptr),
                 CCL_ERROR_INVALID_ARGUMENT, "recvcounts");
    EXPECT_FAILS(ccl_send(nullptr, kCount, CCL_INT32, 0, g_comm, nullptr),
                 CCL_ERROR_INVALID_ARGUMENT, "buf");
    EXPECT_FAILS(ccl_recv(nullptr, kCount, CCL_INT32, 0, g_comm, nullptr),
                 CCL_ERROR_INVALID_ARGUMENT, "buf");
    expect_comm_still_works();
}

// NULL buffers with count 0 are fine, and still collective.
TEST(FamilyBadInput, NullBuffersWithCountZero) {
    std::vector<size_t> zeros(size_t(g_size), 0);
    CCL_OK(ccl_reduce(nullptr, nullptr, 0, CCL_FLOAT32, CCL_SUM, 0, g_comm, nullptr, nullptr));
    CCL_OK(ccl_allgather(nullptr, nullptr, 0, CCL_FLOAT32, g_comm, nullptr, nullptr));
    CCL_OK(
        ccl_allgatherv(nullptr, 0, nullptr, zeros.data(), CCL_FLOAT32, g_comm, nullptr, nullptr));
    CCL_OK(ccl_reduce_scatter(nullptr, nullptr, 0, CCL_FLOAT32, CCL_MAX, g_comm, nullptr, nullptr));
    CCL_OK(ccl_alltoall(nullptr, nullptr, 0, CCL_FLOAT32, g_comm, nullptr, nullptr));
    CCL_OK(ccl_alltoallv(nullptr, zeros.data(), nullptr, zeros.data(), CCL_FLOAT32, g_comm, nullptr,
                         nullptr));
    expect_comm_still_works();
}

TEST(FamilyBadInput, InvalidTypeOpRootPeer) {
    Bufs b;
    int32_t* s = b.send.data();
    int32_t* r = b.recv.data();
    const size_t* c = b.counts.data();
    for (ccl_datatype_t t : {kBadType, ccl_datatype_t(-1), ccl_datatype_t(12)}) {
        EXPECT_FAILS(ccl_reduce(s, r, kCount, t, CCL_SUM, 0, g_comm, nullptr, nullptr),
                     CCL_ERROR_INVALID_ARGUMENT, "datatype");
        EXPECT_FAILS(ccl_allgather(s, r, kCount, t, g_comm, nullptr, nullptr),
                     CCL_ERROR_INVALID_ARGUMENT, "datatype");
        EXPECT_FAILS(ccl_allgatherv(s, kCount, r, c, t, g_comm, nullptr, nullptr),
                     CCL_ERROR_INVALID_ARGUMENT, "datatype");
        EXPECT_FAILS(ccl_reduce_scatter(s, r, kCount, t, CCL_SUM, g_comm, nullptr, nullptr),
                     CCL_ERROR_INVALID_ARGUMENT, "datatype");
        EXPECT_FAILS(ccl_alltoall(s, r, kCount, t, g_comm, nullptr, nullptr),
                     CCL_ERROR_INVALID_ARGUMENT, "datatype");
        EXPECT_FAILS(ccl_alltoallv(s, c, r, c, t, g_comm, nullptr, nullptr),
                     CCL_ERROR_INVALID_ARGUMENT, "datatype");
        EXPECT_FAILS(ccl_send(s, kCount, t, 0, g_comm, nullptr), CCL_ERROR_INVALID_ARGUMENT,
                     "datatype");
        EXPECT_FAILS(ccl_recv(r, kCount, t, 0, g_comm, nullptr), CCL_ERROR_INVALID_ARGUMENT,
                     "datatype");
    }
    for (ccl_reduction_t op : {kBadOp, ccl_reduction_t(-1), ccl_reduction_t(5)}) {
        EXPECT_FAILS(ccl_reduce(s, r, kCount, CCL_INT32, op, 0, g_comm, nullptr, nullptr),
                     CCL_ERROR_INVALID_ARGUMENT, "reduction");
        EXPECT_FAILS(ccl_reduce_scatter(s, r, kCount, CCL_INT32, op, g_comm, nullptr, nullptr),
                     CCL_ERROR_INVALID_ARGUMENT, "reduction");
    }
    for (int root : {-1, g_size, g_size + 100, INT_MIN}) {
        EXPECT_FAILS(ccl_reduce(s, r, kCount, CCL_INT32, CCL_SUM, root, g_comm, nullptr, nullptr),
                     CCL_ERROR_INVALID_ARGUMENT, "root");
        // Even with count 0 and NULL buffers.
        EXPECT_FAILS(
            ccl_reduce(nullptr, nullptr, 0, CCL_INT32, CCL_SUM, root, g_comm, nullptr, nullptr),
            CCL_ERROR_INVALID_ARGUMENT, "root");
    }
    for (int peer : {-1, g_size, CCL_UNDEFINED - 1, INT_MAX}) {
        EXPECT_FAILS(ccl_send(s, kCount, CCL_INT32, peer, g_comm, nullptr),
                     CCL_ERROR_INVALID_ARGUMENT, "peer");
        EXPECT_FAILS(ccl_recv(r, kCount, CCL_INT32, peer, g_comm, nullptr),
                     CCL_ERROR_INVALID_ARGUMENT, "peer");
        EXPECT_FAILS(ccl_send(nullptr, 0, CCL_INT32, peer, g_comm, nullptr),
                     CCL_ERROR_INVALID_ARGUMENT, "peer");
    }
    expect_comm_still_works();
}

TEST(FamilyBadInput, CountsAndOverflow) {
    Bufs b;
    int32_t* s = b.send.data();
    int32_t* r = b.recv.data();
    // sendcount must be recvcounts[this rank].
    std::vector<size_t> counts(size_t(g_size), kCount);
    EXPECT_FAILS(
        ccl_allgatherv(s, kCount + 1, r, counts.data(), CCL_INT32, g_comm, nullptr, nullptr),
        CCL_ERROR_INVALID_ARGUMENT, "sendcount");
    EXPECT_FAILS(ccl_allgatherv(s, 0, r, counts.data(), CCL_INT32, g_comm, nullptr, nullptr),
                 CCL_ERROR_INVALID_ARGUMENT, "sendcount");
    // Sizes no buffer can have.
    const size_t huge = SIZE_MAX / 2;
    EXPECT_FAILS(ccl_reduce(s, r, huge, CCL_INT32, CCL_SUM, 0, g_comm, nullptr, nullptr),
                 CCL_ERROR_INVALID_ARGUMENT, "overflow");
    EXPECT_FAILS(ccl_allgather(s, r, huge, CCL_INT32, g_comm, nullptr, nullptr),
                 CCL_ERROR_INVALID_ARGUMENT, "overflow");
    EXPECT_FAILS(ccl_reduce_scatter(s, r, huge, CCL_INT32, CCL_SUM, g_comm, nullptr, nullptr),
                 CCL_ERROR_INVALID_ARGUMENT, "overflow");
    EXPECT_FAILS(ccl_alltoall(s, r, huge, CCL_INT32, g_comm, nullptr, nullptr),
                 CCL_ERROR_INVALID_ARGUMENT, "overflow");
    EXPECT_FAILS(ccl_send(s, huge, CCL_INT32, 0, g_comm, nullptr), CCL_ERROR_INVALID_ARGUMENT,
                 "overflow");
    EXPECT_FAILS(ccl_recv(r, huge, CCL_INT32, 0, g_comm, nullptr), CCL_ERROR_INVALID_ARGUMENT,
                 "overflow");
    // Per-rank counts that each fit but whose total does not (with one rank, the single count is
    // too large already).
    std::vector<size_t> big(size_t(g_size), size_t(PTRDIFF_MAX) / size_t(g_size) + 1);
    EXPECT_FAILS(
        ccl_allgatherv(s, big[size_t(g_rank)], r, big.data(), CCL_INT8, g_comm, nullptr, nullptr),
        CCL_ERROR_INVALID_ARGUMENT, "overflow");
    EXPECT_FAILS(
        ccl_alltoallv(s, big.data(), r, b.counts.data(), CCL_INT8, g_comm, nullptr, nullptr),
        CCL_ERROR_INVALID_ARGUMENT, "overflow");
    EXPECT_FAILS(
        ccl_alltoallv(s, b.counts.data(), r, big.data(), CCL_INT8, g_comm, nullptr, nullptr),
        CCL_ERROR_INVALID_ARGUMENT, "overflow");
    expect_comm_still_works();
}

// Counts whose byte sizes fit in size_t (and in ptrdiff_t) but that no buffer can have, since no
// process addresses that much: refused naming the argument, on every rank, before anything is
// read or written (alltoallv sendcounts of 2^61 used to crash).
TEST(FamilyBadInput, CountsNoBufferCanHave) {
    Bufs b;
    int32_t* s = b.send.data();
    int32_t* r = b.recv.data();
    for (const size_t huge : {size_t(1) << 61, size_t(1) << 58, size_t(PTRDIFF_MAX) / 2}) {
        SCOPED_TRACE(huge);
        const size_t n = huge / sizeof(int32_t);  // elements: huge bytes
        EXPECT_FAILS(ccl_allreduce(s, r, n, CCL_INT32, CCL_SUM, g_comm, nullptr, nullptr),
                     CCL_ERROR_INVALID_ARGUMENT, "count");
        EXPECT_FAILS(ccl_broadcast(s, n, CCL_INT32, 0, g_comm, nullptr, nullptr),
                     CCL_ERROR_INVALID_ARGUMENT, "count");
        EXPECT_FAILS(ccl_reduce(s, r, n, CCL_INT32, CCL_SUM, 0, g_comm, nullptr, nullptr),
                     CCL_ERROR_INVALID_ARGUMENT, "count");
        const size_t per_rank = n / size_t(g_size);
        EXPECT_FAILS(ccl_allgather(s, r, per_rank, CCL_INT32, g_comm, nullptr, nullptr),
                     CCL_ERROR_INVALID_ARGUMENT, "sendcount");
        EXPECT_FAILS(
            ccl_reduce_scatter(s, r, per_rank, CCL_INT32, CCL_SUM, g_comm, nullptr, nullptr),
            CCL_ERROR_INVALID_ARGUMENT, "recvcount");
        EXPECT_FAILS(ccl_alltoall(s, r, per_rank, CCL_INT32, g_comm, nullptr, nullptr),
                     CCL_ERROR_INVALID_ARGUMENT, "count");
        EXPECT_FAILS(ccl_send(s, n, CCL_INT32, 0, g_comm, nullptr), CCL_ERROR_INVALID_ARGUMENT,
                     "count");
        EXPECT_FAILS(ccl_recv(r, n, CCL_INT32, 0, g_comm, nullptr), CCL_ERROR_INVALID_ARGUMENT,
                     "count");
        ccl_request_t req = nullptr;
        EXPECT_FAILS(ccl_send(s, n, CCL_INT32, 0, g_comm, &req), CCL_ERROR_INVALID_ARGUMENT,
                     "count");
        EXPECT_EQ(req, nullptr);
        // One block of a v-collective that large (the last peer's), the others small.
        std::vector<size_t> counts(size_t(g_size), kCount);
        counts.back() = huge;
        EXPECT_FAILS(
            ccl_alltoallv(s, counts.data(), r, b.counts.data(), CCL_INT8, g_comm, nullptr, nullptr),
            CCL_ERROR_INVALID_ARGUMENT, "sendcounts");
        EXPECT_FAILS(
            ccl_alltoallv(s, b.counts.data(), r, counts.data(), CCL_INT8, g_comm, nullptr, nullptr),
            CCL_ERROR_INVALID_ARGUMENT, "recvcounts");
        EXPECT_FAILS(ccl_allgatherv(s, counts[size_t(g_rank)], r, counts.data(), CCL_INT8, g_comm,
                                    nullptr, nullptr),
                     CCL_ERROR_INVALID_ARGUMENT, "recvcounts");
        // Blocks that each could exist but not together.
        std::vector<size_t> halves(size_t(g_size) + 1, (size_t(1) << 56) / 2 + 1);
        if (g_size > 1) {
            EXPECT_FAILS(ccl_alltoallv(s, halves.data(), r, b.counts.data(), CCL_INT8, g_comm,
                                       nullptr, nullptr),
                         CCL_ERROR_INVALID_ARGUMENT, "sendcounts");
        }
    }
    // A size that may exist, from a buffer that leaves too little room after it: refused for
    // the buffer (or, where the address space is smaller than that size, for the count).
    const size_t almost = (size_t(1) << 56) - (size_t(1) << 46);
    int32_t top[4] = {};
    EXPECT_FAILS_EITHER(
        ccl_allreduce(top, top, almost, CCL_INT8, CCL_SUM, g_comm, nullptr, nullptr),
        CCL_ERROR_INVALID_ARGUMENT, "send", "count");
    expect_comm_still_works();
}

// Overlaps that are not the in-place form ccl.h defines are refused on every rank.
TEST(FamilyBadInput, Overlap) {
    Bufs b;
    int32_t* s = b.send.data();
    int32_t* r = b.recv.data();
    const size_t* c = b.counts.data();
    // allgather(v): send one element past this rank's own block of recv.
    int32_t* own_plus_one = r + size_t(g_rank) * kCount + 1;
    EXPECT_FAILS(ccl_allgather(own_plus_one, r, kCount, CCL_INT32, g_comm, nullptr, nullptr),
                 CCL_ERROR_INVALID_ARGUMENT, "overlap");
    EXPECT_FAILS(ccl_allgatherv(own_plus_one, kCount, r, c, CCL_INT32, g_comm, nullptr, nullptr),
                 CCL_ERROR_INVALID_ARGUMENT, "overlap");
    // reduce_scatter: recv one element past this rank's own block of send.
    EXPECT_FAILS(ccl_reduce_scatter(s, s + size_t(g_rank) * kCount + 1, kCount, CCL_INT32, CCL_SUM,
                                    g_comm, nullptr, nullptr),
                 CCL_ERROR_INVALID_ARGUMENT, "overlap");
    // alltoall: recv one element after send.
    EXPECT_FAILS(ccl_alltoall(s, s + 1, kCount, CCL_INT32, g_comm, nullptr, nullptr),
                 CCL_ERROR_INVALID_ARGUMENT, "overlap");
    // reduce: an overlap at the root (the other ranks fail their call on a NULL send).
    if (g_rank == 0)
        EXPECT_FAILS(ccl_reduce(s, s + 1, kCount, CCL_INT32, CCL_SUM, 0, g_comm, nullptr, nullptr),
                     CCL_ERROR_INVALID_ARGUMENT, "overlap");
    else
        EXPECT_FAILS(
            ccl_reduce(nullptr, r, kCount, CCL_INT32, CCL_SUM, 0, g_comm, nullptr, nullptr),
            CCL_ERROR_INVALID_ARGUMENT, "send");
    // alltoallv is never in place: send == recv is refused, and so is a partial overlap.
    EXPECT_FAILS_EITHER(ccl_alltoallv(s, c, s, c, CCL_INT32, g_comm, nullptr, nullptr),
                        CCL_ERROR_INVALID_ARGUMENT, "place", "overlap");
    EXPECT_FAILS(ccl_alltoallv(s, c, s + 1, c, CCL_INT32, g_comm, nullptr, nullptr),
                 CCL_ERROR_INVALID_ARGUMENT, "overlap");
    expect_comm_still_works();
    // The allowed in-place forms still pass.
    EXPECT_TRUE(run_allgather(Ctx{g_comm, g_rank, g_size}, CCL_INT32, kCount, true, 1));
    EXPECT_TRUE(
        run_reduce_scatter(Ctx{g_comm, g_rank, g_size}, CCL_INT32, CCL_SUM, kCount, true, 2));
    EXPECT_TRUE(run_alltoall(Ctx{g_comm, g_rank, g_size}, CCL_INT32, kCount, true, 3));
}

TEST(FamilyBadInput, SplitArguments) {
    ccl_comm_t sub = reinterpret_cast<ccl_comm_t>(uintptr_t(0x4560));
    for (int color : {-2, -100, INT_MIN}) {
        EXPECT_FAILS(ccl_comm_split(g_comm, color, 0, &sub), CCL_ERROR_INVALID_ARGUMENT, "color");
    }
    EXPECT_FAILS(ccl_comm_split(g_comm, 0, 0, nullptr), CCL_ERROR_INVALID_ARGUMENT, "newcomm");
    EXPECT_FAILS(ccl_comm_split(g_comm, CCL_UNDEFINED, 0, nullptr), CCL_ERROR_INVALID_ARGUMENT,
                 "newcomm");
    EXPECT_FAILS(ccl_comm_split(nullptr, 0, 0, &sub), CCL_ERROR_INVALID_ARGUMENT, "communicator");
    EXPECT_FAILS(ccl_comm_split(reinterpret_cast<ccl_comm_t>(uintptr_t(0xdead0)), 0, 0, &sub),
                 CCL_ERROR_INVALID_ARGUMENT, "not valid");
    expect_comm_still_works();
    // A good split after the refused ones.
    ccl_comm_t ok = nullptr;
    CCL_OK(ccl_comm_split(g_comm, g_rank % 2, g_rank, &ok));
    ASSERT_NE(ok, nullptr);
    int size = 0;
    CCL_OK(ccl_comm_size(ok, &size));
    EXPECT_EQ(size, g_rank % 2 ? g_size / 2 : (g_size + 1) / 2);
    CCL_OK(ccl_comm_destroy(ok));
    // A destroyed communicator cannot be split.
    EXPECT_FAILS(ccl_comm_split(ok, 0, 0, &sub), CCL_ERROR_INVALID_ARGUMENT, "not valid");
    expect_comm_still_works();
}

// Handles, attributes and requests: the new functions check them like the old ones, and a refused
// nonblocking call leaves *req alone.
TEST(FamilyBadInput, HandlesAttrAndRequests) {
    Bufs b;
    int32_t* s = b.send.data();
    int32_t* r = b.recv.data();
    const size_t* c = b.counts.data();
    ccl_comm_t bad = reinterpret_cast<ccl_comm_t>(uintptr_t(0xdead0));
    EXPECT_FAILS(ccl_reduce(s, r, 1, CCL_INT32, CCL_SUM, 0, nullptr, nullptr, nullptr),
                 CCL_ERROR_INVALID_ARGUMENT, "NULL");
    EXPECT_FAILS(ccl_allgather(s, r, 1, CCL_INT32, bad, nullptr, nullptr),
                 CCL_ERROR_INVALID_ARGUMENT, "not valid");
    EXPECT_FAILS(ccl_alltoallv(s, c, r, c, CCL_INT32, bad, nullptr, nullptr),
                 CCL_ERROR_INVALID_ARGUMENT, "not valid");
    EXPECT_FAILS(ccl_send(s, 1, CCL_INT32, 0, nullptr, nullptr), CCL_ERROR_INVALID_ARGUMENT,
                 "NULL");
    EXPECT_FAILS(ccl_recv(r, 1, CCL_INT32, 0, bad, nullptr), CCL_ERROR_INVALID_ARGUMENT,
                 "not valid");

    ccl_coll_attr_t zero;
    std::memset(&zero, 0, sizeof(zero));
    EXPECT_FAILS(ccl_alltoall(s, r, 1, CCL_INT32, g_comm, &zero, nullptr),
                 CCL_ERROR_INVALID_ARGUMENT, "CCL_COLL_ATTR_INIT");
    ccl_coll_attr_t no_id = CCL_COLL_ATTR_INIT;
    no_id.to_cache = 1;
    EXPECT_FAILS(ccl_reduce_scatter(s, r, 1, CCL_INT32, CCL_SUM, g_comm, &no_id, nullptr),
                 CCL_ERROR_INVALID_ARGUMENT, "match_id");

    ccl_request_t req = nullptr;
    EXPECT_FAILS(ccl_reduce(nullptr, r, 1, CCL_INT32, CCL_SUM, 0, g_comm, nullptr, &req),
                 CCL_ERROR_INVALID_ARGUMENT, "send");
    EXPECT_FAILS(ccl_allgatherv(s, 1, r, nullptr, CCL_INT32, g_comm, nullptr, &req),
                 CCL_ERROR_INVALID_ARGUMENT, "recvcounts");
    EXPECT_FAILS(ccl_alltoallv(s, c, s, c, CCL_INT32, g_comm, nullptr, &req),
                 CCL_ERROR_INVALID_ARGUMENT, "");
    EXPECT_FAILS(ccl_send(s, 1, CCL_INT32, -1, g_comm, &req), CCL_ERROR_INVALID_ARGUMENT, "peer");
    EXPECT_FAILS(ccl_recv(r, 1, kBadType, 0, g_comm, &req), CCL_ERROR_INVALID_ARGUMENT, "datatype");
    EXPECT_EQ(req, nullptr) << "a refused call set *req";
    expect_comm_still_works();
}

// Ranks that disagree get CCL_ERROR_INVALID_USAGE on every rank, never a wrong result or a hang;
// the communicator is then broken (it says so), and the main one is not affected. Each case uses
// a communicator of its own.
// `may_succeed`: this rank takes no result from the call (a non-root of a reduce), so it may
// finish before the disagreement shows; the communicator must still refuse its next collective.
void expect_breaks(const std::string& what, const std::function<ccl_result_t(ccl_comm_t)>& call,
                   bool may_succeed = false) {
    ccl_comm_t c = nullptr;
    CCL_OK(ccl_comm_create_from_env(&c));
    ccl_result_t r = call(c);
    if (!(may_succeed && r == CCL_SUCCESS)) {
        EXPECT_EQ(r, CCL_ERROR_INVALID_USAGE)
            << what << ": " << ccl_strerror(r) << ": " << ccl_last_error();
    }
    ccl_result_t again = ccl_barrier(c, nullptr);
    EXPECT_NE(again, CCL_SUCCESS) << what << ": the broken communicator still runs collectives";
    if (r != CCL_SUCCESS) {
        EXPECT_NE(std::string(ccl_last_error()).find("broken"), std::string::npos)
            << what << ": " << ccl_last_error();
    }
    CCL_OK(ccl_comm_destroy(c));
    expect_comm_still_works();
}

TEST(FamilyMismatch, AlltoallvCountsDisagreeOnEveryRank) {
    // Every rank expects one element more from its right neighbour than that rank sends (with one
    // rank: from itself).
    expect_breaks("every rank mismatched", [](ccl_comm_t c) {
        std::vector<size_t> sc(size_t(g_size), 3), rc(size_t(g_size), 3);
        rc[size_t((g_rank + 1) % g_size)] = 4;
        std::vector<int32_t> s(3 * size_t(g_size), g_rank), d(4 * size_t(g_size), -1);
        return ccl_alltoallv(s.data(), sc.data(), d.data(), rc.data(), CCL_INT32, c, nullptr,
                             nullptr);
    });
}

// Whether the world spans several nodes: there only the ranks whose fabric receives get a message
// of another size see a disagreement in the call itself; the others may finish it and then find
// the communicator broken (a failure notice), at their next call.
bool across_nodes() {
    int nodes = 1;
    EXPECT_EQ(ccl_comm_nodes(g_comm, &nodes, nullptr, 0), CCL_SUCCESS) << ccl_last_error();
    return nodes > 1;
}

// The rank's team: at least one thread, as many as CCL_RANK_THREADS asks where it is set; bad
// handles and outputs refused.
TEST(CommQueries, Threads) {
    int threads = 0;
    ASSERT_EQ(ccl_comm_threads(g_comm, &threads), CCL_SUCCESS) << ccl_last_error();
    EXPECT_GE(threads, 1);
    if (const char* v = std::getenv("CCL_RANK_THREADS")) {
        EXPECT_EQ(threads, std::atoi(v));
    }
    EXPECT_EQ(ccl_comm_threads(g_comm, nullptr), CCL_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(ccl_comm_threads(nullptr, &threads), CCL_SUCCESS);
}

TEST(FamilyMismatch, AlltoallvCountsDisagreeOnOneRank) {
    // Only rank 0's recvcounts are wrong, and only for its last peer; every rank must fail (its
    // next call at least, across nodes).
    const bool may_succeed = g_rank != 0 && across_nodes();
    expect_breaks(
        "rank 0 mismatched",
        [](ccl_comm_t c) {
            std::vector<size_t> sc(size_t(g_size), 2), rc(size_t(g_size), 2);
            if (g_rank == 0) rc[size_t(g_size - 1)] = 1;
            std::vector<float> s(2 * size_t(g_size), 1.0f), d(2 * size_t(g_size), -1.0f);
            return ccl_alltoallv(s.data(), sc.data(), d.data(), rc.data(), CCL_FLOAT32, c, nullptr,
                                 nullptr);
        },
        may_succeed);
    // The same through a nonblocking call: the error comes through every rank's request.
    expect_breaks(
        "rank 0 mismatched, nonblocking",
        [may_succeed](ccl_comm_t c) {
            std::vector<size_t> sc(size_t(g_size), 2), rc(size_t(g_size), 2);
            if (g_rank == 0) rc[0] = 3;
            std::vector<float> s(2 * size_t(g_size), 1.0f), d(3 * size_t(g_size), -1.0f);
            ccl_request_t req = nullptr;
            ccl_result_t r = ccl_alltoallv(s.data(), sc.data(), d.data(), rc.data(), CCL_FLOAT32, c,
                                           nullptr, &req);
            if (r != CCL_SUCCESS) return r;
            r = ccl_wait(req);
            std::string msg = ccl_last_error();
            ccl_request_free(req);
            if (r != CCL_ERROR_INVALID_USAGE && !(may_succeed && r == CCL_SUCCESS))
                ADD_FAILURE() << "wait: " << ccl_strerror(r) << ": " << msg;
            return r;
        },
        may_succeed);
}

// A count that needs more than 32 bits travels in a wide record (shm/alltoall.cpp packs counts
// in 4 bytes where they all fit): rank 0 claims 2^32 + 1 bytes for its last peer, which expects
// one. The peer must name the count as sent; read as 4 bytes it would be 1 and match. The send
// buffer is reserved address space only: the call fails before anything is read past its start.
TEST(FamilyMismatch, AlltoallvWideCountDisagrees) {
    if (g_size < 2) GTEST_SKIP() << "needs two ranks";
    if (across_nodes()) GTEST_SKIP() << "a 4 GiB message across nodes";
    constexpr size_t kWide = (size_t(1) << 32) + 1;
    const size_t map_bytes = kWide + size_t(g_size);
    void* map =
        mmap(nullptr, map_bytes, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    ASSERT_NE(map, MAP_FAILED) << std::strerror(errno);
    std::string message;
    expect_breaks("a wide count", [&](ccl_comm_t c) {
        std::vector<size_t> sc(size_t(g_size), 1), rc(size_t(g_size), 1);
        if (g_rank == 0) sc[size_t(g_size - 1)] = kWide;
        std::vector<int8_t> d(size_t(g_size), -1);
        ccl_result_t r =
            ccl_alltoallv(map, sc.data(), d.data(), rc.data(), CCL_INT8, c, nullptr, nullptr);
        message = ccl_last_error();
        return r;
    });
    if (g_rank == g_size - 1) {
        EXPECT_NE(message.find("rank 0 sends 4294967297 elements"), std::string::npos) << message;
    }
    munmap(map, map_bytes);
}

TEST(FamilyMismatch, RootsOrCountsDisagree) {
    if (g_size < 2) GTEST_SKIP() << "needs two ranks";
    // Rank 0 reduces to itself, the others to rank 1: both roots must see the disagreement.
    expect_breaks(
        "reduce roots disagree",
        [](ccl_comm_t c) {
            std::vector<int32_t> s(8, 1), d(8, 0);
            return ccl_reduce(s.data(), d.data(), 8, CCL_INT32, CCL_SUM, g_rank == 0 ? 0 : 1, c,
                              nullptr, nullptr);
        },
        g_rank > 1);
    expect_breaks("allgather counts disagree", [](ccl_comm_t c) {
        std::vector<int32_t> s(9, 1), d(9 * size_t(g_size), 0);
        return ccl_allgather(s.data(), d.data(), g_rank == 0 ? 9 : 8, CCL_INT32, c, nullptr,
                             nullptr);
    });
    expect_breaks("reduce_scatter vs alltoall", [](ccl_comm_t c) {
        std::vector<int32_t> s(8 * size_t(g_size), 1), d(8 * size_t(g_size), 0);
        return g_rank == 0 ? ccl_reduce_scatter(s.data(), d.data(), 8, CCL_INT32, CCL_SUM, c,
                                                nullptr, nullptr)
                           : ccl_alltoall(s.data(), d.data(), 8, CCL_INT32, c, nullptr, nullptr);
    });
}

// Messages of up to 56 bytes travel in eager lines that the readers wait on instead of flags:
// disagreements between such rounds and others are found all the same.
TEST(FamilyMismatch, EagerRoundsDisagree) {
    if (g_size < 2) GTEST_SKIP() << "needs two ranks";
    expect_breaks("small allreduce vs broadcast", [](ccl_comm_t c) {
        std::vector<float> b(1024, 1.0f);
        return g_rank == 0
                   ? ccl_allreduce(b.data(), b.data(), 2, CCL_FLOAT32, CCL_SUM, c, nullptr, nullptr)
                   : ccl_broadcast(b.data(), 1024, CCL_FLOAT32, 0, c, nullptr, nullptr);
    });
    expect_breaks("small allreduce vs barrier", [](ccl_comm_t c) {
        float x = 1;
        return g_rank == 1 ? ccl_allreduce(&x, &x, 1, CCL_FLOAT32, CCL_SUM, c, nullptr, nullptr)
                           : ccl_barrier(c, nullptr);
    });
    // Rank 1 broadcasts from rank 0 what rank 0 takes for an allreduce.
    expect_breaks("small broadcast vs allreduce", [](ccl_comm_t c) {
        float x[4] = {1, 2, 3, 4};
        return g_rank == 0 ? ccl_allreduce(x, x, 4, CCL_FLOAT32, CCL_SUM, c, nullptr, nullptr)
                           : ccl_broadcast(x, 4, CCL_FLOAT32, 0, c, nullptr, nullptr);
    });
}

}  // namespace
