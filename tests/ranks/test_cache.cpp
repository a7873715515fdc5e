// The match_id schedule cache through the C ABI: hits with new buffers, misses, a reused match_id
// with another signature or communicator refused (at submit, on every rank, leaving the
// communicator usable), LRU eviction, entries freed by ccl_comm_destroy, to_cache=0, bad
// match_ids, and cached nonblocking calls. Registered with CCL_CACHE_SIZE=4.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common.h"

using namespace test;

namespace {

float fval(int r, size_t i, int k) { return float(2 * r + 1 + int(i % 61) + k); }
float fsum(size_t i, int k) { return float(g_size * g_size + g_size * (int(i % 61) + k)); }

std::vector<float> fill_f(size_t n, int k) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = fval(g_rank, i, k);
    return v;
}
size_t wrong_fsum(const std::vector<float>& v, int k, const std::string& what = "") {
    size_t wrong = 0;
    for (size_t i = 0; i < v.size(); ++i)
        if (v[i] != fsum(i, k) && wrong++ == 0)
            ADD_FAILURE() << what << " call " << k << " count " << v.size() << ": element " << i
                          << " is " << v[i] << ", want " << fsum(i, k);
    return wrong;
}

ccl_coll_attr_t cached(const char* match_id) {
    ccl_coll_attr_t attr = CCL_COLL_ATTR_INIT;
    attr.match_id = match_id;
    attr.to_cache = 1;
    return attr;
}

// A float SUM allreduce of `count` elements under `attr`, out of place into a fresh buffer,
// checked against the reference.
void allreduce_checked(size_t count, const ccl_coll_attr_t& attr, int k, ccl_comm_t comm = g_comm) {
    auto send = fill_f(count, k);
    std::vector<float> recv(count, -1.0f);
    CCL_OK(
        ccl_allreduce(send.data(), recv.data(), count, CCL_FLOAT32, CCL_SUM, comm, &attr, nullptr))
        << " (match_id " << (attr.match_id ? attr.match_id : "NULL") << ")";
    EXPECT_EQ(wrong_fsum(recv, k, attr.match_id ? attr.match_id : "NULL"), 0u);
}

TEST(Cache, HitWithNewBuffers) {
    ccl_coll_attr_t attr = cached("hit-allreduce");
    for (int k = 0; k < 20; ++k) allreduce_checked(5000, attr, k);  // new vectors every time
    // In place under the same match_id: in-place-ness is not part of the signature.
    for (int k = 20; k < 25; ++k) {
        auto buf = fill_f(5000, k);
        CCL_OK(ccl_allreduce(buf.data(), buf.data(), buf.size(), CCL_FLOAT32, CCL_SUM, g_comm,
                             &attr, nullptr));
        EXPECT_EQ(wrong_fsum(buf, k, "in place"), 0u);
    }
    // Large enough for the chunked algorithm.
    ccl_coll_attr_t big = cached("hit-allreduce-big");
    for (int k = 0; k < 3; ++k) allreduce_checked(300001, big, k);

    ccl_coll_attr_t battr = cached("hit-broadcast");
    const int root = g_size / 2;
    for (int k = 0; k < 10; ++k) {
        std::vector<int32_t> want(999);
        for (size_t i = 0; i < want.size(); ++i) want[i] = int32_t(i * 7) + k;
        std::vector<int32_t> buf = g_rank == root ? want : std::vector<int32_t>(999, -1);
        CCL_OK(ccl_broadcast(buf.data(), buf.size(), CCL_INT32, root, g_comm, &battr, nullptr));
        EXPECT_EQ(buf, want) << "iteration " << k;
    }
}

TEST(Cache, OtherMatchIdIsAMiss) {
    allreduce_checked(100, cached("miss-a"), 1);
    allreduce_checked(200, cached("miss-b"), 2);  // another id: its own plan, another count
    allreduce_checked(100, cached("miss-a"), 3);
    allreduce_checked(200, cached("miss-b"), 4);
    allreduce_checked(300, ccl_coll_attr_t CCL_COLL_ATTR_INIT, 5);  // no cache at all
}

