// allreduce, broadcast and barrier on every rank of cclrun's job, for every datatype and
// reduction, against a reference each rank computes on its own from what every rank contributes.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common.h"
#include "reference.h"

using namespace test;

namespace {

void fill_input(void* buf, size_t count, ccl_datatype_t t, ccl_reduction_t op, uint64_t seed) {
    for (size_t i = 0; i < count; ++i)
        store(buf, i, t, float_value(g_rank, i, seed, op, t), int_value(g_rank, i, seed));
}

// Checks recv against the reference; returns the number of wrong elements (reports the first).
size_t check_allreduce(const void* recv, size_t count, ccl_datatype_t t, ccl_reduction_t op,
                       uint64_t seed) {
    size_t es = type_size(t), wrong = 0;
    std::vector<char> want(es);
    for (size_t i = 0; i < count; ++i) {
        expected(want.data(), i, t, op, seed, g_size);
        if (std::memcmp(want.data(), static_cast<const char*>(recv) + i * es, es) != 0 &&
            wrong++ == 0) {
            ADD_FAILURE() << "rank " << g_rank << ": type " << t << " op " << op << " count "
                          << count << ": first wrong element at " << i;
        }
    }
    return wrong;
}

// Sizes on both sides of the eager slot (31 x 8 B fills it), of the direct/rsag threshold and of
// the shared-memory buffer (the tests run with CCL_SHM_BUFFER_SIZE=64K, so the largest ones take
// several chunks).
const size_t kCounts[] = {0, 1, 3, 17, 31, 1000, 4097, 40001, 70001};

TEST(Allreduce, EveryTypeOpAndSize) {
    uint64_t seed = 1;
    for (ccl_datatype_t t : kTypes)
        for (ccl_reduction_t op : kOps)
            for (size_t count : kCounts) {
                if (count * type_size(t) > (1u << 20) && op != CCL_SUM)
                    continue;  // keep the test short
                for (bool in_place : {false, true}) {
                    ++seed;
                    std::vector<char> send(count * type_size(t) + 1),
                        recv(count * type_size(t) + 1, 0x5a);
                    fill_input(send.data(), count, t, op, seed);
                    void* out = in_place ? send.data() : recv.data();
                    CCL_OK(ccl_allreduce(send.data(), out, count, t, op, g_comm, nullptr, nullptr));
                    EXPECT_EQ(check_allreduce(out, count, t, op, seed), 0u)
                        << (in_place ? "in place" : "out of place");
                    if (!in_place) {
                        EXPECT_EQ(recv[count * type_size(t)], 0x5a) << "wrote past the end";
                    }
                }
            }
}

TEST(Allreduce, UnalignedBuffers) {
    for (size_t offset : {1, 3, 5}) {
        size_t count = 33333;
        std::vector<char> send(count * 4 + 8), recv(count * 4 + 8);
        fill_input(send.data() + offset, count, CCL_FLOAT32, CCL_SUM, 77 + offset);
        CCL_OK(ccl_allreduce(send.data() + offset, recv.data() + offset, count, CCL_FLOAT32,
                             CCL_SUM, g_comm, nullptr, nullptr));
        EXPECT_EQ(check_allreduce(recv.data() + offset, count, CCL_FLOAT32, CCL_SUM, 77 + offset),
                  0u);
    }
}

// Large enough that a ring across nodes cuts its blocks into parts of both kinds (eager and
// rendezvous, transport/collectives.cpp). Only where CCL_TEST_LARGE is set (the multinode tests):
// 40 MiB per rank is too much for 8 ranks under sanitizers.
TEST(Allreduce, Large) {
    if (!std::getenv("CCL_TEST_LARGE")) GTEST_SKIP() << "CCL_TEST_LARGE not set";
    const size_t count = (10u << 20) + 3;
    std::vector<char> send(count * 4), recv(count * 4);
    fill_input(send.data(), count, CCL_FLOAT32, CCL_SUM, 4242);
    CCL_OK(ccl_allreduce(send.data(), recv.data(), count, CCL_FLOAT32, CCL_SUM, g_comm, nullptr,
                         nullptr));
    EXPECT_EQ(check_allreduce(recv.data(), count, CCL_FLOAT32, CCL_SUM, 4242), 0u);
}

TEST(Allreduce, ManyCallsInARow) {
    std::vector<int32_t> buf(5);
    for (int it = 0; it < 3000; ++it) {
        for (size_t i = 0; i < buf.size(); ++i) buf[i] = int32_t(it * 10 + g_rank + int(i));
        CCL_OK(ccl_allreduce(buf.data(), buf.data(), buf.size(), CCL_INT32, CCL_SUM, g_comm,
                             nullptr, nullptr));
        for (size_t i = 0; i < buf.size(); ++i) {
            int32_t want = g_size * (it * 10 + int32_t(i)) + g_size * (g_size - 1) / 2;
            if (buf[i] != want)
                FAIL() << "iteration " << it << " element " << i << ": " << buf[i]
                       << " != " << want;
        }
    }
}

TEST(Broadcast, EveryRootTypeAndSize) {
    uint64_t seed = 500;
    for (int root = 0; root < g_size; ++root)
        for (ccl_datatype_t t : {CCL_INT8, CCL_FLOAT16, CCL_INT32, CCL_FLOAT64})
            for (size_t count : kCounts) {
                ++seed;
                size_t es = type_size(t);
                std::vector<char> buf(count * es + 1, 0x33), want(count * es + 1);  // never empty
                for (size_t i = 0; i < count; ++i)
                    store(want.data(), i, t, float_value(root, i, seed, CCL_SUM, t),
                          int_value(root, i, seed));
                if (g_rank == root) std::memcpy(buf.data(), want.data(), count * es);
                CCL_OK(ccl_broadcast(buf.data(), count, t, root, g_comm, nullptr, nullptr));
                EXPECT_EQ(std::memcmp(buf.data(), want.data(), count * es), 0)
                    << "root " << root << " type " << t << " count " << count;
                EXPECT_EQ(buf[count * es], 0x33) << "wrote past the end";
            }
}

// Each rank appends a byte to a file shared by the job and then enters the barrier: after it, the
// file must hold every rank's byte.
TEST(Barrier, NobodyLeavesEarly) {
    std::string address = std::getenv("CCL_KVS_ADDRESS") ? std::getenv("CCL_KVS_ADDRESS") : "x";
    for (char& c : address)
        if (c == ':' || c == '.' || c == '/') c = '_';
    std::string path = "/tmp/ccl-test-barrier-" + address;
    CCL_OK(ccl_barrier(g_comm, nullptr));
    for (int round = 1; round <= 20; ++round) {
        if (g_rank == g_size - 1) usleep(2000);  // the last rank arrives late
        int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
        ASSERT_GE(fd, 0);
        ASSERT_EQ(write(fd, "x", 1), 1);
        close(fd);
        CCL_OK(ccl_barrier(g_comm, nullptr));
        struct stat st {};
        ASSERT_EQ(stat(path.c_str(), &st), 0);
        EXPECT_EQ(st.st_size, off_t(round * g_size)) << "round " << round;
        CCL_OK(ccl_barrier(g_comm, nullptr));  // everyone has checked before the next appends
    }
    CCL_OK(ccl_barrier(g_comm, nullptr));
    if (g_rank == 0) unlink(path.c_str());
}

TEST(Mixed, CollectivesInterleaved) {
    for (int it = 0; it < 200; ++it) {
        double x = g_rank + it, sum = 0;
        CCL_OK(ccl_allreduce(&x, &sum, 1, CCL_FLOAT64, CCL_SUM, g_comm, nullptr, nullptr));
        EXPECT_EQ(sum, double(g_size) * it + g_size * (g_size - 1) / 2.0);
        int64_t v = g_rank == it % g_size ? it : -1;
        CCL_OK(ccl_broadcast(&v, 1, CCL_INT64, it % g_size, g_comm, nullptr, nullptr));
        EXPECT_EQ(v, it);
        if (it % 7 == 0) {
            CCL_OK(ccl_barrier(g_comm, nullptr));
        }
    }
}

// Two communicators over one KVS, used alternately.
TEST(Communicators, TwoAtOnce) {
    ccl_comm_t second = nullptr;
    CCL_OK(ccl_comm_create_from_env(&second));
    for (int it = 0; it < 50; ++it) {
        int a = 1, b = 2;
        CCL_OK(ccl_allreduce(&a, &a, 1, CCL_INT32, CCL_SUM, g_comm, nullptr, nullptr));
        CCL_OK(ccl_allreduce(&b, &b, 1, CCL_INT32, CCL_MAX, second, nullptr, nullptr));
        EXPECT_EQ(a, g_size);
        EXPECT_EQ(b, 2);
    }
    CCL_OK(ccl_comm_destroy(second));
}

}  // namespace
