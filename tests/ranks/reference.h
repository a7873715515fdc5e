// Reference data and results for the multi-rank tests of the collective family (reduce, gathers,
// reduce_scatter, all-to-alls, point to point), written independently of the library.
//
// Every rank generates what any rank contributes from a deterministic function of (rank, index,
// seed, datatype), so each rank checks its own results without trusting ccl to move the reference.
// Floats are small integers (quarters for 32/64-bit, products of +-1, +-2 and 0.5) so that every
// sum, product and average is exact in any order; integers span their whole range so that sums and
// products wrap as two's complement.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "ccl/ccl.h"

namespace test {

inline constexpr ccl_datatype_t kTypes[] = {CCL_INT8,    CCL_UINT8,    CCL_INT16,   CCL_UINT16,
                                            CCL_INT32,   CCL_UINT32,   CCL_INT64,   CCL_UINT64,
                                            CCL_FLOAT16, CCL_BFLOAT16, CCL_FLOAT32, CCL_FLOAT64};
inline constexpr ccl_reduction_t kOps[] = {CCL_SUM, CCL_PROD, CCL_MIN, CCL_MAX, CCL_AVG};

inline size_t type_size(ccl_datatype_t t) {
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
inline bool is_float(ccl_datatype_t t) { return t >= CCL_FLOAT16; }
inline bool is_signed(ccl_datatype_t t) {
    return t == CCL_INT8 || t == CCL_INT16 || t == CCL_INT32 || t == CCL_INT64;
}

inline uint64_t mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

// The value rank r contributes at (logical) index i: as a float for the float types, as raw bits
// for the integer types.
inline double float_value(int r, size_t i, uint64_t seed, ccl_reduction_t op, ccl_datatype_t t) {
    uint64_t h = mix(seed * 1000003 + uint64_t(r) * 7919 + i);
    if (op == CCL_PROD) {
        const double v[] = {-2, -1, 1, 2, 0.5, 1};
        return v[h % 6];
    }
    double v = double(int(h % 33) - 16);
    return (t == CCL_FLOAT32 || t == CCL_FLOAT64) ? v / 4 : v;
}
inline uint64_t int_value(int r, size_t i, uint64_t seed) {
    return mix(seed * 1000003 + uint64_t(r) * 7919 + i);
}

// Float <-> 16-bit conversions for the test's side.
inline uint16_t to_bf16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if (std::isnan(f)) return uint16_t((u >> 16) | 0x40);
    u += 0x7fff + ((u >> 16) & 1);
    return uint16_t(u >> 16);
}
inline uint16_t to_fp16(float f) {
    _Float16 h = _Float16(f);
    uint16_t u;
    std::memcpy(&u, &h, 2);
    return u;
}

inline void store(void* buf, size_t i, ccl_datatype_t t, double fv, uint64_t iv) {
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

// Large buffers are recycled rather than allocated afresh for every call: first-touching fresh
// memory is slow on small (virtual) machines with 8 ranks at once, and would dominate the run.
class BufferPool {
public:
    std::vector<char> take(size_t n) {
        std::lock_guard<std::mutex> lock(mu_);
        size_t best = free_.size();
        for (size_t i = 0; i < free_.size(); ++i)
            if (free_[i].capacity() >= n &&
                (best == free_.size() || free_[i].capacity() < free_[best].capacity()))
                best = i;
        if (best == free_.size()) {
            if (free_.empty()) return std::vector<char>();
            best = 0;  // grow the largest one
            for (size_t i = 1; i < free_.size(); ++i)
                if (free_[i].capacity() > free_[best].capacity()) best = i;
        }
        std::vector<char> v = std::move(free_[best]);
        free_.erase(free_.begin() + std::ptrdiff_t(best));
        return v;
    }
    void give(std::vector<char> v) {
        if (v.capacity() < 4096) return;
        std::lock_guard<std::mutex> lock(mu_);
        if (free_.size() < 8) free_.push_back(std::move(v));
    }

private:
    std::mutex mu_;
    std::vector<std::vector<char>> free_;
};
inline BufferPool& buffer_pool() {
    static BufferPool pool;
    return pool;
}

// A byte buffer of `bytes` from the pool, filled with `init`, followed by a guard byte. Its start
// moves by a few bytes from one buffer to the next (so that recycled memory still gives new
// pointers, for the match_id cache tests); data() is never NULL, even for 0 bytes.
class Guarded {
public:
    static constexpr char kGuard = 0x5a;
    explicit Guarded(size_t n, char init = 0x11) : v_(buffer_pool().take(n + 64)), bytes(n) {
        static std::atomic<unsigned> next{0};
        shift_ = size_t(next.fetch_add(1) % 5) * 8;  // keeps 8-byte alignment
        v_.assign(shift_ + n + 1, init);
        v_[shift_ + n] = kGuard;
    }
    ~Guarded() { buffer_pool().give(std::move(v_)); }
    Guarded(const Guarded&) = delete;
    Guarded& operator=(const Guarded&) = delete;
    char* data() { return v_.data() + shift_; }
    const char* data() const { return v_.data() + shift_; }
    bool guard_intact() const { return v_[shift_ + bytes] == kGuard; }
    // Whether every byte before the guard is still `init`.
    bool untouched(char init = 0x11) const {
        return std::all_of(data(), data() + bytes, [init](char ch) { return ch == init; });
    }

private:
    std::vector<char> v_;
    size_t shift_ = 0;

public:
    const size_t bytes;
};

// Rank r's input elements first .. first+count-1 (for a reduction `op`), written to buf[0 ..].
inline void fill(void* buf, size_t count, ccl_datatype_t t, int r, uint64_t seed,
                 ccl_reduction_t op = CCL_SUM, size_t first = 0) {
    for (size_t i = 0; i < count; ++i)
        store(buf, i, t, float_value(r, first + i, seed, op, t), int_value(r, first + i, seed));
}

// The reduction `op` over ranks 0 .. n-1 of their element i, written to out[0].
inline void expected(void* out, size_t i, ccl_datatype_t t, ccl_reduction_t op, uint64_t seed,
                     int n) {
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

// Counts the elements of got[0 .. count) that differ from the reduction over n ranks of elements
// first .. first+count-1; reports the first one.
inline size_t check_reduced(const void* got, size_t count, ccl_datatype_t t, ccl_reduction_t op,
                            uint64_t seed, int n, size_t first, const std::string& what) {
    const size_t es = type_size(t);
    Guarded want(count * es);
    for (size_t i = 0; i < count; ++i) expected(want.data() + i * es, first + i, t, op, seed, n);
    if (count == 0 || std::memcmp(want.data(), got, count * es) == 0) return 0;
    size_t wrong = 0;
    for (size_t i = 0; i < count; ++i)
        if (std::memcmp(want.data() + i * es, static_cast<const char*>(got) + i * es, es) != 0 &&
            wrong++ == 0)
            ADD_FAILURE() << what << ": type " << int(t) << " op " << int(op) << " count " << count
                          << ": first wrong element at " << i;
    return wrong;
}

// Counts the elements of got[0 .. count) that are not rank r's input elements first ..
// first+count-1; reports the first one.
inline size_t check_block(const void* got, size_t count, ccl_datatype_t t, int r, uint64_t seed,
                          size_t first, const std::string& what) {
    const size_t es = type_size(t);
    Guarded want(count * es);
    fill(want.data(), count, t, r, seed, CCL_SUM, first);
    if (count == 0 || std::memcmp(want.data(), got, count * es) == 0) return 0;
    size_t wrong = 0;
    for (size_t i = 0; i < count; ++i)
        if (std::memcmp(want.data() + i * es, static_cast<const char*>(got) + i * es, es) != 0 &&
            wrong++ == 0)
            ADD_FAILURE() << what << ": type " << int(t) << " block of rank " << r << " count "
                          << count << ": first wrong element at " << i;
    return wrong;
}

// The shared-memory buffer size this run uses (CCL_SHM_BUFFER_SIZE as docs/env.md defines it;
// 1 MiB by default), and an odd element count whose bytes exceed it by about a third: a "large"
// message that goes in several chunks, sized to the run so that the 64K variants stay cheap.
inline size_t shm_buffer_bytes() {
    const char* v = std::getenv("CCL_SHM_BUFFER_SIZE");
    if (!v || !*v) return size_t(1) << 20;
    char* end = nullptr;
    unsigned long long n = std::strtoull(v, &end, 10);
    switch (end && *end ? *end : ' ') {
        case 'K':
        case 'k': n <<= 10; break;
        case 'M':
        case 'm': n <<= 20; break;
        case 'G':
        case 'g': n <<= 30; break;
        default: break;
    }
    return size_t(n);
}
inline size_t large_count(ccl_datatype_t t) {
    return (shm_buffer_bytes() / 3 * 4 + 1000) / type_size(t) | 1;
}

// ---------------------------------------------------------------------------------------------
// Checked runs of each collective of the family on any communicator: every rank of `comm` calls
// the same function with the same arguments; each builds its input, runs the call (blocking, or
// nonblocking and waited, and/or cached under a match_id) and checks its own output, that nothing
// was written past the end of recv, and that an out-of-place send buffer was left alone. They
// return false after reporting a failure (through ADD_FAILURE, so the caller's test fails).

struct Ctx {
    ccl_comm_t comm;
    int rank;
    int size;
};

// How a call is made: nonblocking (then waited on) and/or cached under match_id.
struct How {
    bool nonblocking = false;
    const char* match_id = nullptr;  // set: attr.to_cache with this match_id
    ccl_coll_attr_t attr() const {
        ccl_coll_attr_t a = CCL_COLL_ATTR_INIT;
        if (match_id) {
            a.match_id = match_id;
            a.to_cache = 1;
        }
        return a;
    }
};

// Submits `call`, then runs the statements `...` (if any), then, if nonblocking, waits for and
// frees the request; reports a failure and returns false from the enclosing function.
#define REF_RUN(how, call, ...)                                                             \
    do {                                                                                    \
        ccl_request_t req_ = nullptr;                                                       \
        ccl_request_t* reqp = (how).nonblocking ? &req_ : nullptr;                          \
        ccl_result_t r_ = (call);                                                           \
        if (r_ != CCL_SUCCESS) {                                                            \
            ADD_FAILURE() << #call << ": " << ccl_strerror(r_) << ": " << ccl_last_error(); \
            return false;                                                                   \
        }                                                                                   \
        __VA_ARGS__;                                                                        \
        if (reqp) {                                                                         \
            if (!req_) {                                                                    \
                ADD_FAILURE() << #call << ": no request returned";                          \
                return false;                                                               \
            }                                                                               \
            r_ = ccl_wait(req_);                                                            \
            std::string m_ = ccl_last_error();                                              \
            ccl_result_t f_ = ccl_request_free(req_);                                       \
            if (r_ != CCL_SUCCESS || f_ != CCL_SUCCESS) {                                   \
                ADD_FAILURE() << #call << ": wait: " << ccl_strerror(r_) << ": " << m_      \
                              << "; free: " << ccl_strerror(f_);                            \
                return false;                                                               \
            }                                                                               \
        }                                                                                   \
    } while (0)

inline std::string describe(const char* coll, ccl_datatype_t t, size_t count, bool in_place,
                            const How& how) {
    return std::string(coll) + " type " + std::to_string(int(t)) + " count " +
           std::to_string(count) + (in_place ? " in place" : " out of place") +
           (how.nonblocking ? " nonblocking" : "") +
           (how.match_id ? std::string(" cached as ") + how.match_id : std::string());
}

// Whether send still holds rank r's elements first .. first+count-1 (for `op`).
inline bool send_intact(const void* send, size_t count, ccl_datatype_t t, int r, uint64_t seed,
                        ccl_reduction_t op, const std::string& what) {
    Guarded want(count * type_size(t));
    fill(want.data(), count, t, r, seed, op);
    if (count && std::memcmp(want.data(), send, count * type_size(t)) != 0) {
        ADD_FAILURE() << what << ": the send buffer was modified";
        return false;
    }
    return true;
}

inline bool guard_ok(const Guarded& g, const std::string& what) {
    if (g.guard_intact()) return true;
    ADD_FAILURE() << what << ": wrote past the end of recv";
    return false;
}

// reduce to `root`. In place: the root passes send == recv and the other ranks recv = NULL. Out of
// place: the other ranks pass a recv buffer, which must stay untouched.
inline bool run_reduce(const Ctx& c, ccl_datatype_t t, ccl_reduction_t op, size_t count, int root,
                       bool in_place, uint64_t seed, const How& how = {}) {
    const std::string what = describe("reduce", t, count, in_place, how) + " op " +
                             std::to_string(int(op)) + " root " + std::to_string(root);
    const size_t es = type_size(t);
    Guarded send(count * es), recv(count * es);
    fill(send.data(), count, t, c.rank, seed, op);
    const bool at_root = c.rank == root;
    void* out = in_place ? (at_root ? send.data() : nullptr) : recv.data();
    ccl_coll_attr_t attr = how.attr();
    REF_RUN(how, ccl_reduce(send.data(), out, count, t, op, root, c.comm, &attr, reqp));
    bool ok = true;
    if (at_root) {
        Guarded& res = in_place ? send : recv;
        ok &= check_reduced(res.data(), count, t, op, seed, c.size, 0, what) == 0;
        ok &= guard_ok(res, what);
    } else {
        ok &= send_intact(send.data(), count, t, c.rank, seed, op, what);
    }
    if (!in_place) {
        if (at_root) ok &= send_intact(send.data(), count, t, c.rank, seed, op, what);
        if (!at_root && !recv.untouched()) {
            ADD_FAILURE() << what << ": rank " << c.rank
                          << " is not the root, but its recv changed";
            ok = false;
        }
        ok &= guard_ok(recv, what);
    }
    return ok;
}

// reduce_scatter of `recvcount` elements per rank. In place: recv = send + rank * recvcount.
inline bool run_reduce_scatter(const Ctx& c, ccl_datatype_t t, ccl_reduction_t op, size_t recvcount,
                               bool in_place, uint64_t seed, const How& how = {}) {
    const std::string what =
        describe("reduce_scatter", t, recvcount, in_place, how) + " op " + std::to_string(int(op));
    const size_t es = type_size(t), total = recvcount * size_t(c.size);
    Guarded send(total * es), recv(recvcount * es);
    fill(send.data(), total, t, c.rank, seed, op);
    char* out = in_place ? send.data() + size_t(c.rank) * recvcount * es : recv.data();
    ccl_coll_attr_t attr = how.attr();
    REF_RUN(how, ccl_reduce_scatter(send.data(), out, recvcount, t, op, c.comm, &attr, reqp));
    bool ok =
        check_reduced(out, recvcount, t, op, seed, c.size, size_t(c.rank) * recvcount, what) == 0;
    ok &= guard_ok(in_place ? send : recv, what);
    if (!in_place) ok &= send_intact(send.data(), total, t, c.rank, seed, op, what);
    return ok;
}

// allgather of `count` elements per rank. In place: send = recv + rank * count.
inline bool run_allgather(const Ctx& c, ccl_datatype_t t, size_t count, bool in_place,
                          uint64_t seed, const How& how = {}) {
    const std::string what = describe("allgather", t, count, in_place, how);
    const size_t es = type_size(t);
    Guarded send(count * es), recv(count * size_t(c.size) * es);
    char* own = recv.data() + size_t(c.rank) * count * es;
    fill(in_place ? own : send.data(), count, t, c.rank, seed);
    const char* in = in_place ? own : send.data();
    ccl_coll_attr_t attr = how.attr();
    REF_RUN(how, ccl_allgather(in, recv.data(), count, t, c.comm, &attr, reqp));
    bool ok = true;
    for (int r = 0; r < c.size; ++r)
        ok &= check_block(recv.data() + size_t(r) * count * es, count, t, r, seed, 0, what) == 0;
    ok &= guard_ok(recv, what);
    if (!in_place) ok &= send_intact(send.data(), count, t, c.rank, seed, CCL_SUM, what);
    return ok;
}

// allgatherv with counts[r] elements from rank r. In place: send = recv + the offset of this rank.
inline bool run_allgatherv(const Ctx& c, ccl_datatype_t t, const std::vector<size_t>& counts,
                           bool in_place, uint64_t seed, const How& how = {}) {
    const size_t es = type_size(t);
    std::vector<size_t> offset(size_t(c.size) + 1, 0);
    for (int r = 0; r < c.size; ++r) offset[size_t(r) + 1] = offset[size_t(r)] + counts[size_t(r)];
    const size_t mine = counts[size_t(c.rank)], total = offset[size_t(c.size)];
    const std::string what = describe("allgatherv", t, total, in_place, how);
    Guarded send(mine * es), recv(total * es);
    char* own = recv.data() + offset[size_t(c.rank)] * es;
    fill(in_place ? own : send.data(), mine, t, c.rank, seed);
    const char* in = in_place ? own : send.data();
    // The counts are copied before the call returns: hand over a copy that is then scribbled on.
    std::vector<size_t> rc(counts);
    ccl_coll_attr_t attr = how.attr();
    REF_RUN(how, ccl_allgatherv(in, mine, recv.data(), rc.data(), t, c.comm, &attr, reqp),
            std::fill(rc.begin(), rc.end(), size_t(12345)));
    bool ok = true;
    for (int r = 0; r < c.size; ++r)
        ok &= check_block(recv.data() + offset[size_t(r)] * es, counts[size_t(r)], t, r, seed, 0,
                          what + " block " + std::to_string(r)) == 0;
    ok &= guard_ok(recv, what);
    if (!in_place) ok &= send_intact(send.data(), mine, t, c.rank, seed, CCL_SUM, what);
    return ok;
}

// alltoall of `count` elements per pair. Rank r's send holds its elements 0 .. size*count-1, so
// rank `me` gets elements me*count .. of every rank r as its block r. In place: send == recv.
inline bool run_alltoall(const Ctx& c, ccl_datatype_t t, size_t count, bool in_place, uint64_t seed,
                         const How& how = {}) {
    const std::string what = describe("alltoall", t, count, in_place, how);
    const size_t es = type_size(t), total = count * size_t(c.size);
    Guarded send(total * es), recv(total * es);
    fill(send.data(), total, t, c.rank, seed);
    char* out = in_place ? send.data() : recv.data();
    ccl_coll_attr_t attr = how.attr();
    REF_RUN(how, ccl_alltoall(send.data(), out, count, t, c.comm, &attr, reqp));
    bool ok = true;
    for (int r = 0; r < c.size; ++r)
        ok &= check_block(out + size_t(r) * count * es, count, t, r, seed, size_t(c.rank) * count,
                          what) == 0;
    ok &= guard_ok(in_place ? send : recv, what);
    if (!in_place) ok &= send_intact(send.data(), total, t, c.rank, seed, CCL_SUM, what);
    return ok;
}

// alltoallv where rank `from` sends counts(from, to) elements to rank `to`. Rank r's send holds
// its elements 0 .., block j starting at the sum of counts(r, k) for k < j.
template <class Counts>
bool run_alltoallv(const Ctx& c, ccl_datatype_t t, Counts counts, uint64_t seed,
                   const How& how = {}) {
    const size_t es = type_size(t);
    const size_t n = size_t(c.size);
    std::vector<size_t> sc(n), rcount(n), soff(n + 1, 0), roff(n + 1, 0);
    for (int j = 0; j < c.size; ++j) {
        sc[size_t(j)] = counts(c.rank, j);
        rcount[size_t(j)] = counts(j, c.rank);
        soff[size_t(j) + 1] = soff[size_t(j)] + sc[size_t(j)];
        roff[size_t(j) + 1] = roff[size_t(j)] + rcount[size_t(j)];
    }
    const std::string what = describe("alltoallv", t, soff[n], false, how);
    Guarded send(soff[n] * es), recv(roff[n] * es);
    fill(send.data(), soff[n], t, c.rank, seed);
    std::vector<size_t> scopy(sc), rcopy(rcount);
    ccl_coll_attr_t attr = how.attr();
    REF_RUN(
        how,
        ccl_alltoallv(send.data(), scopy.data(), recv.data(), rcopy.data(), t, c.comm, &attr, reqp),
        std::fill(scopy.begin(), scopy.end(), size_t(777));
        std::fill(rcopy.begin(), rcopy.end(), size_t(777)));
    bool ok = true;
    for (int r = 0; r < c.size; ++r) {
        size_t first = 0;  // where block `rank` starts in rank r's send
        for (int k = 0; k < c.rank; ++k) first += counts(r, k);
        ok &= check_block(recv.data() + roff[size_t(r)] * es, rcount[size_t(r)], t, r, seed, first,
                          what + " block from " + std::to_string(r)) == 0;
    }
    ok &= guard_ok(recv, what);
    ok &= send_intact(send.data(), soff[n], t, c.rank, seed, CCL_SUM, what);
    return ok;
}

}  // namespace test