// The match_id is its text, not its address: one buffer rewritten between calls names other call
// sites (each call's schedule is the one of its own text, also right after the previous one).
TEST(Cache, MatchIdIsItsTextNotItsAddress) {
    char id[32] = "text-site-a";
    const ccl_coll_attr_t attr = cached(id);
    allreduce_checked(100, attr, 1);
    allreduce_checked(100, attr, 2);
    std::snprintf(id, sizeof id, "text-site-b");
    allreduce_checked(300, attr, 3);  // site b: its own plan, another count, no mismatch
    std::snprintf(id, sizeof id, "text-site-a");
    allreduce_checked(100, attr, 4);
    std::vector<float> f(300, 1.0f);
    EXPECT_FAILS(
        ccl_allreduce(f.data(), f.data(), 300, CCL_FLOAT32, CCL_SUM, g_comm, &attr, nullptr),
        CCL_ERROR_INVALID_USAGE, "text-site-a");  // site a is still 100 elements
    std::snprintf(id, sizeof id, "text-site-b");
    allreduce_checked(300, attr, 5);
    // Site c right after site b with b's signature: cached under its own text, so c is 300.
    std::snprintf(id, sizeof id, "text-site-c");
    allreduce_checked(300, attr, 6);
    EXPECT_FAILS(
        ccl_allreduce(f.data(), f.data(), 100, CCL_FLOAT32, CCL_SUM, g_comm, &attr, nullptr),
        CCL_ERROR_INVALID_USAGE, "text-site-c");
}

// Reusing a match_id for another call is refused at submit on every rank, before any
// communication: the communicator stays usable.
TEST(Cache, SignatureMismatchIsRefused) {
    const char* id = "mismatch-site";
    ccl_coll_attr_t attr = cached(id);
    allreduce_checked(1000, attr, 1);
    std::vector<float> f(2000, 1.0f);
    std::vector<double> d(1000, 1.0);
    EXPECT_FAILS(
        ccl_allreduce(f.data(), f.data(), 999, CCL_FLOAT32, CCL_SUM, g_comm, &attr, nullptr),
        CCL_ERROR_INVALID_USAGE, id);
    expect_comm_still_works();
    EXPECT_FAILS(
        ccl_allreduce(f.data(), f.data(), 1001, CCL_FLOAT32, CCL_SUM, g_comm, &attr, nullptr),
        CCL_ERROR_INVALID_USAGE, id);
    EXPECT_FAILS(
        ccl_allreduce(d.data(), d.data(), 1000, CCL_FLOAT64, CCL_SUM, g_comm, &attr, nullptr),
        CCL_ERROR_INVALID_USAGE, id);
    // Same element size, other type.
    EXPECT_FAILS(
        ccl_allreduce(f.data(), f.data(), 1000, CCL_INT32, CCL_SUM, g_comm, &attr, nullptr),
        CCL_ERROR_INVALID_USAGE, id);
    expect_comm_still_works();
    EXPECT_FAILS(
        ccl_allreduce(f.data(), f.data(), 1000, CCL_FLOAT32, CCL_MAX, g_comm, &attr, nullptr),
        CCL_ERROR_INVALID_USAGE, id);
    EXPECT_FAILS(ccl_broadcast(f.data(), 1000, CCL_FLOAT32, 0, g_comm, &attr, nullptr),
                 CCL_ERROR_INVALID_USAGE, id);
    // Nonblocking: refused by the call itself, no request made.
    ccl_request_t req = nullptr;
    EXPECT_FAILS(ccl_allreduce(f.data(), f.data(), 7, CCL_FLOAT32, CCL_SUM, g_comm, &attr, &req),
                 CCL_ERROR_INVALID_USAGE, id);
    EXPECT_EQ(req, nullptr);
    expect_comm_still_works();
    // The entry itself is intact.
    allreduce_checked(1000, attr, 2);

    // Broadcast: the root is part of the signature.
    if (g_size > 1) {
        const char* bid = "mismatch-root";
        ccl_coll_attr_t battr = cached(bid);
        std::vector<int16_t> b(64, int16_t(g_rank));
        CCL_OK(ccl_broadcast(b.data(), b.size(), CCL_INT16, 0, g_comm, &battr, nullptr));
        EXPECT_EQ(b, std::vector<int16_t>(64, 0));
        EXPECT_FAILS(ccl_broadcast(b.data(), b.size(), CCL_INT16, 1, g_comm, &battr, nullptr),
                     CCL_ERROR_INVALID_USAGE, bid);
        EXPECT_FAILS(ccl_broadcast(b.data(), 63, CCL_INT16, 0, g_comm, &battr, nullptr),
                     CCL_ERROR_INVALID_USAGE, bid);
        EXPECT_FAILS(ccl_allreduce(b.data(), b.data(), b.size(), CCL_INT16, CCL_SUM, g_comm, &battr,
                                   nullptr),
                     CCL_ERROR_INVALID_USAGE, bid);
        std::fill(b.begin(), b.end(), int16_t(g_rank + 5));
        CCL_OK(ccl_broadcast(b.data(), b.size(), CCL_INT16, 0, g_comm, &battr, nullptr));
        EXPECT_EQ(b, std::vector<int16_t>(64, 5));
    }
    expect_comm_still_works();
}

