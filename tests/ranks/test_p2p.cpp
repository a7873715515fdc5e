// Point to point: rings of blocking sends and receives, exchanges where both sides send first
// (8 MiB, which would deadlock if a send waited for its receiver), many messages to one peer
// received in order, more messages than a channel's ring holds, messages spanning several
// descriptors, sending to oneself, thousands of messages sent before any is received (to a peer
// and to oneself, small and 1 MiB, every kind to every rank), nonblocking receives posted before
// the matching send (waited on this thread or another, polled or freed unwaited), small messages
// that arrived before their receive (not overtaking a receive still posted), sends and receives
// in a group, count 0, every datatype, the send buffer reusable once a send returns, large
// messages of sizes going up and down and around the fabric's part size, p2p interleaved with
// collectives, a receive whose count or datatype differs from the send, small or large (refused
// on the receiver, the communicator still works), a sender destroying its communicator right
// after its send, and peers out of range.
#include <chrono>
#include <cstdint>
#include <cstring>
#include <deque>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "common.h"
#include "reference.h"

using namespace test;

namespace {

int right() { return (g_rank + 1) % g_size; }
int left() { return (g_rank + g_size - 1) % g_size; }

// 8 MiB of int32.
constexpr size_t kBig = size_t(2) << 20;

// Rank `from`'s message with `seed`: its elements 0 .. count-1 (in a recycled buffer).
struct Message : Guarded {
    Message(size_t count, ccl_datatype_t t, int from, uint64_t seed)
        : Guarded(count * type_size(t)) {
        fill(data(), count, t, from, seed);
    }
};

TEST(P2P, RingOfBlockingCalls) {
    uint64_t seed = 1;
    for (size_t count : {size_t(1), size_t(1000), size_t(100001), kBig}) {
        ++seed;
        Message out(count, CCL_INT32, g_rank, seed);
        Guarded in(count * 4);
        CCL_OK(ccl_send(out.data(), count, CCL_INT32, right(), g_comm, nullptr));
        CCL_OK(ccl_recv(in.data(), count, CCL_INT32, left(), g_comm, nullptr));
        EXPECT_EQ(check_block(in.data(), count, CCL_INT32, left(), seed, 0, "ring"), 0u);
        EXPECT_TRUE(in.guard_intact());
    }
    // The other direction.
    Message out(4097, CCL_FLOAT64, g_rank, 77);
    Guarded in(4097 * 8);
    CCL_OK(ccl_send(out.data(), 4097, CCL_FLOAT64, left(), g_comm, nullptr));
    CCL_OK(ccl_recv(in.data(), 4097, CCL_FLOAT64, right(), g_comm, nullptr));
    EXPECT_EQ(check_block(in.data(), 4097, CCL_FLOAT64, right(), 77, 0, "reverse ring"), 0u);
}

// Pairs (0,1), (2,3), ...: both sides send 8 MiB before either receives. With an odd number of
// ranks the last one exchanges with itself.
TEST(P2P, ExchangeBothSendFirst) {
    int partner = g_rank ^ 1;
    if (partner >= g_size) partner = g_rank;
    for (int round = 0; round < 2; ++round) {
        const uint64_t seed = 100 + uint64_t(round);
        Message out(kBig, CCL_INT32, g_rank, seed);
        Guarded in(kBig * 4);
        CCL_OK(ccl_send(out.data(), kBig, CCL_INT32, partner, g_comm, nullptr));
        CCL_OK(ccl_recv(in.data(), kBig, CCL_INT32, partner, g_comm, nullptr));
        EXPECT_EQ(check_block(in.data(), kBig, CCL_INT32, partner, seed, 0, "exchange"), 0u);
    }
}

// Every rank sends to every rank (itself included) before receiving anything.
TEST(P2P, AllSendsBeforeAnyReceive) {
    const size_t count = 30001;
    for (int to = 0; to < g_size; ++to) {
        Message out(count, CCL_FLOAT32, g_rank, 200 + uint64_t(to));
        CCL_OK(ccl_send(out.data(), count, CCL_FLOAT32, to, g_comm, nullptr));
    }
    for (int from = g_size - 1; from >= 0; --from) {  // in another order than sent
        std::vector<float> in(count);
        CCL_OK(ccl_recv(in.data(), count, CCL_FLOAT32, from, g_comm, nullptr));
        EXPECT_EQ(check_block(in.data(), count, CCL_FLOAT32, from, 200 + uint64_t(g_rank), 0,
                              "from " + std::to_string(from)),
                  0u);
    }
}

size_t varied_count(int k) {
    if (k == 20) return 300001;  // one larger than the shared-memory buffer
    if (k % 9 == 4) return 0;
    return size_t(k * 7919) % 5000 + 1;
}

// 40 messages of varied size to the same peer, then received in order: each must be the one sent
// in that position.
TEST(P2P, ManyMessagesArriveInOrder) {
    const int n = 40;
    for (int k = 0; k < n; ++k) {
        Message out(varied_count(k), CCL_INT16, g_rank, 300 + uint64_t(k));
        CCL_OK(ccl_send(out.data(), varied_count(k), CCL_INT16, right(), g_comm, nullptr));
    }
    for (int k = 0; k < n; ++k) {
        Guarded in(varied_count(k) * 2);
        CCL_OK(ccl_recv(in.data(), varied_count(k), CCL_INT16, left(), g_comm, nullptr))
            << " message " << k;
        EXPECT_EQ(check_block(in.data(), varied_count(k), CCL_INT16, left(), 300 + uint64_t(k), 0,
                              "message " + std::to_string(k)),
                  0u);
        EXPECT_TRUE(in.guard_intact()) << "message " << k;
    }
    // Same sizes each time: only the order tells them apart.
    for (int k = 0; k < n; ++k) {
        int64_t v = int64_t(g_rank) * 1000 + k;
        CCL_OK(ccl_send(&v, 1, CCL_INT64, right(), g_comm, nullptr));
    }
    for (int k = 0; k < n; ++k) {
        int64_t v = -1;
        CCL_OK(ccl_recv(&v, 1, CCL_INT64, left(), g_comm, nullptr));
        EXPECT_EQ(v, int64_t(left()) * 1000 + k);
    }
}

// More messages than a channel's ring holds (128 descriptors), of 0 to 900 bytes: inside one
// descriptor (up to 104), spanning several (up to 464) and through the data segment, while the
// receiver takes them. The receiver starts late: the sender fills the ring and goes on in a larger
// one while the receiver catches up, and spans wrap round the ring's end. Pairs (0,1), (2,3), ...
// one direction, then the other.
TEST(P2P, MoreMessagesThanTheRingHolds) {
    const int partner = g_rank ^ 1;
    if (partner >= g_size) return;
    const int n = 300;
    auto count = [](int k) { return k % 3 ? size_t(k * 37) % 131 : size_t(k * 53) % 901; };
    for (int sender : {0, 1}) {
        if ((g_rank & 1) == sender) {
            for (int k = 0; k < n; ++k) {
                Message out(count(k), CCL_UINT8, g_rank, 600 + uint64_t(k));
                CCL_OK(ccl_send(out.data(), count(k), CCL_UINT8, partner, g_comm, nullptr));
            }
        } else {
            // Late, so that the sender fills the ring.
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            for (int k = 0; k < n; ++k) {
                Guarded in(count(k));
                CCL_OK(ccl_recv(in.data(), count(k), CCL_UINT8, partner, g_comm, nullptr));
                ASSERT_EQ(check_block(in.data(), count(k), CCL_UINT8, partner, 600 + uint64_t(k), 0,
                                      "message " + std::to_string(k)),
                          0u);
                EXPECT_TRUE(in.guard_intact()) << "message " << k;
            }
        }
    }
}

TEST(P2P, SendToSelf) {
    for (int k = 0; k < 3; ++k) {
        Message out(1000 + size_t(k), CCL_UINT64, g_rank, 400 + uint64_t(k));
        CCL_OK(ccl_send(out.data(), 1000 + size_t(k), CCL_UINT64, g_rank, g_comm, nullptr));
    }
    for (int k = 0; k < 3; ++k) {
        std::vector<uint64_t> in(1000 + size_t(k));
        CCL_OK(ccl_recv(in.data(), in.size(), CCL_UINT64, g_rank, g_comm, nullptr));
        EXPECT_EQ(
            check_block(in.data(), in.size(), CCL_UINT64, g_rank, 400 + uint64_t(k), 0, "self"),
            0u);
    }
    // A nonblocking receive from oneself posted first.
    std::vector<float> in(kBig / 4);
    ccl_request_t req = nullptr;
    CCL_OK(ccl_recv(in.data(), in.size(), CCL_FLOAT32, g_rank, g_comm, &req));
    Message out(in.size(), CCL_FLOAT32, g_rank, 410);
    CCL_OK(ccl_send(out.data(), in.size(), CCL_FLOAT32, g_rank, g_comm, nullptr));
    CCL_OK(ccl_wait(req));
    CCL_OK(ccl_request_free(req));
    EXPECT_EQ(check_block(in.data(), in.size(), CCL_FLOAT32, g_rank, 410, 0, "self, posted first"),
              0u);
}

// Nonblocking receives posted before the peer sends; the sends follow, then the waits.
TEST(P2P, ReceivesPostedBeforeSends) {
    const int n = 5;
    std::vector<std::vector<int32_t>> in(n);
    std::vector<ccl_request_t> reqs(n, nullptr);
    for (int k = 0; k < n; ++k) {
        in[size_t(k)].assign(10 + size_t(k) * 50000, -1);
        CCL_OK(ccl_recv(in[size_t(k)].data(), in[size_t(k)].size(), CCL_INT32, left(), g_comm,
                        &reqs[size_t(k)]));
    }
    for (int k = 0; k < n; ++k) {
        Message out(10 + size_t(k) * 50000, CCL_INT32, g_rank, 500 + uint64_t(k));
        ccl_request_t sreq = nullptr;
        CCL_OK(ccl_send(out.data(), 10 + size_t(k) * 50000, CCL_INT32, right(), g_comm,
                        k % 2 ? &sreq : nullptr));
        if (sreq) {
            CCL_OK(ccl_wait(sreq));
            CCL_OK(ccl_request_free(sreq));
        }
    }
    for (int k = n - 1; k >= 0; --k) {
        CCL_OK(ccl_wait(reqs[size_t(k)]));
        CCL_OK(ccl_request_free(reqs[size_t(k)]));
    }
    for (int k = 0; k < n; ++k)
        EXPECT_EQ(check_block(in[size_t(k)].data(), in[size_t(k)].size(), CCL_INT32, left(),
                              500 + uint64_t(k), 0, "posted receive " + std::to_string(k)),
                  0u);
}

// Small messages that arrived before their receive is called are taken at once (Mailbox::
// try_recv), also by a nonblocking receive. But not past a receive
// still posted from the same peer: with receive A waiting, messages 1 and 2 arrive, and a blocking
// receive B must get message 2, not the one already there first.
TEST(P2P, ArrivedMessagesAndAnEarlierPostedReceive) {
    int64_t a = -1, b = -1;
    ccl_request_t ra = nullptr;
    CCL_OK(ccl_recv(&a, 1, CCL_INT64, left(), g_comm, &ra));
    for (int64_t k : {1, 2}) {
        const int64_t v = g_rank * 100 + k;
        CCL_OK(ccl_send(&v, 1, CCL_INT64, right(), g_comm, nullptr));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // both arrive before B
    CCL_OK(ccl_recv(&b, 1, CCL_INT64, left(), g_comm, nullptr));
    CCL_OK(ccl_wait(ra));
    CCL_OK(ccl_request_free(ra));
    EXPECT_EQ(a, left() * 100 + 1);
    EXPECT_EQ(b, left() * 100 + 2);
    // Nothing posted now: arrived messages of 0 to 80 bytes (inline), received blocking and
    // nonblocking.
    for (size_t count : {size_t(0), size_t(1), size_t(10)}) {
        Message out(count, CCL_INT64, g_rank, 560 + count);
        CCL_OK(ccl_send(out.data(), count, CCL_INT64, right(), g_comm, nullptr));
        CCL_OK(ccl_send(out.data(), count, CCL_INT64, right(), g_comm, nullptr));
    }
    CCL_OK(ccl_barrier(g_comm, nullptr));  // every message has arrived
    for (size_t count : {size_t(0), size_t(1), size_t(10)}) {
        Guarded in1(count * 8), in2(count * 8);
        CCL_OK(ccl_recv(in1.data(), count, CCL_INT64, left(), g_comm, nullptr));
        ccl_request_t r = nullptr;
        CCL_OK(ccl_recv(in2.data(), count, CCL_INT64, left(), g_comm, &r));
        int done = 0;
        CCL_OK(ccl_test(r, &done));
        CCL_OK(ccl_wait(r));
        CCL_OK(ccl_request_free(r));
        for (Guarded* in : {&in1, &in2}) {
            EXPECT_EQ(check_block(in->data(), count, CCL_INT64, left(), 560 + count, 0, "arrived"),
                      0u);
            EXPECT_TRUE(in->guard_intact());
        }
    }
}

// Every size a message may span descriptors with, and its neighbours, each as a nonblocking
// receive posted first, one waited after its message arrived, and a blocking one: 20 rounds, so
// that spans start at every position of the ring and wrap round its end. A spanning message whose
// receive expects another size is dropped whole: the next message is intact.
TEST(P2P, SpanningMessages) {
    // Around the ends of a descriptor's lines too (a further descriptor's first line ends 56
    // bytes in: at 160 and 280).
    const std::vector<size_t> sizes = {40,  41,  103, 104, 105, 160, 161, 224,
                                       225, 280, 281, 344, 345, 463, 464, 465};
    uint64_t seed = 3000;
    for (int round = 0; round < 20; ++round)
        for (size_t bytes : sizes) {
            ++seed;
            Message out(bytes, CCL_UINT8, g_rank, seed);
            Guarded posted(bytes), arrived(bytes), blocking(bytes);
            ccl_request_t r1 = nullptr, r2 = nullptr;
            CCL_OK(ccl_recv(posted.data(), bytes, CCL_UINT8, left(), g_comm, &r1));
            for (int k = 0; k < 3; ++k)
                CCL_OK(ccl_send(out.data(), bytes, CCL_UINT8, right(), g_comm, nullptr));
            CCL_OK(ccl_wait(r1));
            CCL_OK(ccl_barrier(g_comm, nullptr));  // the other two have arrived
            CCL_OK(ccl_recv(arrived.data(), bytes, CCL_UINT8, left(), g_comm, &r2));
            CCL_OK(ccl_recv(blocking.data(), bytes, CCL_UINT8, left(), g_comm, nullptr));
            CCL_OK(ccl_wait(r2));
            for (auto r : {r1, r2}) CCL_OK(ccl_request_free(r));
            for (Guarded* in : {&posted, &arrived, &blocking}) {
                ASSERT_EQ(check_block(in->data(), bytes, CCL_UINT8, left(), seed, 0,
                                      std::to_string(bytes) + " bytes"),
                          0u);
                EXPECT_TRUE(in->guard_intact()) << bytes << " bytes";
            }
        }
    Message big(585, CCL_UINT8, g_rank, 3900), small(7, CCL_UINT8, g_rank, 3901);
    CCL_OK(ccl_send(big.data(), 585, CCL_UINT8, right(), g_comm, nullptr));
    CCL_OK(ccl_send(small.data(), 7, CCL_UINT8, right(), g_comm, nullptr));
    std::vector<uint8_t> wrong(584);
    EXPECT_FAILS(ccl_recv(wrong.data(), 584, CCL_UINT8, left(), g_comm, nullptr),
                 CCL_ERROR_INVALID_USAGE, "count");
    std::vector<uint8_t> next(7);
    CCL_OK(ccl_recv(next.data(), 7, CCL_UINT8, left(), g_comm, nullptr));
    EXPECT_EQ(check_block(next.data(), 7, CCL_UINT8, left(), 3901, 0, "after the dropped one"), 0u);
}

// A small nonblocking receive posted while nothing else is pending needs no execution until it
// must wait (Communicator::recv_now): here another thread waits on it while this one sends and
// makes blocking calls on the communicator, which must run after it (issue order). Every third
// round the message comes late, so the waiting thread must turn it into an execution itself
// while this thread's next call may be doing the same; every other round a second receive from
// the same peer is posted behind it and must get the second message.
TEST(P2P, SmallReceiveWaitedOnAnotherThread) {
    for (int round = 0; round < 60; ++round) {
        const bool late = round % 3 == 0, second = round % 2 == 0;
        int64_t got = -1, got2 = -1;
        ccl_request_t req = nullptr, req2 = nullptr;
        CCL_OK(ccl_recv(&got, 1, CCL_INT64, left(), g_comm, &req));
        ccl_result_t waited = CCL_ERROR_INTERNAL;
        std::thread waiter([&] {
            waited = ccl_wait(req);
            if (waited == CCL_SUCCESS) waited = ccl_request_free(req);
        });
        if (second) {
            CCL_OK(ccl_recv(&got2, 1, CCL_INT64, left(), g_comm, &req2));
        }
        if (late) std::this_thread::sleep_for(std::chrono::milliseconds(2));
        const int64_t v = int64_t(g_rank) * 1000 + round, v2 = -v;
        CCL_OK(ccl_send(&v, 1, CCL_INT64, right(), g_comm, nullptr));
        if (second) {
            CCL_OK(ccl_send(&v2, 1, CCL_INT64, right(), g_comm, nullptr));
        }
        int32_t x = 1;
        CCL_OK(ccl_allreduce(&x, &x, 1, CCL_INT32, CCL_SUM, g_comm, nullptr, nullptr));
        EXPECT_EQ(x, g_size);
        if (second) {
            CCL_OK(ccl_wait(req2));
            CCL_OK(ccl_request_free(req2));
        }
        waiter.join();
        EXPECT_EQ(waited, CCL_SUCCESS) << "round " << round;
        EXPECT_EQ(got, int64_t(left()) * 1000 + round) << "round " << round;
        if (second) {
            EXPECT_EQ(got2, -(int64_t(left()) * 1000 + round)) << "round " << round;
        }
    }
}

// The other way round: the thread that posted the small receive waits on it (without the
// request's lock, Request::resolve) while another thread takes over the communicator, whose first
// call must make the receive an execution (issue order) and so first keep the waiting thread out
// (Request::exclude_owner). Every third round the message comes late, so that the takeover
// happens while the wait is still trying; every other round the new thread posts a second
// receive from the same peer, which must get the second message.
TEST(P2P, SmallReceiveWaitedWhileAnotherThreadTakesOver) {
    for (int round = 0; round < 60; ++round) {
        const bool late = round % 3 == 0, second = round % 2 == 0;
        int64_t got = -1, got2 = -1;
        ccl_request_t req = nullptr;
        CCL_OK(ccl_recv(&got, 1, CCL_INT64, left(), g_comm, &req));
        ccl_result_t took_over = CCL_ERROR_INTERNAL;
        std::thread other([&] {  // uses the communicator from here on
            took_over = [&] {
                ccl_request_t req2 = nullptr;
                if (second) {
                    if (ccl_result_t r = ccl_recv(&got2, 1, CCL_INT64, left(), g_comm, &req2))
                        return r;
                }
                if (late) std::this_thread::sleep_for(std::chrono::milliseconds(2));
                const int64_t v = int64_t(g_rank) * 1000 + round, v2 = -v;
                if (ccl_result_t r = ccl_send(&v, 1, CCL_INT64, right(), g_comm, nullptr)) return r;
                if (second) {
                    if (ccl_result_t r = ccl_send(&v2, 1, CCL_INT64, right(), g_comm, nullptr))
                        return r;
                    if (ccl_result_t r = ccl_wait(req2)) return r;
                    if (ccl_result_t r = ccl_request_free(req2)) return r;
                }
                int32_t x = 1;
                if (ccl_result_t r =
                        ccl_allreduce(&x, &x, 1, CCL_INT32, CCL_SUM, g_comm, nullptr, nullptr))
                    return r;
                return x == g_size ? CCL_SUCCESS : CCL_ERROR_INTERNAL;
            }();
        });
        EXPECT_EQ(ccl_wait(req), CCL_SUCCESS) << "round " << round << ": " << ccl_last_error();
        CCL_OK(ccl_request_free(req));
        other.join();
        EXPECT_EQ(took_over, CCL_SUCCESS) << "round " << round;
        EXPECT_EQ(got, int64_t(left()) * 1000 + round) << "round " << round;
        if (second) {
            EXPECT_EQ(got2, -(int64_t(left()) * 1000 + round)) << "round " << round;
        }
    }
}

// A small receive freed unwaited, then its communicator destroyed: the destruction completes it
// first (its message was sent), so that nothing is left on the communicator.
TEST(P2P, FreedSmallReceiveThenDestroy) {
    ccl_comm_t c = nullptr;
    CCL_OK(ccl_comm_create_from_env(&c));
    int64_t got = -1;
    ccl_request_t req = nullptr;
    CCL_OK(ccl_recv(&got, 1, CCL_INT64, left(), c, &req));
    CCL_OK(ccl_request_free(req));
    const int64_t v = 7000 + g_rank;
    CCL_OK(ccl_send(&v, 1, CCL_INT64, right(), c, nullptr));
    CCL_OK(ccl_comm_destroy(c));
    EXPECT_EQ(got, 7000 + left());
    expect_comm_still_works();
}

// Polling a receive with ccl_test until its message arrives.
TEST(P2P, TestPollsAReceive) {
    std::vector<int64_t> in(777, -1);
    ccl_request_t req = nullptr;
    CCL_OK(ccl_recv(in.data(), in.size(), CCL_INT64, left(), g_comm, &req));
    Message out(777, CCL_INT64, g_rank, 550);
    CCL_OK(ccl_send(out.data(), 777, CCL_INT64, right(), g_comm, nullptr));
    int done = 0;
    for (long polls = 0; !done; ++polls) {
        CCL_OK(ccl_test(req, &done));
        std::this_thread::yield();
        ASSERT_LT(polls, 100000000L) << "the receive never completed";
    }
    CCL_OK(ccl_request_free(req));
    EXPECT_EQ(check_block(in.data(), in.size(), CCL_INT64, left(), 550, 0, "polled"), 0u);
}

TEST(P2P, InAGroup) {
    // Blocking calls recorded in a group: send right and receive left, issued by ccl_group_end.
    Message out(5000, CCL_FLOAT64, g_rank, 600);
    std::vector<double> in(5000, -1);
    CCL_OK(ccl_group_start());
    CCL_OK(ccl_recv(in.data(), in.size(), CCL_FLOAT64, left(), g_comm, nullptr));
    CCL_OK(ccl_send(out.data(), 5000, CCL_FLOAT64, right(), g_comm, nullptr));
    CCL_OK(ccl_group_end());
    EXPECT_EQ(check_block(in.data(), in.size(), CCL_FLOAT64, left(), 600, 0, "group"), 0u);

    // Nonblocking ones, both directions, with a collective in the same group.
    Message out_r(300, CCL_INT8, g_rank, 601), out_l(400, CCL_INT8, g_rank, 602);
    std::vector<int8_t> from_l(300), from_r(400);
    ccl_request_t reqs[4] = {};
    int32_t x = g_rank;
    CCL_OK(ccl_group_start());
    CCL_OK(ccl_send(out_r.data(), 300, CCL_INT8, right(), g_comm, &reqs[0]));
    CCL_OK(ccl_send(out_l.data(), 400, CCL_INT8, left(), g_comm, &reqs[1]));
    CCL_OK(ccl_recv(from_l.data(), 300, CCL_INT8, left(), g_comm, &reqs[2]));
    CCL_OK(ccl_recv(from_r.data(), 400, CCL_INT8, right(), g_comm, &reqs[3]));
    CCL_OK(ccl_allreduce(&x, &x, 1, CCL_INT32, CCL_SUM, g_comm, nullptr, nullptr));
    CCL_OK(ccl_group_end());
    for (ccl_request_t r : reqs) {
        CCL_OK(ccl_wait(r));
        CCL_OK(ccl_request_free(r));
    }
    EXPECT_EQ(x, g_size * (g_size - 1) / 2);
    EXPECT_EQ(check_block(from_l.data(), 300, CCL_INT8, left(), 601, 0, "group from left"), 0u);
    EXPECT_EQ(check_block(from_r.data(), 400, CCL_INT8, right(), 602, 0, "group from right"), 0u);
}

TEST(P2P, CountZero) {
    CCL_OK(ccl_send(nullptr, 0, CCL_FLOAT32, right(), g_comm, nullptr));
    CCL_OK(ccl_recv(nullptr, 0, CCL_FLOAT32, left(), g_comm, nullptr));
    float f = 3.0f, g = 4.0f;
    CCL_OK(ccl_send(&f, 0, CCL_FLOAT32, right(), g_comm, nullptr));
    CCL_OK(ccl_recv(&g, 0, CCL_FLOAT32, left(), g_comm, nullptr));
    EXPECT_EQ(g, 4.0f) << "a zero-count receive wrote to its buffer";
    // A zero-count message still occupies its place in the order.
    int32_t v = g_rank;
    CCL_OK(ccl_send(nullptr, 0, CCL_INT32, right(), g_comm, nullptr));
    CCL_OK(ccl_send(&v, 1, CCL_INT32, right(), g_comm, nullptr));
    CCL_OK(ccl_recv(nullptr, 0, CCL_INT32, left(), g_comm, nullptr));
    CCL_OK(ccl_recv(&v, 1, CCL_INT32, left(), g_comm, nullptr));
    EXPECT_EQ(v, left());
    ccl_request_t req = nullptr;
    CCL_OK(ccl_recv(nullptr, 0, CCL_UINT8, left(), g_comm, &req));
    CCL_OK(ccl_send(nullptr, 0, CCL_UINT8, right(), g_comm, nullptr));
    CCL_OK(ccl_wait(req));
    CCL_OK(ccl_request_free(req));
}

TEST(P2P, EveryDatatype) {
    uint64_t seed = 700;
    for (ccl_datatype_t t : kTypes)
        for (size_t count : {size_t(1), size_t(1001)}) {
            ++seed;
            Message out(count, t, g_rank, seed);
            Guarded in(count * type_size(t));
            CCL_OK(ccl_send(out.data(), count, t, right(), g_comm, nullptr));
            CCL_OK(ccl_recv(in.data(), count, t, left(), g_comm, nullptr));
            EXPECT_EQ(check_block(in.data(), count, t, left(), seed, 0, "every datatype"), 0u);
            EXPECT_TRUE(in.guard_intact()) << "type " << int(t);
        }
}

// A send has completed once its data is copied out: the buffer may be reused at once.
TEST(P2P, SendBufferReusableOnceSent) {
    Message out(200000, CCL_INT32, g_rank, 800);
    CCL_OK(ccl_send(out.data(), 200000, CCL_INT32, right(), g_comm, nullptr));
    std::memset(out.data(), 0x7f, out.bytes);
    ccl_request_t req = nullptr;
    Message out2(200000, CCL_INT32, g_rank, 801);
    CCL_OK(ccl_send(out2.data(), 200000, CCL_INT32, right(), g_comm, &req));
    CCL_OK(ccl_wait(req));
    CCL_OK(ccl_request_free(req));
    std::memset(out2.data(), 0x7e, out2.bytes);
    std::vector<int32_t> in(200000);
    CCL_OK(ccl_recv(in.data(), in.size(), CCL_INT32, left(), g_comm, nullptr));
    EXPECT_EQ(check_block(in.data(), in.size(), CCL_INT32, left(), 800, 0, "reused, blocking"), 0u);
    CCL_OK(ccl_recv(in.data(), in.size(), CCL_INT32, left(), g_comm, nullptr));
    EXPECT_EQ(check_block(in.data(), in.size(), CCL_INT32, left(), 801, 0, "reused, nonblocking"),
              0u);
}

// Large messages of sizes going up and down, all sent before any is received, twice: across nodes
// their copies come from recycled buffers, often larger than the message, several in flight.
TEST(P2P, LargeSizesUpAndDown) {
    const size_t counts[] = {262147, 20000, 600001, 17000, 300000, 16385};
    for (int round = 0; round < 2; ++round) {
        for (size_t k = 0; k < std::size(counts); ++k) {
            Message out(counts[k], CCL_INT32, g_rank, 900 + 10 * uint64_t(round) + k);
            CCL_OK(ccl_send(out.data(), counts[k], CCL_INT32, right(), g_comm, nullptr));
        }
        for (size_t k = 0; k < std::size(counts); ++k) {
            Guarded in(counts[k] * 4);
            CCL_OK(ccl_recv(in.data(), counts[k], CCL_INT32, left(), g_comm, nullptr));
            const std::string what =
                "round " + std::to_string(round) + ", message " + std::to_string(k);
            EXPECT_EQ(check_block(in.data(), counts[k], CCL_INT32, left(),
                                  900 + 10 * uint64_t(round) + k, 0, what),
                      0u);
            EXPECT_TRUE(in.guard_intact()) << what;
        }
    }
}

// Across nodes a message longer than 252 KiB (258048 bytes, the fabric's kMaxMessage) goes in
// parts of that size and a tail (in 32 KiB pieces when it is 32-126 KiB), all under the message's
// number: sizes at and around multiples of it, half of the receives posted before the sends and
// half after the messages arrived, waited in reverse order, with a small message between each two
// large ones.
TEST(P2P, MessagesAroundPartBoundaries) {
    const size_t part = 258048;
    const std::vector<size_t> sizes = {part - 1,     part,         part + 1,       2 * part,
                                       2 * part + 1, 3 * part - 7, 5 * part + 4096};
    const size_t n = sizes.size();
    std::deque<Guarded> in, small;  // Guarded does not move
    for (size_t k = 0; k < n; ++k) {
        in.emplace_back(sizes[k]);
        small.emplace_back(size_t(3));
    }
    std::vector<ccl_request_t> reqs(2 * n, nullptr);
    auto post = [&](size_t k) {
        CCL_OK(ccl_recv(in[k].data(), sizes[k], CCL_UINT8, left(), g_comm, &reqs[2 * k]));
        CCL_OK(ccl_recv(small[k].data(), 3, CCL_UINT8, left(), g_comm, &reqs[2 * k + 1]));
    };
    for (size_t k = 0; k < n / 2; ++k) post(k);
    for (size_t k = 0; k < n; ++k) {
        Message out(sizes[k], CCL_UINT8, g_rank, 1200 + k), tiny(3, CCL_UINT8, g_rank, 1300 + k);
        CCL_OK(ccl_send(out.data(), sizes[k], CCL_UINT8, right(), g_comm, nullptr));
        CCL_OK(ccl_send(tiny.data(), 3, CCL_UINT8, right(), g_comm, nullptr));
    }
    CCL_OK(ccl_barrier(g_comm, nullptr));  // the rest have arrived (or are on their way)
    for (size_t k = n / 2; k < n; ++k) post(k);
    for (size_t i = reqs.size(); i-- > 0;) {
        CCL_OK(ccl_wait(reqs[i]));
        CCL_OK(ccl_request_free(reqs[i]));
    }
    for (size_t k = 0; k < n; ++k) {
        const std::string what = std::to_string(sizes[k]) + " bytes";
        EXPECT_EQ(check_block(in[k].data(), sizes[k], CCL_UINT8, left(), 1200 + k, 0, what), 0u);
        EXPECT_EQ(check_block(small[k].data(), 3, CCL_UINT8, left(), 1300 + k, 0, "after " + what),
                  0u);
        EXPECT_TRUE(in[k].guard_intact()) << what;
    }
}

// Point to point between collectives: sends do not queue behind collectives, receives run in issue
// order with them.
// A receive whose request is freed before its message arrives still completes, before the
// communicator's next collective: work on a communicator runs in issue order.
TEST(P2P, FreedReceiveCompletesBeforeTheNextCollective) {
    std::vector<int32_t> in(3000, -1);
    ccl_request_t req = nullptr;
    CCL_OK(ccl_recv(in.data(), in.size(), CCL_INT32, left(), g_comm, &req));
    CCL_OK(ccl_request_free(req));
    Message out(in.size(), CCL_INT32, g_rank, 560);
    CCL_OK(ccl_send(out.data(), in.size(), CCL_INT32, right(), g_comm, nullptr));
    CCL_OK(ccl_barrier(g_comm, nullptr));
    EXPECT_EQ(check_block(in.data(), in.size(), CCL_INT32, left(), 560, 0, "freed receive"), 0u);
}

TEST(P2P, InterleavedWithCollectives) {
    for (int it = 0; it < 30; ++it) {
        int64_t v = int64_t(g_rank) * 100 + it, got = -1;
        CCL_OK(ccl_send(&v, 1, CCL_INT64, right(), g_comm, nullptr));
        int32_t x = 1;
        CCL_OK(ccl_allreduce(&x, &x, 1, CCL_INT32, CCL_SUM, g_comm, nullptr, nullptr));
        EXPECT_EQ(x, g_size);
        ccl_request_t req = nullptr;
        CCL_OK(ccl_recv(&got, 1, CCL_INT64, left(), g_comm, &req));
        std::vector<int32_t> all(static_cast<size_t>(g_size));
        CCL_OK(ccl_allgather(&x, all.data(), 1, CCL_INT32, g_comm, nullptr, nullptr));
        CCL_OK(ccl_wait(req));
        CCL_OK(ccl_request_free(req));
        EXPECT_EQ(got, int64_t(left()) * 100 + it);
        EXPECT_EQ(all, std::vector<int32_t>(size_t(g_size), g_size));
        if (it % 10 == 0) {
            CCL_OK(ccl_barrier(g_comm, nullptr));
        }
    }
}

// A receive whose count or datatype differs from the message fails on the receiver only (the
// message is dropped); the sender's send succeeded, and the communicator keeps working.
TEST(P2P, MismatchedReceiveIsRefused) {
    std::vector<int32_t> out(5, g_rank), in(6, -1);
    CCL_OK(ccl_send(out.data(), 5, CCL_INT32, right(), g_comm, nullptr));
    EXPECT_FAILS(ccl_recv(in.data(), 6, CCL_INT32, left(), g_comm, nullptr),
                 CCL_ERROR_INVALID_USAGE, "count");
    expect_comm_still_works();
    // Fewer elements than sent.
    CCL_OK(ccl_send(out.data(), 5, CCL_INT32, right(), g_comm, nullptr));
    EXPECT_FAILS(ccl_recv(in.data(), 4, CCL_INT32, left(), g_comm, nullptr),
                 CCL_ERROR_INVALID_USAGE, "count");
    // Same byte size, other datatype.
    CCL_OK(ccl_send(out.data(), 5, CCL_INT32, right(), g_comm, nullptr));
    EXPECT_FAILS(ccl_recv(in.data(), 5, CCL_FLOAT32, left(), g_comm, nullptr),
                 CCL_ERROR_INVALID_USAGE, "datatype");
    // Nonblocking: the error comes through the request.
    CCL_OK(ccl_send(out.data(), 5, CCL_INT32, right(), g_comm, nullptr));
    ccl_request_t req = nullptr;
    CCL_OK(ccl_recv(in.data(), 3, CCL_INT32, left(), g_comm, &req));
    EXPECT_EQ(ccl_wait(req), CCL_ERROR_INVALID_USAGE) << ccl_last_error();
    CCL_OK(ccl_request_free(req));
    expect_comm_still_works();
    // The dropped messages are gone: the next receive gets the next message.
    std::vector<int32_t> good(5, g_rank + 1000), got(5, -1);
    CCL_OK(ccl_send(good.data(), 5, CCL_INT32, right(), g_comm, nullptr));
    CCL_OK(ccl_recv(got.data(), 5, CCL_INT32, left(), g_comm, nullptr));
    EXPECT_EQ(got, std::vector<int32_t>(5, left() + 1000));
    // And collectives still work afterwards.
    EXPECT_TRUE(run_alltoall(Ctx{g_comm, g_rank, g_size}, CCL_INT32, 9, false, 900));
}

// The same with large messages (across nodes a message goes straight into its receive's buffer,
// so a longer one is truncated by the provider, which must drop the rest and keep the
// connection): longer and shorter than the receive, on both sides of the eager and rendezvous
// sizes, each followed by a good message.
TEST(P2P, LargeMismatchedReceiveIsRefused) {
    // Across nodes 300000 bytes go in three parts, 600000 in five and 900000 in seven (full
    // parts, then the tail in 32 KiB pieces), 258048 in one.
    const size_t sizes[][2] = {{300000, 299999}, {300000, 300001}, {70000, 3},
                               {5, 70000},       {2000000, 16},    {16, 2000000},
                               {600000, 900000}, {900000, 600000}, {900000, 258048}};
    uint64_t seed = 980;
    for (const auto& [sent, expected] : sizes) {
        Message out(sent, CCL_UINT8, g_rank, ++seed);
        CCL_OK(ccl_send(out.data(), sent, CCL_UINT8, right(), g_comm, nullptr));
        Guarded in(expected);
        EXPECT_FAILS(ccl_recv(in.data(), expected, CCL_UINT8, left(), g_comm, nullptr),
                     CCL_ERROR_INVALID_USAGE, "count");
        EXPECT_TRUE(in.guard_intact()) << sent << " bytes into " << expected;
        Message good(sent, CCL_UINT8, g_rank, ++seed);
        CCL_OK(ccl_send(good.data(), sent, CCL_UINT8, right(), g_comm, nullptr));
        Guarded got(sent);
        CCL_OK(ccl_recv(got.data(), sent, CCL_UINT8, left(), g_comm, nullptr));
        EXPECT_EQ(
            check_block(got.data(), sent, CCL_UINT8, left(), seed, 0,
                        "after " + std::to_string(sent) + " into " + std::to_string(expected)),
            0u);
    }
    // A large message with the right size but another datatype.
    Message out(100000, CCL_INT32, g_rank, ++seed);
    CCL_OK(ccl_send(out.data(), 100000, CCL_INT32, right(), g_comm, nullptr));
    Guarded in(400000);
    EXPECT_FAILS(ccl_recv(in.data(), 100000, CCL_FLOAT32, left(), g_comm, nullptr),
                 CCL_ERROR_INVALID_USAGE, "datatype");
    expect_comm_still_works();
}

// A send has completed, so its message is on its way: the sender may destroy its communicator at
// once, and the receiver (still in its receive, on its own communicator) gets the message. A ring
// on a fresh communicator each round, destroyed right after.
TEST(P2P, SenderDestroysItsCommunicatorRightAfter) {
    for (int round = 0; round < 3; ++round) {
        ccl_comm_t c = nullptr;
        CCL_OK(ccl_comm_create_from_env(&c));
        const size_t count = round == 2 ? 100000 : 1 + size_t(round) * 1000;
        Message out(count, CCL_INT32, g_rank, 950 + uint64_t(round));
        Guarded in(count * 4);
        CCL_OK(ccl_send(out.data(), count, CCL_INT32, right(), c, nullptr));
        EXPECT_EQ(ccl_recv(in.data(), count, CCL_INT32, left(), c, nullptr), CCL_SUCCESS)
            << "round " << round << ": " << ccl_last_error();
        CCL_OK(ccl_comm_destroy(c));
        EXPECT_EQ(check_block(in.data(), count, CCL_INT32, left(), 950 + uint64_t(round), 0,
                              "round " + std::to_string(round)),
                  0u);
    }
    expect_comm_still_works();
}

// Sends never wait for their receiver (ccl.h), however many of a peer's messages are unreceived:
// past what a channel's ring of descriptors holds (128 pieces: 128 small messages, 32 of 1 MiB,
// which go in 4 pieces each) the pieces continue in further rings, made as needed. Every rank
// sends all its messages first (to the next rank, or to itself), then receives them in order,
// each checked. Run with a short CCL_TIMEOUT (test_p2p.unreceived in tests/CMakeLists.txt), so
// that a send waiting for its receive fails fast.
//
// Message k from rank r: element i is a cheap function of (r, k, i), which the check (most of
// these tests' time with the reference's values) recomputes as it compares.
uint32_t pattern(int from, int k, size_t i) {
    return uint32_t(i) * 0x9e3779b1u + uint32_t(from) * 0x85ebca77u + uint32_t(k) * 0xc2b2ae3du;
}

void send_all_then_receive(int to, int from, int n, size_t count) {
    std::vector<uint32_t> out(count), in(count + 1);
    for (int k = 0; k < n; ++k) {
        for (size_t i = 0; i < count; ++i) out[i] = pattern(g_rank, k, i);
        CCL_OK(ccl_send(out.data(), count, CCL_UINT32, to, g_comm, nullptr))
            << "send " << k << " of " << n << ", none received yet";
    }
    for (int k = 0; k < n; ++k) {
        in[count] = 0x5a5a5a5a;  // a guard after the buffer
        CCL_OK(ccl_recv(in.data(), count, CCL_UINT32, from, g_comm, nullptr)) << "receive " << k;
        size_t wrong = 0;
        for (size_t i = 0; i < count; ++i) wrong += in[i] != pattern(from, k, i);
        ASSERT_EQ(wrong, 0u) << "message " << k << " of " << n << " from rank " << from;
        ASSERT_EQ(in[count], 0x5a5a5a5au) << "message " << k;
    }
}

constexpr size_t kMiB32 = (size_t(1) << 20) / 4;  // 1 MiB of uint32

TEST(P2PUnreceived, SmallToPeer) { send_all_then_receive(right(), left(), 1000, 8); }
TEST(P2PUnreceived, SmallToSelf) { send_all_then_receive(g_rank, g_rank, 1000, 8); }
// Twice the 33 that timed out before; more only grows /dev/shm (each rank holds them all, in
// segments that double: 64 MiB sent, up to 128 MiB mapped, 1 GiB at 8 ranks).
TEST(P2PUnreceived, LargeToPeer) { send_all_then_receive(right(), left(), 66, kMiB32); }
TEST(P2PUnreceived, LargeToSelf) { send_all_then_receive(g_rank, g_rank, 66, kMiB32); }

// Messages of every way of travelling (count 0, inside one descriptor, spanning several, through
// the data segment, in several pieces) to every rank, itself included, far more than a ring
// holds, before any receive; then received in order from each rank, the first half posted as
// nonblocking receives and waited for at the end, the rest blocking, with one receive of the
// wrong count in the middle (refused, its message dropped, the next one still in place).
TEST(P2PUnreceived, EveryKindToEveryRankInOrder) {
    const int n = 400, wrong = 301;
    auto count = [](int k) {
        switch (k % 5) {
            case 0: return size_t(k * 7) % 27;                   // up to 104 bytes: one descriptor
            case 1: return 27 + size_t(k * 13) % 90;             // up to 464: spanning
            case 2: return 200 + size_t(k * 37) % 3000;          // the data segment
            case 3: return size_t(k % 2);                        // 0 or 4 bytes
            default: return size_t(k % 3 == 0 ? 100000 : 3000);  // 400 KB: two pieces
        }
    };
    auto seed = [](int from, int to, int k) { return 9000 + uint64_t(from * 64 + to) * 1000 + k; };
    for (int k = 0; k < n; ++k)
        for (int to = 0; to < g_size; ++to) {
            Message out(count(k), CCL_INT32, g_rank, seed(g_rank, to, k));
            CCL_OK(ccl_send(out.data(), count(k), CCL_INT32, to, g_comm, nullptr))
                << "send " << k << " to rank " << to;
        }
    for (int from = 0; from < g_size; ++from) {
        std::deque<Guarded> in;  // Guarded does not move
        std::vector<ccl_request_t> reqs;
        for (int k = 0; k < n; ++k) in.emplace_back(count(k) * 4);
        for (int k = 0; k < n / 2; ++k) {
            reqs.push_back(nullptr);
            CCL_OK(ccl_recv(in[size_t(k)].data(), count(k), CCL_INT32, from, g_comm, &reqs.back()));
        }
        for (int k = n / 2; k < n; ++k) {
            if (k == wrong) {
                Guarded other(count(k) * 4 + 4);
                EXPECT_FAILS(ccl_recv(other.data(), count(k) + 1, CCL_INT32, from, g_comm, nullptr),
                             CCL_ERROR_INVALID_USAGE, "count");
                continue;
            }
            CCL_OK(ccl_recv(in[size_t(k)].data(), count(k), CCL_INT32, from, g_comm, nullptr))
                << "receive " << k << " from rank " << from;
        }
        for (ccl_request_t& r : reqs) {
            CCL_OK(ccl_wait(r));
            CCL_OK(ccl_request_free(r));
        }
        for (int k = 0; k < n; ++k) {
            if (k == wrong) continue;
            ASSERT_EQ(
                check_block(in[size_t(k)].data(), count(k), CCL_INT32, from, seed(from, g_rank, k),
                            0, "message " + std::to_string(k) + " from " + std::to_string(from)),
                0u);
            ASSERT_TRUE(in[size_t(k)].guard_intact()) << "message " << k;
        }
    }
    expect_comm_still_works();
}

TEST(P2P, PeerOutOfRange) {
    int32_t v = 0;
    ccl_request_t req = nullptr;
    EXPECT_FAILS(ccl_send(&v, 1, CCL_INT32, -1, g_comm, nullptr), CCL_ERROR_INVALID_ARGUMENT,
                 "peer");
    EXPECT_FAILS(ccl_send(&v, 1, CCL_INT32, g_size, g_comm, &req), CCL_ERROR_INVALID_ARGUMENT,
                 "peer");
    EXPECT_EQ(req, nullptr);
    EXPECT_FAILS(ccl_recv(&v, 1, CCL_INT32, g_size, g_comm, nullptr), CCL_ERROR_INVALID_ARGUMENT,
                 "peer");
    EXPECT_FAILS(ccl_recv(&v, 1, CCL_INT32, -5, g_comm, &req), CCL_ERROR_INVALID_ARGUMENT, "peer");
    EXPECT_EQ(req, nullptr);
    EXPECT_FAILS(ccl_recv(&v, 1, CCL_INT32, CCL_UNDEFINED, g_comm, nullptr),
                 CCL_ERROR_INVALID_ARGUMENT, "peer");
    expect_comm_still_works();
}

}  // namespace
