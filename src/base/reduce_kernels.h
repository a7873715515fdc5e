// The reduction kernels, written once and compiled three times: reduce.cpp (baseline x86-64,
// 16-byte vectors), reduce_avx2.cpp (32-byte) and reduce_avx512.cpp (64-byte), each with its own
// -m flags. reduce.cpp picks one at run time.
//
// A translation unit defines CCL_KERNELS_NS (its namespace under ccl) and CCL_VEC_BYTES, then
// includes this header. Everything below lives in an anonymous namespace inside that namespace:
// inline functions and template instances built with different -m flags must never be merged by
// the linker (an AVX-512 copy could otherwise run on an AVX2-only CPU). For the same reason the
// kernels call no inline function from the standard library (only type traits and builtins).
//
// The loops use GCC vector extensions rather than relying on the auto-vectorizer: GCC 12 at -O2
// (the default build) does not vectorize loops that need alias checks, and never vectorizes
// _Float16 conversions, so explicit vectors are the only way to get the same code at any -O.
// Each lane is computed independently and in source order (src0 op src1 op ...), so the result
// of every element is the same for all three widths.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "ccl/ccl.h"

namespace ccl::kernels_scalar {
void reduce(void* out, const void* const* srcs, int nsrc, size_t count, ccl_datatype_t dtype,
            ccl_reduction_t op, int avg_divisor);
}
namespace ccl::kernels_avx2 {
void reduce(void* out, const void* const* srcs, int nsrc, size_t count, ccl_datatype_t dtype,
            ccl_reduction_t op, int avg_divisor);
}
namespace ccl::kernels_avx512 {
void reduce(void* out, const void* const* srcs, int nsrc, size_t count, ccl_datatype_t dtype,
            ccl_reduction_t op, int avg_divisor);
}

#ifdef CCL_KERNELS_NS

#if CCL_VEC_BYTES != 16 && CCL_VEC_BYTES != 32 && CCL_VEC_BYTES != 64
#error "CCL_VEC_BYTES must be 16, 32 or 64"
#endif
#if CCL_VEC_BYTES >= 32
#include <immintrin.h>  // F16C conversions (always_inline gnu_inline: never emitted out of line)
#endif

namespace ccl::CCL_KERNELS_NS {
namespace {

constexpr size_t kVecBytes = CCL_VEC_BYTES;
// Sources per sweep: up to kMaxFused in one sweep without an accumulator; beyond, blocks.
constexpr int kMaxFused = 8;
// Accumulator bytes per block (nsrc > kMaxFused): stays in L1 next to the source lines. 16 KiB
// measured no better.
constexpr size_t kAccBytes = 4096;

template <class T, size_t Bytes>
struct VecOf {
    typedef T type __attribute__((vector_size(Bytes)));
};
template <class T, size_t Bytes = kVecBytes>
using Vec = typename VecOf<T, Bytes>::type;

template <ccl_reduction_t Op, class V>
inline V apply(V a, V b) {
    if constexpr (Op == CCL_SUM || Op == CCL_AVG) {
        return a + b;
    } else if constexpr (Op == CCL_PROD) {
        return a * b;
    } else if constexpr (Op == CCL_MIN) {
        return b < a ? b : a;
    } else {
        return a < b ? b : a;
    }
}

// Integers. SUM/PROD/AVG accumulate in the unsigned type: vector arithmetic wraps, no UB.
template <class S, ccl_reduction_t Op>
struct IntKernel {
    static constexpr bool kOrdered = Op == CCL_MIN || Op == CCL_MAX;
    using A = std::conditional_t<kOrdered, S, std::make_unsigned_t<S>>;
    using V = Vec<A>;
    static constexpr size_t kLanes = kVecBytes / sizeof(A);
    static constexpr size_t kInBytes = kLanes * sizeof(S);