// Without to_cache a match_id caches nothing: the next call may use it for anything.
TEST(Cache, ToCacheZeroCachesNothing) {
    ccl_coll_attr_t attr = CCL_COLL_ATTR_INIT;
    attr.match_id = "not-cached";
    allreduce_checked(10, attr, 1);
    allreduce_checked(20, attr, 2);
    std::vector<int64_t> b(5, g_rank);
    CCL_OK(ccl_broadcast(b.data(), b.size(), CCL_INT64, g_size - 1, g_comm, &attr, nullptr));
    EXPECT_EQ(b, std::vector<int64_t>(5, g_size - 1));
    // Still nothing is cached under it: to_cache=1 now starts a fresh entry.
    ccl_coll_attr_t now = cached("not-cached");
    allreduce_checked(30, now, 3);
    allreduce_checked(30, now, 4);
    std::vector<float> f(40, 1.0f);
    EXPECT_FAILS(ccl_allreduce(f.data(), f.data(), 40, CCL_FLOAT32, CCL_SUM, g_comm, &now, nullptr),
                 CCL_ERROR_INVALID_USAGE, "not-cached");
}

TEST(Cache, MissingMatchIdIsRefused) {
    float x = 1;
    ccl_coll_attr_t attr = cached(nullptr);
    ccl_request_t req = nullptr;
    EXPECT_FAILS(ccl_allreduce(&x, &x, 1, CCL_FLOAT32, CCL_SUM, g_comm, &attr, nullptr),
                 CCL_ERROR_INVALID_ARGUMENT, "match_id");
    EXPECT_FAILS(ccl_broadcast(&x, 1, CCL_FLOAT32, 0, g_comm, &attr, &req),
                 CCL_ERROR_INVALID_ARGUMENT, "match_id");
    EXPECT_EQ(req, nullptr);
    attr.match_id = "";
    EXPECT_FAILS(ccl_allreduce(&x, &x, 1, CCL_FLOAT32, CCL_SUM, g_comm, &attr, &req),
                 CCL_ERROR_INVALID_ARGUMENT, "match_id");
    EXPECT_EQ(req, nullptr);
    EXPECT_FAILS(ccl_broadcast(&x, 1, CCL_FLOAT32, 0, g_comm, &attr, nullptr),
                 CCL_ERROR_INVALID_ARGUMENT, "match_id");
    EXPECT_EQ(x, 1.0f);
    expect_comm_still_works();
}

// With CCL_CACHE_SIZE=4: the least recently used entry goes first, and an evicted match_id starts
// afresh with any signature.
TEST(Cache, Eviction) {
    const char* size = std::getenv("CCL_CACHE_SIZE");
    if (!size || std::string(size) != "4") GTEST_SKIP() << "needs CCL_CACHE_SIZE=4";
    ccl_coll_attr_t e[6] = {cached("ev-0"), cached("ev-1"), cached("ev-2"),
                            cached("ev-3"), cached("ev-4"), cached("ev-5")};
    // Five entries in a cache of four: ev-0 is evicted.
    for (int i = 0; i < 5; ++i) allreduce_checked(100 + size_t(i), e[i], i);
    allreduce_checked(555, e[0], 10);  // another count: a fresh entry, not a mismatch
    allreduce_checked(555, e[0], 11);  // and now cached with it
    std::vector<float> f(600, 1.0f);
    EXPECT_FAILS(
        ccl_allreduce(f.data(), f.data(), 100, CCL_FLOAT32, CCL_SUM, g_comm, &e[0], nullptr),
        CCL_ERROR_INVALID_USAGE, "ev-0");

    // Cached now, least recent first: ev-2, ev-3, ev-4, ev-0. Using ev-2 makes ev-3 the oldest,
    // so caching ev-5 evicts ev-3 and keeps ev-2.
    allreduce_checked(102, e[2], 12);
    allreduce_checked(105, e[5], 13);
    EXPECT_FAILS(ccl_allreduce(f.data(), f.data(), 1, CCL_FLOAT32, CCL_SUM, g_comm, &e[2], nullptr),
                 CCL_ERROR_INVALID_USAGE, "ev-2");
    allreduce_checked(7, e[3], 14);  // evicted: fresh
    expect_comm_still_works();
}

