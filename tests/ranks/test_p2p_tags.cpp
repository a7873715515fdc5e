// Tagged point to point and receives from any rank (ccl_send_tagged, ccl_recv_tagged): tags
// received in another order than sent, several messages of one tag staying in order, a large
// message kept aside while a small one of another tag is received (and the reverse), tag 0 of
// ccl_send / ccl_recv among tagged messages, receives from any rank (blocking, nonblocking and
// posted before the sends, waiting past messages of another tag), the source given back, a
// tag-matched message of the wrong count refused, bad tags and peers refused. Every value is
// checked against what its sender put in: rank, tag and sequence number.
#include <algorithm>
#include <cstdint>
#include <map>
#include <vector>

#include "common.h"

using namespace test;

namespace {

int right() { return (g_rank + 1) % g_size; }
int left() { return (g_rank + g_size - 1) % g_size; }

// Message k of tag `tag` from rank `from`: `count` values that say so.
std::vector<int32_t> message(int from, int tag, int k, size_t count) {
    std::vector<int32_t> v(count);
    for (size_t i = 0; i < count; ++i) v[i] = int32_t(from * 1000003 + tag * 1009 + k * 31 + i);
    return v;
}

TEST(P2PTags, ReceivedInAnotherOrderThanSent) {
    // To the right: tags 3, 1, 2 (different sizes); from the left, received as 1, 2, 3.
    const int tags[] = {3, 1, 2};
    const size_t sizes[] = {5, 1000, 40};
    for (int i = 0; i < 3; ++i) {
        auto out = message(g_rank, tags[i], 0, sizes[i]);
        CCL_OK(
            ccl_send_tagged(out.data(), out.size(), CCL_INT32, right(), tags[i], g_comm, nullptr));
    }
    for (int tag : {1, 2, 3}) {
        const size_t count = sizes[std::find(std::begin(tags), std::end(tags), tag) - tags];
        std::vector<int32_t> in(count, -1);
        int source = -7;
        CCL_OK(ccl_recv_tagged(in.data(), count, CCL_INT32, left(), tag, &source, g_comm, nullptr));
        EXPECT_EQ(source, left());
        EXPECT_EQ(in, message(left(), tag, 0, count)) << "tag " << tag;
    }
    expect_comm_still_works();
}

TEST(P2PTags, OneTagStaysInOrder) {
    // Three messages of tag 5, then two of tag 6; received: both 6s, then the 5s in order.
    for (int k = 0; k < 3; ++k) {
        auto out = message(g_rank, 5, k, 64);
        CCL_OK(ccl_send_tagged(out.data(), 64, CCL_INT32, right(), 5, g_comm, nullptr));
    }
    for (int k = 0; k < 2; ++k) {
        auto out = message(g_rank, 6, k, 9);
        CCL_OK(ccl_send_tagged(out.data(), 9, CCL_INT32, right(), 6, g_comm, nullptr));
    }
    for (int k = 0; k < 2; ++k) {
        std::vector<int32_t> in(9);
        CCL_OK(ccl_recv_tagged(in.data(), 9, CCL_INT32, left(), 6, nullptr, g_comm, nullptr));
        EXPECT_EQ(in, message(left(), 6, k, 9)) << "tag 6 message " << k;
    }
    for (int k = 0; k < 3; ++k) {
        std::vector<int32_t> in(64);
        CCL_OK(ccl_recv_tagged(in.data(), 64, CCL_INT32, left(), 5, nullptr, g_comm, nullptr));
        EXPECT_EQ(in, message(left(), 5, k, 64)) << "tag 5 message " << k;
    }
}

TEST(P2PTags, LargeMessageKeptAsideAndTheReverse) {
    // 8 MiB of tag 1 (data segment or single copy), then 100 B of tag 2: the small one first.
    const size_t big = size_t(2) << 20;
    auto large = message(g_rank, 1, 0, big);
    auto small = message(g_rank, 2, 0, 25);
    CCL_OK(ccl_send_tagged(large.data(), big, CCL_INT32, right(), 1, g_comm, nullptr));
    CCL_OK(ccl_send_tagged(small.data(), 25, CCL_INT32, right(), 2, g_comm, nullptr));
    std::vector<int32_t> s(25), l(big);
    CCL_OK(ccl_recv_tagged(s.data(), 25, CCL_INT32, left(), 2, nullptr, g_comm, nullptr));
    CCL_OK(ccl_recv_tagged(l.data(), big, CCL_INT32, left(), 1, nullptr, g_comm, nullptr));
    EXPECT_EQ(s, message(left(), 2, 0, 25));
    EXPECT_TRUE(l == message(left(), 1, 0, big)) << "8 MiB of tag 1";
    // The reverse: the large receive posted first (nonblocking, its buffer offered), the small
    // message of another tag sent first. (No collective between: it would queue behind the
    // receive, which waits for the sends after it.)
    std::fill(l.begin(), l.end(), -1);
    ccl_request_t req = nullptr;
    CCL_OK(ccl_recv_tagged(l.data(), big, CCL_INT32, left(), 1, nullptr, g_comm, &req));
    CCL_OK(ccl_send_tagged(small.data(), 25, CCL_INT32, right(), 2, g_comm, nullptr));
    CCL_OK(ccl_send_tagged(large.data(), big, CCL_INT32, right(), 1, g_comm, nullptr));
    CCL_OK(ccl_wait(req));
    CCL_OK(ccl_request_free(req));
    EXPECT_TRUE(l == message(left(), 1, 0, big)) << "8 MiB of tag 1, received first";
    std::fill(s.begin(), s.end(), -1);
    CCL_OK(ccl_recv_tagged(s.data(), 25, CCL_INT32, left(), 2, nullptr, g_comm, nullptr));
    EXPECT_EQ(s, message(left(), 2, 0, 25));
}

TEST(P2PTags, TagZeroIsPlainSendAndRecv) {
    auto a = message(g_rank, 0, 0, 12), b = message(g_rank, 4, 0, 12),
         c = message(g_rank, 0, 1, 12);
    CCL_OK(ccl_send(a.data(), 12, CCL_INT32, right(), g_comm, nullptr));
    CCL_OK(ccl_send_tagged(b.data(), 12, CCL_INT32, right(), 4, g_comm, nullptr));
    CCL_OK(ccl_send_tagged(c.data(), 12, CCL_INT32, right(), 0, g_comm, nullptr));
    std::vector<int32_t> in(12);
    CCL_OK(ccl_recv_tagged(in.data(), 12, CCL_INT32, left(), 4, nullptr, g_comm, nullptr));
    EXPECT_EQ(in, message(left(), 4, 0, 12));
    CCL_OK(ccl_recv(in.data(), 12, CCL_INT32, left(), g_comm, nullptr));  // the kept one
    EXPECT_EQ(in, message(left(), 0, 0, 12));
    ccl_request_t req = nullptr;
    CCL_OK(ccl_recv(in.data(), 12, CCL_INT32, left(), g_comm, &req));
    CCL_OK(ccl_wait(req));
    CCL_OK(ccl_request_free(req));
    EXPECT_EQ(in, message(left(), 0, 1, 12));
    expect_comm_still_works();
}

TEST(P2PTags, AnySource) {
    // Every rank sends two messages of tag 7 to rank 0, which takes 2 x size from any rank: each
    // rank twice, its two in order, each message its sender's.
    for (int k = 0; k < 2; ++k) {
        auto out = message(g_rank, 7, k, 16);
        CCL_OK(ccl_send_tagged(out.data(), 16, CCL_INT32, 0, 7, g_comm, nullptr));
    }
    if (g_rank == 0) {
        std::map<int, int> seen;
        for (int i = 0; i < 2 * g_size; ++i) {
            std::vector<int32_t> in(16, -1);
            int source = -7;
            ccl_request_t req = nullptr;
            CCL_OK(ccl_recv_tagged(in.data(), 16, CCL_INT32, CCL_ANY_SOURCE, 7, &source, g_comm,
                                   i % 2 ? &req : nullptr));
            if (req) {
                CCL_OK(ccl_wait(req));
                CCL_OK(ccl_request_free(req));
            }
            ASSERT_GE(source, 0);
            ASSERT_LT(source, g_size);
            EXPECT_EQ(in, message(source, 7, seen[source], 16)) << "from " << source;
            ++seen[source];
        }
        for (int r = 0; r < g_size; ++r) EXPECT_EQ(seen[r], 2) << "rank " << r;
    }
    expect_comm_still_works();
}

TEST(P2PTags, AnySourcePostedFirstWaitsForItsTag) {
    // Rank 0 posts a receive of tag 9 from any rank; every other rank sends tag 8 first, then
    // rank size-1 sends one of tag 9. The tag-8 messages wait for their own receives. (No
    // collective between: it would queue behind the receive.)
    std::vector<int32_t> nine(3, -1);
    int source = -7;
    ccl_request_t req = nullptr;
    if (g_rank == 0) {
        CCL_OK(
            ccl_recv_tagged(nine.data(), 3, CCL_INT32, CCL_ANY_SOURCE, 9, &source, g_comm, &req));
    }
    if (g_rank != 0) {
        auto out = message(g_rank, 8, 0, 6);
        CCL_OK(ccl_send_tagged(out.data(), 6, CCL_INT32, 0, 8, g_comm, nullptr));
    }
    if (g_rank == g_size - 1) {
        auto out = message(g_rank, 9, 0, 3);
        CCL_OK(ccl_send_tagged(out.data(), 3, CCL_INT32, 0, 9, g_comm, nullptr));
    }
    if (g_rank == 0) {
        CCL_OK(ccl_wait(req));
        CCL_OK(ccl_request_free(req));
        EXPECT_EQ(source, g_size - 1);
        EXPECT_EQ(nine, message(g_size - 1, 9, 0, 3));
        for (int r = 1; r < g_size; ++r) {
            std::vector<int32_t> in(6, -1);
            CCL_OK(ccl_recv_tagged(in.data(), 6, CCL_INT32, r, 8, nullptr, g_comm, nullptr));
            EXPECT_EQ(in, message(r, 8, 0, 6)) << "tag 8 from " << r;
        }
    }
    expect_comm_still_works();
}

TEST(P2PTags, WrongCountOfAMatchedTagIsRefused) {
    auto out = message(g_rank, 3, 0, 5), other = message(g_rank, 2, 0, 5);
    CCL_OK(ccl_send_tagged(out.data(), 5, CCL_INT32, right(), 3, g_comm, nullptr));
    CCL_OK(ccl_send_tagged(other.data(), 5, CCL_INT32, right(), 2, g_comm, nullptr));
    std::vector<int32_t> in(6, -1);
    // Tag 2's message comes second: tag 3's is kept aside, then tag 2's count differs.
    EXPECT_FAILS(ccl_recv_tagged(in.data(), 6, CCL_INT32, left(), 2, nullptr, g_comm, nullptr),
                 CCL_ERROR_INVALID_USAGE, "count");
    // The kept one, of the wrong count too: refused and dropped.
    EXPECT_FAILS(ccl_recv_tagged(in.data(), 4, CCL_INT32, left(), 3, nullptr, g_comm, nullptr),
                 CCL_ERROR_INVALID_USAGE, "count");
    expect_comm_still_works();
    CCL_OK(ccl_send_tagged(out.data(), 5, CCL_INT32, right(), 3, g_comm, nullptr));
    in.resize(5);
    CCL_OK(ccl_recv_tagged(in.data(), 5, CCL_INT32, left(), 3, nullptr, g_comm, nullptr));
    EXPECT_EQ(in, message(left(), 3, 0, 5));
}

TEST(P2PTags, BadTagsAndPeers) {
    int32_t v = 0;
    ccl_request_t req = nullptr;
    EXPECT_FAILS(ccl_send_tagged(&v, 1, CCL_INT32, right(), -1, g_comm, nullptr),
                 CCL_ERROR_INVALID_ARGUMENT, "tag");
    EXPECT_FAILS(ccl_send_tagged(&v, 1, CCL_INT32, right(), CCL_TAG_MAX + 1, g_comm, &req),
                 CCL_ERROR_INVALID_ARGUMENT, "tag");
    EXPECT_EQ(req, nullptr);
    EXPECT_FAILS(ccl_recv_tagged(&v, 1, CCL_INT32, left(), -3, nullptr, g_comm, nullptr),
                 CCL_ERROR_INVALID_ARGUMENT, "tag");
    EXPECT_FAILS(ccl_send_tagged(&v, 1, CCL_INT32, CCL_ANY_SOURCE, 1, g_comm, nullptr),
                 CCL_ERROR_INVALID_ARGUMENT, "peer");
    EXPECT_FAILS(ccl_recv_tagged(&v, 1, CCL_INT32, -2, 1, nullptr, g_comm, nullptr),
                 CCL_ERROR_INVALID_ARGUMENT, "peer");
    EXPECT_FAILS(ccl_recv_tagged(&v, 1, CCL_INT32, g_size, 1, nullptr, g_comm, nullptr),
                 CCL_ERROR_INVALID_ARGUMENT, "peer");
    // The largest tag works.
    int32_t w = g_rank, got = -1;
    CCL_OK(ccl_send_tagged(&w, 1, CCL_INT32, right(), CCL_TAG_MAX, g_comm, nullptr));
    CCL_OK(ccl_recv_tagged(&got, 1, CCL_INT32, left(), CCL_TAG_MAX, nullptr, g_comm, nullptr));
    EXPECT_EQ(got, left());
    expect_comm_still_works();
}

}  // namespace
