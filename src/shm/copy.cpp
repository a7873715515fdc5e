#include "shm/copy.h"

#include <cpuid.h>
#include <emmintrin.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "base/team.h"

namespace ccl::shm {

size_t cache_piece_bytes() {
    static const size_t bytes = [] {
        const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
        return l2 >= (128 << 10) ? size_t(l2) / 2 : size_t(512) << 10;
    }();
    return bytes;
}

// On the 2-core Xeon VM (2 MiB of L2, copies past it at about 13 GB/s with ordinary stores, 19
// with non-temporal ones), 2 ranks, 2 MiB, whose own block is 1 MiB, alternating launches, medians,
// us: all-to-all 200 -> 181 (another eight pairs: 220 -> 207, faster in 6, even in 2), allgather
// 174 -> 150; on the 16-core host 256 -> 182 and 221 -> 162. On the AMD VM a scratch test of the
// same copies found 1-4 MiB alike either way (docs/performance-history.md, session 35).
bool stream_own_block(size_t block, size_t output) {
    return output >= kStreamMinBytes || block >= cache_piece_bytes();
}

bool streams_result(size_t touched, int ranks) {
    static const size_t l3 = [] {
        const long b = sysconf(_SC_LEVEL3_CACHE_SIZE);
        return b > 0 ? size_t(b) : 0;
    }();
    // Where the L3's size is unknown, by size alone.
    return touched >= 2 * kStreamMinBytes &&
           (l3 == 0 || touched * size_t(std::max(ranks, 1)) > l3 / 2);
}

namespace {

// The cpu's structured extended features (CPUID leaf 7, subleaf 0: EBX and ECX), read once; zero
// where the leaf is missing.
struct Leaf7 {
    unsigned b = 0, c = 0;
};
const Leaf7& leaf7() {
    static const Leaf7 leaf = [] {
        unsigned a, b, c, d;
        return __get_cpuid_count(7, 0, &a, &b, &c, &d) ? Leaf7{b, c} : Leaf7{};
    }();
    return leaf;
}

// Whether the cpu has enhanced rep movsb (ERMS).
bool has_erms() { return leaf7().b & (1u << 9); }

// Whether the cpu has CLDEMOTE (older ones run it as a no-op, but a tool's emulated cpu may not).
bool has_cldemote() { return leaf7().c & (1u << 25); }

// From where this copies with rep movsb itself (SIZE_MAX: never). glibc (2.33 on) copies blocks
// from the L2's size up on AMD cpus with a loop of vector stores instead, whose stores read each
// line first ("ERMS performs poorly above L2" was Zen 3's case); on the 2-core EPYC (Zen 4) VM
// rep movsb was the faster copy of a 2-rank allgather's own 1 MiB block (2 MiB allgather, medians
// of 7-8 launches: 96.3 -> 92.7 us, Open MPI 93.5). Elsewhere glibc uses rep movsb up to where it
// streams.
size_t rep_movsb_min() {
    static const size_t bytes = [] {
        unsigned a, b, c, d;
        if (!__get_cpuid(0, &a, &b, &c, &d) || b != 0x68747541)  // "Auth"enticAMD
            return SIZE_MAX;
        if (!has_erms()) return SIZE_MAX;
        const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
        return l2 > 0 ? size_t(l2) : SIZE_MAX;
    }();
    return bytes;
}

void rep_movsb(void* dst, const void* src, size_t n) {
    asm volatile("rep movsb" : "+D"(dst), "+S"(src), "+c"(n) : : "memory");
}

}  // namespace

void demote(const void* p, size_t n) {
    if (n == 0 || !has_cldemote()) return;
    const auto first = reinterpret_cast<uintptr_t>(p) & ~uintptr_t(63);
    const auto end = reinterpret_cast<uintptr_t>(p) + n;
    for (uintptr_t line = first; line < end; line += 64)
        asm volatile("cldemote (%0)" : : "r"(line) : "memory");
}

void copy_message(void* dst, const void* src, size_t n) {
    if (n >= (size_t(2) << 10) && n <= (size_t(16) << 10) && has_erms())
        rep_movsb(dst, src, n);
    else
        std::memcpy(dst, src, n);
}

void copy_out(void* dst, const void* src, size_t n, bool stream) {
    if (!stream && n >= rep_movsb_min()) {
        rep_movsb(dst, src, n);
        return;
    }
    if (!stream || n < 4096) {
        std::memcpy(dst, src, n);
        return;
    }
    auto* d = static_cast<char*>(dst);
    auto* s = static_cast<const char*>(src);
    size_t head = (64 - (reinterpret_cast<uintptr_t>(d) & 63)) & 63;  // to a cache line
    std::memcpy(d, s, head);
    d += head, s += head, n -= head;
    size_t body = n & ~size_t(63);
    for (size_t i = 0; i < body; i += 64) {
        auto* from = reinterpret_cast<const __m128i*>(s + i);
        auto* to = reinterpret_cast<__m128i*>(d + i);
        __m128i a = _mm_loadu_si128(from), b = _mm_loadu_si128(from + 1),
                c = _mm_loadu_si128(from + 2), e = _mm_loadu_si128(from + 3);
        _mm_stream_si128(to, a);
        _mm_stream_si128(to + 1, b);
        _mm_stream_si128(to + 2, c);
        _mm_stream_si128(to + 3, e);
    }
    _mm_sfence();  // streamed stores are weakly ordered: complete them before anything follows
    std::memcpy(d + body, s + body, n - body);
}

void copy_wide(void* dst, const void* src, size_t n, bool stream) {
    team_for(n, 1, 64, [&](size_t b, size_t e) {
        copy_out(static_cast<char*>(dst) + b, static_cast<const char*>(src) + b, e - b, stream);
    });
}

void copy_wide(const Copy* copies, size_t count, bool stream) {
    size_t total = 0;
    for (size_t i = 0; i < count; ++i) total += copies[i].n;
    if (team_parts(total) < 2) {
        for (size_t i = 0; i < count; ++i)
            copy_out(copies[i].dst, copies[i].src, copies[i].n, stream);
        return;
    }
    // Part [b, e) of the bytes of all copies in a row: the pieces of the copies it overlaps.
    team_for(total, 1, 64, [&](size_t b, size_t e) {
        size_t at = 0;
        for (size_t i = 0; i < count && at < e; at += copies[i].n, ++i) {
            const size_t lo = std::max(b, at), hi = std::min(e, at + copies[i].n);
            if (lo < hi)
                copy_out(static_cast<char*>(copies[i].dst) + (lo - at),
                         static_cast<const char*>(copies[i].src) + (lo - at), hi - lo, stream);
        }
    });
}

}  // namespace ccl::shm