    using Bits = Vec<uint64_t, kInBytes>;
    static V make(Bits b) { return (V)b; }
    static V op(V a, V b) { return apply<Op>(a, b); }
    static Bits bits(V v, int div) {
        if constexpr (Op == CCL_AVG) {
            // No vector integer division on x86; integer AVG is rare, so divide lane by lane.
            for (size_t i = 0; i < kLanes; ++i) {
                if constexpr (std::is_signed_v<S>) {
                    using W = std::conditional_t<sizeof(S) <= 4, int32_t, int64_t>;
                    v[i] = A(S(W(S(v[i])) / W(div)));
                } else {
                    using W = std::conditional_t<sizeof(S) <= 4, uint32_t, uint64_t>;
                    v[i] = A(W(v[i]) / W(div));
                }
            }
        }
        return (Bits)v;
    }
};

// float32 / float64: accumulate in the type itself; AVG divides (no reciprocal).
template <class S, ccl_reduction_t Op>
struct FloatKernel {
    using A = S;
    using V = Vec<A>;
    static constexpr size_t kLanes = kVecBytes / sizeof(A);
    static constexpr size_t kInBytes = kLanes * sizeof(S);

    using Bits = Vec<uint64_t, kInBytes>;
    static V make(Bits b) { return (V)b; }
    static V op(V a, V b) { return apply<Op>(a, b); }
    static Bits bits(V v, int div) {
        if constexpr (Op == CCL_AVG) v = v / A(div);
        return (Bits)v;
    }
};

using VF = Vec<float>;
using VU32 = Vec<uint32_t>;
constexpr size_t kHalfLanes = kVecBytes / 4;
using VH = Vec<uint16_t, kHalfLanes * 2>;  // kHalfLanes 16-bit values

// Round to nearest even, into the upper 16 bits; NaNs stay NaN (quiet bit set, so that a NaN
// whose payload is all in the lower half does not become infinity).
inline VU32 bf16_round(VF f) {
    VU32 u = (VU32)f;
    return (u & 0x7fffffffu) > 0x7f800000u ? (u | 0x00400000u) : u + 0x7fffu + ((u >> 16) & 1u);
}

inline VF fp16_to_float(VH h) {
#if CCL_VEC_BYTES == 64
    // The maskz forms: the plain ones trip GCC 12's -Wmaybe-uninitialized (_mm512_undefined).
    return (VF)_mm512_maskz_cvtph_ps(__mmask16(0xffff), (__m256i)h);
#elif CCL_VEC_BYTES == 32
    return (VF)_mm256_cvtph_ps((__m128i)h);
#else
    VF f;  // baseline x86-64 has no F16C: libgcc's conversion (exact)
    for (size_t i = 0; i < kHalfLanes; ++i) {
        uint16_t bits = h[i];
        _Float16 x;
        __builtin_memcpy(&x, &bits, 2);
        f[i] = float(x);
    }
    return f;
#endif
}

inline VH float_to_fp16(VF f) {
#if CCL_VEC_BYTES == 64
    return (VH)_mm512_maskz_cvtps_ph(__mmask16(0xffff), (__m512)f,
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
#elif CCL_VEC_BYTES == 32
    return (VH)_mm256_cvtps_ph((__m256)f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
#else
    VH h;  // libgcc's conversion, round to nearest even
    for (size_t i = 0; i < kHalfLanes; ++i) {
        _Float16 x = _Float16(f[i]);
        uint16_t bits;
        __builtin_memcpy(&bits, &x, 2);
        h[i] = bits;
    }
    return h;
#endif
}

// float16 and bfloat16: every input widened to float, the op (and AVG's divide) in float, one
// rounding on store.
template <ccl_reduction_t Op>
struct Fp16Kernel {
    using V = VF;
    static constexpr size_t kLanes = kHalfLanes;
    static constexpr size_t kInBytes = kLanes * 2;

    using Bits = Vec<uint64_t, kInBytes>;
    static V make(Bits b) { return fp16_to_float((VH)b); }
    static V op(V a, V b) { return apply<Op>(a, b); }
    static Bits bits(V v, int div) {
        if constexpr (Op == CCL_AVG) v = v / float(div);
        return (Bits)float_to_fp16(v);
    }
};

// bfloat16 is the upper half of a float, so a full vector of bf16 is two float vectors without
// any shuffle: the odd elements masked in place, the even ones shifted up. Lanes stay independent.
struct Bf16Pair {
    VF even, odd;
};

template <ccl_reduction_t Op>
struct Bf16Kernel {
    using V = Bf16Pair;
    static constexpr size_t kLanes = kVecBytes / 2;
    static constexpr size_t kInBytes = kVecBytes;

    using Bits = Vec<uint64_t, kInBytes>;
    static V make(Bits b) {
        VU32 x = (VU32)b;
        return {(VF)(x << 16), (VF)(x & 0xffff0000u)};
    }
    static V op(V a, V b) { return {apply<Op>(a.even, b.even), apply<Op>(a.odd, b.odd)}; }
    static Bits bits(V v, int div) {
        if constexpr (Op == CCL_AVG) {
            v.even = v.even / float(div);
            v.odd = v.odd / float(div);
        }
        return (Bits)((bf16_round(v.even) >> 16) | (bf16_round(v.odd) & 0xffff0000u));
    }
};

// Every kernel K sees a vector's input as Bits, its kInBytes raw bytes: K::make converts them to
// the vector it computes on, K::bits converts a result back (with AVG's divide). Loads and stores
// are the same for all of them (always inline, as the tails below say why).
template <class K>
[[gnu::always_inline]] inline typename K::V load(const unsigned char* p) {
    typename K::Bits b;
    __builtin_memcpy(&b, p, sizeof b);
    return K::make(b);
}
template <class K>
[[gnu::always_inline]] inline void store(unsigned char* p, typename K::V v, int div) {
    const typename K::Bits b = K::bits(v, div);
    __builtin_memcpy(p, &b, sizeof b);
}

// One sweep over nvec vectors: v = (acc or src[0]) op src[..] ... (N sources in all), then into
// acc or out. Each vector reads all its inputs before it is written, so out may be a source.
template <class K, int N, bool kFromAcc, bool kToOut>
inline void pass(typename K::V* acc, const unsigned char* const* src, size_t off,
                 unsigned char* out, size_t nvec, int div) {
    static_assert(N >= 1 && N <= kMaxFused);
    constexpr size_t step = K::kInBytes;
    constexpr int k0 = kFromAcc ? 0 : 1;
    auto at = [&](int k) { return k < N ? src[k] + off : nullptr; };
    const unsigned char* const p[kMaxFused] = {at(0), at(1), at(2), at(3),
                                               at(4), at(5), at(6), at(7)};
    for (size_t j = 0; j < nvec; ++j) {
        const size_t o = j * step;
        typename K::V v;
        if constexpr (kFromAcc) {
            v = acc[j];
        } else {
            v = load<K>(p[0] + o);
        }
        // Unrolled by hand: GCC -O2 does not always peel a constant-trip loop.
        if constexpr (k0 + 0 < N) v = K::op(v, load<K>(p[k0 + 0] + o));
        if constexpr (k0 + 1 < N) v = K::op(v, load<K>(p[k0 + 1] + o));
        if constexpr (k0 + 2 < N) v = K::op(v, load<K>(p[k0 + 2] + o));
        if constexpr (k0 + 3 < N) v = K::op(v, load<K>(p[k0 + 3] + o));
        if constexpr (k0 + 4 < N) v = K::op(v, load<K>(p[k0 + 4] + o));
        if constexpr (k0 + 5 < N) v = K::op(v, load<K>(p[k0 + 5] + o));
        if constexpr (k0 + 6 < N) v = K::op(v, load<K>(p[k0 + 6] + o));
        if constexpr (k0 + 7 < N) v = K::op(v, load<K>(p[k0 + 7] + o));
        if constexpr (kToOut) {
            store<K>(out + o, v, div);
        } else {
            acc[j] = v;
        }
    }
}

template <class K, bool kFromAcc>
inline void pass_to_out(int n, typename K::V* acc, const unsigned char* const* src, size_t off,
                        unsigned char* out, size_t nvec, int div) {
    switch (n) {
        case 1: pass<K, 1, kFromAcc, true>(acc, src, off, out, nvec, div); break;
        case 2: pass<K, 2, kFromAcc, true>(acc, src, off, out, nvec, div); break;
        case 3: pass<K, 3, kFromAcc, true>(acc, src, off, out, nvec, div); break;
        case 4: pass<K, 4, kFromAcc, true>(acc, src, off, out, nvec, div); break;
        case 5: pass<K, 5, kFromAcc, true>(acc, src, off, out, nvec, div); break;
        case 6: pass<K, 6, kFromAcc, true>(acc, src, off, out, nvec, div); break;
        case 7: pass<K, 7, kFromAcc, true>(acc, src, off, out, nvec, div); break;
        default: pass<K, 8, kFromAcc, true>(acc, src, off, out, nvec, div); break;
    }
}

// Tails: the last count % lanes elements, less than a vector of input, loaded zero-padded and
// stored without touching a byte past them. Assembled in registers, never staged through a
// buffer on the stack: the vector load would find its bytes in several smaller stores, which
// the cpu cannot forward, and would wait until they reach the cache, with every older store,
// some of which wait for a cache line a peer holds (the flags a rank just published). On the
// path of every small reduction that cost a cross-core miss (2 ranks, reduce of 8 B). Always
// inline: a vector argument or result of a call that is not inlined left the upper halves of
// the registers dirty on return, without vzeroupper, which slows every later SSE instruction on
// Intel cpus.
#if CCL_VEC_BYTES == 64

// AVX-512BW: one byte-masked load or store (masked-off bytes are not touched and cannot fault).
// Word by word, 16 sources of 8 B took three times as long as 16 of 64 B.
[[gnu::always_inline]] inline uint64_t tail_mask(size_t bytes) {
    return (uint64_t(1) << bytes) - 1;
}

template <class Bits>
[[gnu::always_inline]] inline Bits tail_load(const unsigned char* p, size_t bytes) {
    if constexpr (sizeof(Bits) == 64) {
        return (Bits)_mm512_maskz_loadu_epi8(__mmask64(tail_mask(bytes)), p);
    } else {
        static_assert(sizeof(Bits) == 32);
        return (Bits)_mm256_maskz_loadu_epi8(__mmask32(tail_mask(bytes)), p);
    }
}

template <class Bits>
[[gnu::always_inline]] inline void tail_store(unsigned char* p, size_t bytes, Bits b) {
    if constexpr (sizeof(Bits) == 64) {
        _mm512_mask_storeu_epi8(p, __mmask64(tail_mask(bytes)), (__m512i)b);
    } else {
        static_assert(sizeof(Bits) == 32);
        _mm256_mask_storeu_epi8(p, __mmask32(tail_mask(bytes)), (__m256i)b);
    }
}

#elif CCL_VEC_BYTES == 32

// AVX2: the whole 4-byte words with one dword-masked load or store (a lane takes part where its
// mask's sign bit is set: a vector comparison's all-ones); the 1-3 bytes after them (8- and
// 16-bit types only) by hand, in the next lane.
template <class Bits>
using Dwords = Vec<int32_t, sizeof(Bits)>;

template <class Bits>
[[gnu::always_inline]] inline Dwords<Bits> lane_index() {
    Dwords<Bits> lane;
    for (int i = 0; i < int(sizeof(Bits) / 4); ++i) lane[i] = i;
    return lane;
}

template <class Bits>
[[gnu::always_inline]] inline Dwords<Bits> masked_load(const unsigned char* p, Dwords<Bits> m) {
    auto* w = reinterpret_cast<const int*>(p);
    if constexpr (sizeof(Bits) == 32) {
        return (Dwords<Bits>)_mm256_maskload_epi32(w, (__m256i)m);
    } else {
        static_assert(sizeof(Bits) == 16);
        return (Dwords<Bits>)_mm_maskload_epi32(w, (__m128i)m);
    }
}

template <class Bits>
[[gnu::always_inline]] inline void masked_store(unsigned char* p, Dwords<Bits> m, Bits b) {
    auto* w = reinterpret_cast<int*>(p);
    if constexpr (sizeof(Bits) == 32) {
        _mm256_maskstore_epi32(w, (__m256i)m, (__m256i)b);
    } else {
        static_assert(sizeof(Bits) == 16);
        _mm_maskstore_epi32(w, (__m128i)m, (__m128i)b);
    }
}

template <class Bits>
[[gnu::always_inline]] inline Bits tail_load(const unsigned char* p, size_t bytes) {
    const int words = int(bytes / 4);
    const Dwords<Bits> lane = lane_index<Bits>();
    Dwords<Bits> v = masked_load<Bits>(p, lane < words);
    if (bytes % 4) {
        uint32_t x = p[words * 4];
        if (bytes % 4 >= 2) x |= uint32_t(p[words * 4 + 1]) << 8;
        if (bytes % 4 == 3) x |= uint32_t(p[words * 4 + 2]) << 16;
        v = lane == words ? Dwords<Bits>{} + int32_t(x) : v;
    }
    return (Bits)v;
}

template <class Bits>
[[gnu::always_inline]] inline void tail_store(unsigned char* p, size_t bytes, Bits b) {
    const int words = int(bytes / 4);
    masked_store<Bits>(p, lane_index<Bits>() < words, b);
    if (bytes % 4) {
        const uint32_t x = uint32_t(((Dwords<Bits>)b)[words]);
        p[words * 4] = (unsigned char)x;
        if (bytes % 4 >= 2) p[words * 4 + 1] = (unsigned char)(x >> 8);
        if (bytes % 4 == 3) p[words * 4 + 2] = (unsigned char)(x >> 16);
    }
}

#else

// Baseline x86-64 has no masked loads: word by word, the last partial word byte by byte.
[[gnu::always_inline]] inline uint64_t tail_word(const unsigned char* p, size_t bytes, size_t w) {
    if (w * 8 >= bytes) return 0;
    uint64_t x = 0;
    if (bytes - w * 8 >= 8) {
        __builtin_memcpy(&x, p + w * 8, 8);
    } else {
        for (size_t j = 0; j < bytes - w * 8; ++j) x |= uint64_t(p[w * 8 + j]) << (8 * j);
    }
    return x;
}

[[gnu::always_inline]] inline void store_tail_word(unsigned char* p, size_t bytes, size_t w,
                                                   uint64_t x) {
    if (w * 8 >= bytes) return;
    if (bytes - w * 8 >= 8) {
        __builtin_memcpy(p + w * 8, &x, 8);
    } else {
        for (size_t j = 0; j < bytes - w * 8; ++j) p[w * 8 + j] = (unsigned char)(x >> (8 * j));
    }
}

template <class Bits, size_t... W>
[[gnu::always_inline]] inline Bits tail_load(const unsigned char* p, size_t bytes,
                                             std::index_sequence<W...>) {
    return Bits{tail_word(p, bytes, W)...};
}

template <class Bits>
[[gnu::always_inline]] inline Bits tail_load(const unsigned char* p, size_t bytes) {
    return tail_load<Bits>(p, bytes, std::make_index_sequence<sizeof(Bits) / 8>{});
}

template <class Bits, size_t... W>
[[gnu::always_inline]] inline void tail_store(unsigned char* p, size_t bytes, Bits b,
                                              std::index_sequence<W...>) {
    (store_tail_word(p, bytes, W, b[W]), ...);
}

template <class Bits>
[[gnu::always_inline]] inline void tail_store(unsigned char* p, size_t bytes, Bits b) {
    tail_store(p, bytes, b, std::make_index_sequence<sizeof(Bits) / 8>{});
}

#endif

template <class K>
void run(unsigned char* out, const unsigned char* const* src, int nsrc, size_t count, int div) {
    using V = typename K::V;
    constexpr size_t step = K::kInBytes;
    const size_t nvec = count / K::kLanes;
    if (nvec > 0) {
        if (nsrc <= kMaxFused) {
            // One fused sweep, no accumulator: every source streams once, in parallel.
            pass_to_out<K, false>(nsrc, nullptr, src, 0, out, nvec, div);
        } else {
            // Block by block: the accumulator stays in L1 while every source streams once.
            constexpr size_t kBlockVecs = kAccBytes / sizeof(V);
            V acc[kBlockVecs];
            for (size_t b = 0; b < nvec; b += kBlockVecs) {
                const size_t n = nvec - b < kBlockVecs ? nvec - b : kBlockVecs;
                const size_t off = b * step;
                pass<K, kMaxFused, false, false>(acc, src, off, nullptr, n, div);
                int s = kMaxFused;
                for (; nsrc - s > kMaxFused; s += kMaxFused)
                    pass<K, kMaxFused, true, false>(acc, src + s, off, nullptr, n, div);
                pass_to_out<K, true>(nsrc - s, acc, src + s, off, out + off, n, div);
            }
        }
    }
    // The last count % lanes elements: through a zero-padded vector, so they get exactly the
    // same arithmetic as the rest.
    const size_t rem = count - nvec * K::kLanes;
    if (rem > 0) {
        const size_t off = nvec * step;
        const size_t bytes = rem * (step / K::kLanes);
        using Bits = typename K::Bits;
        V v = K::make(tail_load<Bits>(src[0] + off, bytes));
        for (int s = 1; s < nsrc; ++s) v = K::op(v, K::make(tail_load<Bits>(src[s] + off, bytes)));
        tail_store(out + off, bytes, K::bits(v, div));
    }
}

template <ccl_reduction_t Op>
void run_op(unsigned char* out, const unsigned char* const* src, int nsrc, size_t count,
            ccl_datatype_t dtype, int div) {
    switch (dtype) {
        case CCL_INT8: run<IntKernel<int8_t, Op>>(out, src, nsrc, count, div); break;
        case CCL_UINT8: run<IntKernel<uint8_t, Op>>(out, src, nsrc, count, div); break;
        case CCL_INT16: run<IntKernel<int16_t, Op>>(out, src, nsrc, count, div); break;
        case CCL_UINT16: run<IntKernel<uint16_t, Op>>(out, src, nsrc, count, div); break;
        case CCL_INT32: run<IntKernel<int32_t, Op>>(out, src, nsrc, count, div); break;
        case CCL_UINT32: run<IntKernel<uint32_t, Op>>(out, src, nsrc, count, div); break;
        case CCL_INT64: run<IntKernel<int64_t, Op>>(out, src, nsrc, count, div); break;
        case CCL_UINT64: run<IntKernel<uint64_t, Op>>(out, src, nsrc, count, div); break;
        case CCL_FLOAT16: run<Fp16Kernel<Op>>(out, src, nsrc, count, div); break;
        case CCL_BFLOAT16: run<Bf16Kernel<Op>>(out, src, nsrc, count, div); break;
        case CCL_FLOAT32: run<FloatKernel<float, Op>>(out, src, nsrc, count, div); break;
        case CCL_FLOAT64: run<FloatKernel<double, Op>>(out, src, nsrc, count, div); break;
    }
}

}  // namespace

// Arguments are validated by ccl::reduce(); this only computes.
void reduce(void* out, const void* const* srcs, int nsrc, size_t count, ccl_datatype_t dtype,
            ccl_reduction_t op, int avg_divisor) {
    auto* o = static_cast<unsigned char*>(out);
    auto* s = reinterpret_cast<const unsigned char* const*>(srcs);
    switch (op) {
        case CCL_SUM: run_op<CCL_SUM>(o, s, nsrc, count, dtype, avg_divisor); break;
        case CCL_PROD: run_op<CCL_PROD>(o, s, nsrc, count, dtype, avg_divisor); break;
        case CCL_MIN: run_op<CCL_MIN>(o, s, nsrc, count, dtype, avg_divisor); break;
        case CCL_MAX: run_op<CCL_MAX>(o, s, nsrc, count, dtype, avg_divisor); break;
        case CCL_AVG: run_op<CCL_AVG>(o, s, nsrc, count, dtype, avg_divisor); break;
    }
}

}  // namespace ccl::CCL_KERNELS_NS

#endif  // CCL_KERNELS_NS