// ccl_comm_destroy frees the communicator's entries: their match_ids are free for others.
TEST(Cache, DestroyFreesEntries) {
    ccl_comm_t c = nullptr;
    CCL_OK(ccl_comm_create_from_env(&c));
    ccl_coll_attr_t attr = cached("m-destroy");
    allreduce_checked(64, attr, 1, c);
    allreduce_checked(64, attr, 2, c);
    CCL_OK(ccl_comm_destroy(c));
    allreduce_checked(64, attr, 3);  // same signature, main communicator
    allreduce_checked(64, attr, 4);
    std::vector<float> f(64);
    EXPECT_FAILS(
        ccl_allreduce(f.data(), f.data(), 32, CCL_FLOAT32, CCL_SUM, g_comm, &attr, nullptr),
        CCL_ERROR_INVALID_USAGE, "m-destroy");
}

// A match_id names one call site of one communicator.
TEST(Cache, OtherCommunicatorIsRefused) {
    ccl_comm_t c = nullptr;
    CCL_OK(ccl_comm_create_from_env(&c));
    ccl_coll_attr_t attr = cached("m-other-comm");
    allreduce_checked(64, attr, 1);
    std::vector<float> f(64, 1.0f);
    EXPECT_FAILS(ccl_allreduce(f.data(), f.data(), 64, CCL_FLOAT32, CCL_SUM, c, &attr, nullptr),
                 CCL_ERROR_INVALID_USAGE, "m-other-comm");
    ccl_request_t req = nullptr;
    EXPECT_FAILS(ccl_allreduce(f.data(), f.data(), 64, CCL_FLOAT32, CCL_SUM, c, &attr, &req),
                 CCL_ERROR_INVALID_USAGE, "m-other-comm");
    EXPECT_EQ(req, nullptr);
    // Neither communicator is hurt.
    expect_comm_still_works(c);
    expect_comm_still_works();
    allreduce_checked(64, attr, 2);
    allreduce_checked(64, cached("m-other-comm-2"), 3, c);
    CCL_OK(ccl_comm_destroy(c));
}

// Cached nonblocking calls, several of one match_id outstanding at once (one plan, run with new
// buffers each time), mixed with blocking cached calls of another match_id.
TEST(Cache, NonblockingCached) {
    ccl_coll_attr_t attr = cached("nb-cached");
    ccl_coll_attr_t other = cached("nb-cached-blocking");
    for (int round = 0; round < 3; ++round) {
        const int n = 8;
        std::vector<std::vector<float>> bufs;
        std::vector<ccl_request_t> reqs(n, nullptr);
        for (int k = 0; k < n; ++k) bufs.push_back(fill_f(20000, 10 * round + k));
        for (int k = 0; k < n; ++k)
            CCL_OK(ccl_allreduce(bufs[size_t(k)].data(), bufs[size_t(k)].data(), 20000, CCL_FLOAT32,
                                 CCL_SUM, g_comm, &attr, &reqs[size_t(k)]));
        allreduce_checked(33, other, 100 + round);
        for (int k = n - 1; k >= 0; --k) {
            CCL_OK(ccl_wait(reqs[size_t(k)]));
            EXPECT_EQ(wrong_fsum(bufs[size_t(k)], 10 * round + k, "nonblocking cached"), 0u);
            CCL_OK(ccl_request_free(reqs[size_t(k)]));
        }
    }
    // Synchronous and cached.
    ccl_coll_attr_t sync = cached("nb-cached");
    sync.synchronous = 1;
    auto buf = fill_f(20000, 77);
    ccl_request_t req = nullptr;
    CCL_OK(ccl_allreduce(buf.data(), buf.data(), buf.size(), CCL_FLOAT32, CCL_SUM, g_comm, &sync,
                         &req));
    EXPECT_EQ(wrong_fsum(buf, 77, "synchronous cached"), 0u);
    CCL_OK(ccl_wait(req));
    CCL_OK(ccl_request_free(req));
}

}  // namespace
