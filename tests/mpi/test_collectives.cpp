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

using namespace test;

namespace {

const ccl_datatype_t kTypes[] = {CCL_INT8,    CCL_UINT8,    CCL_INT16,   CCL_UINT16,
                                 CCL_INT32,   CCL_UINT32,   CCL_INT64,   CCL_UINT64,
                                 CCL_FLOAT16, CCL_BFLOAT16, CCL_FLOAT32, CCL_FLOAT64};
const ccl_reduction_t kOps[] = {CCL_SUM, CCL_PROD, CCL_MIN, CCL_MAX, CCL_AVG};

size_t type_size(ccl_datatype_t t) {
    switch (t) {
        case CCL_INT8:
        case CCL_UINT8: return 1;
        case CCL_INT16:
        case CCL_UINT16:
        case CCL_FLOAT16:
        case CCL_BFLOAT16: return 2;
        case CCL_INT32:
        case CCL_UINT32:
        case CCL_FLOAT32: return 4;
        default: return 8;
    }
}
bool is_float(ccl_datatype_t t) { return t >= CCL_FLOAT16; }
bool is_signed(ccl_datatype_t t) {
    return t == CCL_INT8 || t == CCL_INT16 || t == CCL_INT32 || t == CCL_INT64;
}

uint64_t mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

// The value rank r contributes at index i. Floats are small integers (quarters for 32/64-bit) so
// that every sum, product and average below is exact in any order; integers span their whole
// range so that sums and products wrap.
double float_value(int r, size_t i, uint64_t seed, ccl_reduction_t op, ccl_datatype_t t) {
    uint64_t h = mix(seed * 1000003 + uint64_t(r) * 7919 + i);
    if (op == CCL_PROD) {
        const double v[] = {-2, -1, 1, 2, 0.5, 1};
        return v[h % 6];
    }
    double v = double(int(h % 33) - 16);
    return (t == CCL_FLOAT32 || t == CCL_FLOAT64) ? v / 4 : v;
}
uint64_t int_value(int r, size_t i, uint64_t seed) {
    return mix(seed * 1000003 + uint64_t(r) * 7919 + i);
}

// Float <-> 16-bit conversions for the test's side, written independently of the library.
uint16_t to_bf16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if (std::isnan(f)) return uint16_t((u >> 16) | 0x40);
    u += 0x7fff + ((u >> 16) & 1);
    return uint16_t(u >> 16);
}
uint16_t to_fp16(float f) {
    _Float16 h = _Float16(f);
    uint16_t u;
    std::memcpy(&u, &h, 2);
    return u;
}

void store(void* buf, size_t i, ccl_datatype_t t, double fv, uint64_t iv) {
    char* p = static_cast<char*>(buf) + i * type_size(t);
    switch (t) {
        case CCL_FLOAT16: {
            uint16_t h = to_fp16(float(fv));
            std::memcpy(p, &h, 2);
            break;
        }
        case CCL_BFLOAT16: {
            uint16_t h = to_bf16(float(fv));
            std::memcpy(p, &h, 2);
            break;
        }
        case CCL_FLOAT32: {
            float f = float(fv);
            std::memcpy(p, &f, 4);
            break;
        }
        case CCL_FLOAT64: std::memcpy(p, &fv, 8); break;
        default: std::memcpy(p, &iv, type_size(t)); break;  // little endian: the low bytes
    }
}

// The expected element i for `op` over all ranks, written to out[0].
void expected(void* out, size_t i, ccl_datatype_t t, ccl_reduction_t op, uint64_t seed, int n) {
    if (is_float(t)) {
        double acc = float_value(0, i, seed, op, t);
        for (int r = 1; r < n; ++r) {
            double v = float_value(r, i, seed, op, t);
            if (op == CCL_SUM || op == CCL_AVG)
                acc += v;
            else if (op == CCL_PROD)
                acc *= v;
            else if (op == CCL_MIN)
                acc = std::fmin(acc, v);
            else
                acc = std::fmax(acc, v);
        }
        if (op == CCL_AVG) {  // the exact sum divided once, in the type's accumulator precision
            acc = t == CCL_FLOAT64 ? acc / n : double(float(acc) / float(n));
        }
        store(out, 0, t, acc, 0);
        return;
    }
    const int bits = int(type_size(t) * 8);
    const uint64_t mask = bits == 64 ? ~0ull : (1ull << bits) - 1;
    auto sext = [&](uint64_t v) -> int64_t {  // the value as the signed type sees it
        v &= mask;
        if (bits < 64 && (v >> (bits - 1)) & 1) v |= ~mask;
        return int64_t(v);
    };
    uint64_t acc = int_value(0, i, seed) & mask;
    for (int r = 1; r < n; ++r) {
        uint64_t v = int_value(r, i, seed) & mask;
        if (op == CCL_SUM || op == CCL_AVG)
            acc = (acc + v) & mask;
        else if (op == CCL_PROD)
            acc = (acc * v) & mask;
        else if (is_signed(t)) {
            bool less = sext(v) < sext(acc);
            if ((op == CCL_MIN) == less) acc = v;
        } else if ((op == CCL_MIN) == (v < acc))
            acc = v;
    }
    if (op == CCL_AVG) acc = is_signed(t) ? uint64_t(sext(acc) / n) : acc / uint64_t(n);
    store(out, 0, t, 0, acc);
}

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

// Sizes on both sides of the direct/rsag threshold and of the shared-memory buffer (the tests
// run with CCL_SHM_BUFFER_SIZE=64K, so the largest ones take several chunks).
const size_t kCounts[] = {0, 1, 3, 17, 1000, 4097, 40001, 70001};

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
        if (c == ':' || c == '.') c = '_';
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
