// The reduction kernels against a reference written here, independently of the library: every
// instruction set this CPU has x every datatype x every reduction, many source counts and element
// counts, in-place and out-of-place, unaligned buffers; plus hand-picked edge cases.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/reduce.h"

namespace {

using ccl::Isa;

const ccl_datatype_t kAllTypes[] = {CCL_INT8,    CCL_UINT8,    CCL_INT16,   CCL_UINT16,
                                    CCL_INT32,   CCL_UINT32,   CCL_INT64,   CCL_UINT64,
                                    CCL_FLOAT16, CCL_BFLOAT16, CCL_FLOAT32, CCL_FLOAT64};
const ccl_reduction_t kAllOps[] = {CCL_SUM, CCL_PROD, CCL_MIN, CCL_MAX, CCL_AVG};

// Independent of the library's own detection (which also requires the same feature set).
Isa best_isa_of_cpu() {
    __builtin_cpu_init();
    bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                __builtin_cpu_supports("f16c");
    bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                  __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    return avx512 ? Isa::avx512 : avx2 ? Isa::avx2 : Isa::scalar;
}

std::vector<Isa> supported_isas() {
    std::vector<Isa> v{Isa::scalar};
    Isa best = best_isa_of_cpu();
    if (best == Isa::avx2 || best == Isa::avx512) v.push_back(Isa::avx2);
    if (best == Isa::avx512) v.push_back(Isa::avx512);
    return v;
}

size_t size_of(ccl_datatype_t t) {
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

bool is_signed_int(ccl_datatype_t t) {
    return t == CCL_INT8 || t == CCL_INT16 || t == CCL_INT32 || t == CCL_INT64;
}
bool is_int(ccl_datatype_t t) { return t <= CCL_UINT64; }

// ---- 16-bit float conversions, written from the format definitions (not bit tricks) ----------

float half_to_float(uint16_t h) {
    int e = (h >> 10) & 31, m = h & 1023;
    float s = (h & 0x8000) ? -1.0f : 1.0f;
    if (e == 31) return m ? std::numeric_limits<float>::quiet_NaN() : s * INFINITY;
    if (e == 0) return s * std::ldexp(float(m), -24);
    return s * std::ldexp(float(1024 + m), e - 25);
}

float bf16_to_float(uint16_t b) {
    int e = (b >> 7) & 255, m = b & 127;
    float s = (b & 0x8000) ? -1.0f : 1.0f;
    if (e == 255) return m ? std::numeric_limits<float>::quiet_NaN() : s * INFINITY;
    if (e == 0) return s * float(std::ldexp(double(m), -133));
    return s * float(std::ldexp(double(128 + m), e - 134));
}

// Round |f| to a format with `mant` stored mantissa bits, exponent bias `bias`, max exponent
// `emax`, all in double (exact here): nearbyint rounds half to even.
uint16_t round_to_16(float f, int mant, int bias, int emax, uint16_t inf, uint16_t nan) {
    if (std::isnan(f)) return nan;
    uint16_t sign = std::signbit(f) ? 0x8000 : 0;
    double m = std::fabs(double(f));
    if (std::isinf(m)) return sign | inf;
    int emin = 1 - bias;
    if (m < std::ldexp(1.0, emin)) {  // subnormal (or rounds up to the smallest normal)
        double q = std::nearbyint(std::ldexp(m, mant - emin));
        return sign | uint16_t(q);
    }
    int e2;
    std::frexp(m, &e2);
    int e = e2 - 1;  // m in [2^e, 2^(e+1))
    double q = std::nearbyint(std::ldexp(m, mant - e));
    if (q == std::ldexp(1.0, mant + 1)) {
        q /= 2;
        ++e;
    }
    if (e > emax) return sign | inf;
    return sign | uint16_t((e + bias) << mant) | uint16_t(q - std::ldexp(1.0, mant));
}
uint16_t float_to_half(float f) { return round_to_16(f, 10, 15, 15, 0x7c00, 0x7e00); }
uint16_t float_to_bf16(float f) { return round_to_16(f, 7, 127, 127, 0x7f80, 0x7fc0); }

bool half_is_nan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff); }
bool bf16_is_nan(uint16_t b) { return (b & 0x7f80) == 0x7f80 && (b & 0x7f); }

// ---- the reference --------------------------------------------------------------------------

uint64_t load_u(const unsigned char* p, size_t sz) {
    uint64_t v = 0;
    std::memcpy(&v, p, sz);  // little endian
    return v;
}
int64_t sign_extend(uint64_t v, size_t sz) {
    if (sz == 8) return int64_t(v);
    int sh = int(64 - 8 * sz);
    return int64_t(v << sh) >> sh;
}

template <class F>
F ref_float_op(ccl_reduction_t op, F a, F b) {
    switch (op) {
        case CCL_SUM:
        case CCL_AVG: return a + b;
        case CCL_PROD: return a * b;
        case CCL_MIN: return b < a ? b : a;
        default: return a < b ? b : a;
    }
}

// out[i] into `ref` (count * size bytes) from the sources, element by element.
void reference(std::vector<unsigned char>& ref, const std::vector<const unsigned char*>& srcs,
               size_t count, ccl_datatype_t t, ccl_reduction_t op, int div) {
    const size_t sz = size_of(t);
    ref.assign(count * sz, 0);
    for (size_t i = 0; i < count; ++i) {
        unsigned char* o = &ref[i * sz];
        if (is_int(t)) {
            // Exact arithmetic modulo 2^64, then truncated: the same as modulo 2^bits.
            const uint64_t mask = sz == 8 ? ~0ull : (1ull << (8 * sz)) - 1;
            uint64_t acc = load_u(srcs[0] + i * sz, sz);
            for (size_t s = 1; s < srcs.size(); ++s) {
                uint64_t x = load_u(srcs[s] + i * sz, sz);
                bool less = is_signed_int(t) ? sign_extend(x, sz) < sign_extend(acc, sz) : x < acc;
                switch (op) {
                    case CCL_SUM:
                    case CCL_AVG: acc = (acc + x) & mask; break;
                    case CCL_PROD: acc = (acc * x) & mask; break;
                    case CCL_MIN: acc = less ? x : acc; break;
                    case CCL_MAX: acc = (!less && x != acc) ? x : acc; break;
                }
            }
            if (op == CCL_AVG) {
                if (is_signed_int(t)) {
                    acc = uint64_t(sign_extend(acc, sz) / int64_t(div)) & mask;  // C: toward 0
                } else {
                    acc = acc / uint64_t(div);
                }
            }
            std::memcpy(o, &acc, sz);
        } else if (t == CCL_FLOAT16 || t == CCL_BFLOAT16) {
            auto dec = [&](const unsigned char* p) {
                uint16_t b = uint16_t(load_u(p, 2));
                return t == CCL_FLOAT16 ? half_to_float(b) : bf16_to_float(b);
            };
            float acc = dec(srcs[0] + i * sz);
            for (size_t s = 1; s < srcs.size(); ++s)
                acc = ref_float_op(op, acc, dec(srcs[s] + i * sz));
            if (op == CCL_AVG) acc = acc / float(div);
            uint16_t r = t == CCL_FLOAT16 ? float_to_half(acc) : float_to_bf16(acc);
            std::memcpy(o, &r, 2);
        } else if (t == CCL_FLOAT32) {
            float acc, x;
            std::memcpy(&acc, srcs[0] + i * sz, sz);
            for (size_t s = 1; s < srcs.size(); ++s) {
                std::memcpy(&x, srcs[s] + i * sz, sz);
                acc = ref_float_op(op, acc, x);
            }
            if (op == CCL_AVG) acc = acc / float(div);
            std::memcpy(o, &acc, sz);
        } else {
            double acc, x;
            std::memcpy(&acc, srcs[0] + i * sz, sz);
            for (size_t s = 1; s < srcs.size(); ++s) {
                std::memcpy(&x, srcs[s] + i * sz, sz);
                acc = ref_float_op(op, acc, x);
            }
            if (op == CCL_AVG) acc = acc / double(div);
            std::memcpy(o, &acc, sz);
        }
    }
}

// Whether element `i` of `got` matches the reference: bit for bit, except that any NaN matches
// any NaN and MIN/MAX of floats compare by value (+0 and -0 may come out either way).
bool element_ok(const unsigned char* got, const unsigned char* want, ccl_datatype_t t,
                ccl_reduction_t op) {
    const size_t sz = size_of(t);
    if (std::memcmp(got, want, sz) == 0) return true;
    bool minmax = op == CCL_MIN || op == CCL_MAX;
    switch (t) {
        case CCL_FLOAT16:
        case CCL_BFLOAT16: {
            uint16_t g = uint16_t(load_u(got, 2)), w = uint16_t(load_u(want, 2));
            bool (*is_nan)(uint16_t) = t == CCL_FLOAT16 ? half_is_nan : bf16_is_nan;
            float (*dec)(uint16_t) = t == CCL_FLOAT16 ? half_to_float : bf16_to_float;
            if (is_nan(g) && is_nan(w)) return true;
            return minmax && dec(g) == dec(w);
        }
        case CCL_FLOAT32: {
            float g, w;
            std::memcpy(&g, got, 4);
            std::memcpy(&w, want, 4);
            return (std::isnan(g) && std::isnan(w)) || (minmax && g == w);
        }
        case CCL_FLOAT64: {
            double g, w;
            std::memcpy(&g, got, 8);
            std::memcpy(&w, want, 8);
            return (std::isnan(g) && std::isnan(w)) || (minmax && g == w);
        }
        default: return false;
    }
}

// Random element bits, in ranges that keep the arithmetic interesting (rounding happens, sums do
// not all overflow, products of 16 values stay mostly finite).
void fill_random(unsigned char* p, size_t count, ccl_datatype_t t, ccl_reduction_t op,
                 std::mt19937_64& rng) {
    const size_t sz = size_of(t);
    std::uniform_real_distribution<double> wide(-1000.0, 1000.0), near1(0.5, 2.0);
    bool prod = op == CCL_PROD;
    for (size_t i = 0; i < count; ++i) {
        uint64_t r = rng();
        unsigned char* o = p + i * sz;
        switch (t) {
            case CCL_FLOAT16: {
                // Random sign and mantissa; exponents 0 (subnormal) .. 24 (2^9), or near 1 for
                // PROD.
                uint16_t e = prod ? uint16_t(14 + r % 3) : uint16_t(r % 25);
                uint16_t h = uint16_t(((r >> 8) & 0x8000) | (e << 10) | ((r >> 20) & 0x3ff));
                std::memcpy(o, &h, 2);
                break;
            }
            case CCL_BFLOAT16: {
                uint16_t e =
                    prod ? uint16_t(126 + r % 3) : uint16_t(r % 16 == 0 ? 0 : 100 + r % 50);
                uint16_t b = uint16_t(((r >> 8) & 0x8000) | (e << 7) | ((r >> 20) & 0x7f));
                std::memcpy(o, &b, 2);
                break;
            }
            case CCL_FLOAT32: {
                float f = float(prod ? near1(rng) : wide(rng));
                std::memcpy(o, &f, 4);
                break;
            }
            case CCL_FLOAT64: {
                double d = prod ? near1(rng) : wide(rng);
                std::memcpy(o, &d, 8);
                break;
            }
            default: std::memcpy(o, &r, sz); break;  // integers: any bits, so sums wrap
        }
    }
}

std::string describe(Isa isa, ccl_datatype_t t, ccl_reduction_t op, int nsrc, size_t count,
                     int alias) {
    return std::string(ccl::isa_name(isa)) + " " + ccl::dtype_name(t) + " " + ccl::op_name(op) +
           " nsrc=" + std::to_string(nsrc) + " count=" + std::to_string(count) +
           " alias=" + std::to_string(alias);
}

constexpr size_t kGuard = 16;
constexpr unsigned char kGuardByte = 0xa5;

// One case: fills sources, computes the reference, runs reduce_with and checks every element and
// that nothing around the output moved. alias: 0 separate out, 1 out == srcs[0], 2 out == last.
void check_case(Isa isa, ccl_datatype_t t, ccl_reduction_t op, int nsrc, size_t count, int alias,
                size_t misalign, std::mt19937_64& rng) {
    const size_t sz = size_of(t);
    const size_t bytes = count * sz;
    std::vector<std::vector<unsigned char>> bufs(nsrc + 1);
    std::vector<const unsigned char*> srcs(nsrc);
    std::vector<unsigned char*> base(nsrc + 1);
    for (int b = 0; b <= nsrc; ++b) {
        size_t off = kGuard + (misalign + 5 * b) % 64;  // unaligned, differently per buffer
        bufs[b].assign(off + bytes + kGuard, kGuardByte);
        base[b] = bufs[b].data() + off;
    }
    for (int s = 0; s < nsrc; ++s) {
        fill_random(base[s], count, t, op, rng);
        srcs[s] = base[s];
    }
    std::vector<unsigned char> ref;
    const int div = nsrc + int(rng() % 3);
    reference(ref, srcs, count, t, op, div);

    int out_buf = alias == 0 ? nsrc : alias == 1 ? 0 : nsrc - 1;
    unsigned char* out = base[out_buf];
    std::vector<const void*> vsrcs(srcs.begin(), srcs.end());
    ccl::reduce_with(isa, out, vsrcs.data(), nsrc, count, t, op, div);

    const std::string what = describe(isa, t, op, nsrc, count, alias);
    for (size_t i = 0; i < count; ++i) {
        if (!element_ok(out + i * sz, &ref[i * sz], t, op)) {
            uint64_t g = load_u(out + i * sz, sz), w = load_u(&ref[i * sz], sz);
            FAIL() << what << ": element " << i << " is 0x" << std::hex << g << ", want 0x" << w;
        }
    }
    const std::vector<unsigned char>& ob = bufs[out_buf];
    size_t off = size_t(out - ob.data());
    for (size_t k = 0; k < off; ++k) ASSERT_EQ(ob[k], kGuardByte) << what << ": wrote before out";
    for (size_t k = off + bytes; k < ob.size(); ++k)
        ASSERT_EQ(ob[k], kGuardByte) << what << ": wrote past out";
}

class ReduceMatrix : public ::testing::TestWithParam<ccl_datatype_t> {};

TEST_P(ReduceMatrix, MatchesReference) {
    const ccl_datatype_t t = GetParam();
    const int kNsrc[] = {1, 2, 3, 4, 7, 8, 16};
    const size_t kCounts[] = {0, 1, 2, 3, 7, 15, 16, 17, 31, 33, 63, 64, 65, 127, 1000, 4097};
    std::mt19937_64 rng(1234 + t);
    size_t n = 0;
    for (Isa isa : supported_isas()) {
        for (ccl_reduction_t op : kAllOps) {
            for (int nsrc : kNsrc) {
                for (size_t count : kCounts) {
                    // Every aliasing for the small counts; one, in rotation, for the big ones.
                    for (int alias = 0; alias < 3; ++alias) {
                        if (count >= 1000 && alias != int(n % 3)) continue;
                        check_case(isa, t, op, nsrc, count, alias, n++ % 61, rng);
                        if (HasFatalFailure() || HasFailure()) return;
                    }
                }
            }
        }
    }
}

// Larger source counts: the accumulator path with several middle sweeps.
TEST_P(ReduceMatrix, ManySources) {
    const ccl_datatype_t t = GetParam();
    std::mt19937_64 rng(99 + t);
    size_t n = 0;
    for (Isa isa : supported_isas()) {
        for (ccl_reduction_t op : kAllOps) {
            for (int nsrc : {5, 9, 13, 33, 64}) {
                check_case(isa, t, op, nsrc, 1500 + nsrc, int(n % 3), n % 61, rng);
                ++n;
                if (HasFatalFailure() || HasFailure()) return;
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(ReduceAllTypes, ReduceMatrix, ::testing::ValuesIn(kAllTypes),
                         [](const ::testing::TestParamInfo<ccl_datatype_t>& info) {
                             return std::string(ccl::dtype_name(info.param));
                         });

// ---- hand-picked cases --------------------------------------------------------------------

// Reduces `per_src` (one value per source, as raw bits) over 37 elements (vector body and tail)
// with every ISA and checks every element equals `want`.
template <class T>
void expect_all(ccl_datatype_t t, ccl_reduction_t op, std::vector<T> per_src, T want, int div = 1) {
    const size_t count = 37;
    for (Isa isa : supported_isas()) {
        std::vector<std::vector<T>> bufs;
        for (T v : per_src) bufs.emplace_back(count, v);
        std::vector<const void*> srcs;
        for (auto& b : bufs) srcs.push_back(b.data());
        std::vector<T> out(count, T(0));
        ccl::reduce_with(isa, out.data(), srcs.data(), int(srcs.size()), count, t, op, div);
        for (size_t i = 0; i < count; ++i) {
            ASSERT_EQ(out[i], want) << ccl::isa_name(isa) << " " << ccl::dtype_name(t) << " "
                                    << ccl::op_name(op) << " element " << i;
        }
    }
}

TEST(ReduceEdge, Bfloat16RoundsOnceToNearestEven) {
    // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1.0).
    expect_all<uint16_t>(CCL_BFLOAT16, CCL_SUM, {0x3f80, 0x3b80}, 0x3f80);
    // (1 + 2^-7) + 2^-8 is halfway between 0x3f81 and 0x3f82: ties to even (0x3f82).
    expect_all<uint16_t>(CCL_BFLOAT16, CCL_SUM, {0x3f81, 0x3b80}, 0x3f82);
    // 1 + 2^-8 + 2^-16 is above the tie; rounding after each step would give 1.0.
    expect_all<uint16_t>(CCL_BFLOAT16, CCL_SUM, {0x3f80, 0x3b80, 0x3780}, 0x3f81);
    // AVG divides in float before the one rounding: (1 + 1 + 2^-7) / 2 = 1 + 2^-8 -> 1.0.
    expect_all<uint16_t>(CCL_BFLOAT16, CCL_AVG, {0x3f80, 0x3f80, 0x3c00}, 0x3f80, 2);
    // Overflow to infinity, and NaN stays NaN.
    expect_all<uint16_t>(CCL_BFLOAT16, CCL_SUM, {0x7f7f, 0x7f7f}, 0x7f80);
    expect_all<uint16_t>(CCL_BFLOAT16, CCL_SUM, {0x7f80, 0xff80}, uint16_t(0xffc0));
}

TEST(ReduceEdge, Bfloat16NanStaysNan) {
    for (Isa isa : supported_isas()) {
        std::vector<uint16_t> a(20, 0x7f81), b(20, 0x3f80), out(20);  // signalling-style NaN
        const void* srcs[] = {a.data(), b.data()};
        ccl::reduce_with(isa, out.data(), srcs, 2, a.size(), CCL_BFLOAT16, CCL_SUM, 1);
        for (uint16_t v : out) EXPECT_TRUE(bf16_is_nan(v)) << ccl::isa_name(isa) << std::hex << v;
        std::vector<uint16_t> inf(20, 0x7f80), minf(20, 0xff80);
        const void* srcs2[] = {inf.data(), minf.data()};
        ccl::reduce_with(isa, out.data(), srcs2, 2, a.size(), CCL_BFLOAT16, CCL_SUM, 1);
        for (uint16_t v : out) EXPECT_TRUE(bf16_is_nan(v)) << ccl::isa_name(isa) << std::hex << v;
    }
}

TEST(ReduceEdge, Float16RoundingOverflowSubnormals) {
    // 2048 + 1 is a tie between 2048 and 2050: even -> 2048. 2050 + 1 -> 2052.
    expect_all<uint16_t>(CCL_FLOAT16, CCL_SUM, {0x6800, 0x3c00}, 0x6800);
    expect_all<uint16_t>(CCL_FLOAT16, CCL_SUM, {0x6801, 0x3c00}, 0x6802);
    // 2048 + 1 + 1 = 2050 exactly in float; fp16 after each step would stay 2048.
    expect_all<uint16_t>(CCL_FLOAT16, CCL_SUM, {0x6800, 0x3c00, 0x3c00}, 0x6801);
    // 65504 + 65504 overflows; 65504 + 16 = 65520 is a tie with 65536: even -> inf;
    // 65504 + 8 rounds back to 65504.
    expect_all<uint16_t>(CCL_FLOAT16, CCL_SUM, {0x7bff, 0x7bff}, 0x7c00);
    expect_all<uint16_t>(CCL_FLOAT16, CCL_SUM, {0x7bff, 0x4c00}, 0x7c00);
    expect_all<uint16_t>(CCL_FLOAT16, CCL_SUM, {0x7bff, 0x4800}, 0x7bff);
    expect_all<uint16_t>(CCL_FLOAT16, CCL_PROD, {0x5c00, 0x5c00}, 0x7c00);  // 256^2
    expect_all<uint16_t>(CCL_FLOAT16, CCL_SUM, {0xfbff, 0xfbff}, uint16_t(0xfc00));
    // Subnormals: 2^-24 + 2^-24; 2^-14 - 1023 * 2^-24 = 2^-24; the smallest normal from two
    // subnormals.
    expect_all<uint16_t>(CCL_FLOAT16, CCL_SUM, {0x0001, 0x0001}, 0x0002);
    expect_all<uint16_t>(CCL_FLOAT16, CCL_SUM, {0x0400, 0x83ff}, 0x0001);
    expect_all<uint16_t>(CCL_FLOAT16, CCL_SUM, {0x0200, 0x0200}, 0x0400);
    // 2^-24 / 2 is a tie between 0 and 2^-24: even -> 0; 3 * 2^-24 / 2 -> 2 * 2^-24.
    expect_all<uint16_t>(CCL_FLOAT16, CCL_AVG, {0x0001, 0x0000}, 0x0000, 2);
    expect_all<uint16_t>(CCL_FLOAT16, CCL_AVG, {0x0001, 0x0001, 0x0001}, 0x0002, 2);
    expect_all<uint16_t>(CCL_FLOAT16, CCL_MIN, {0x3c00, 0xbc00, 0x4000}, uint16_t(0xbc00));
    expect_all<uint16_t>(CCL_FLOAT16, CCL_MAX, {0x3c00, 0xbc00, 0x4000}, 0x4000);
    for (Isa isa : supported_isas()) {
        std::vector<uint16_t> inf(19, 0x7c00), minf(19, 0xfc00), out(19);
        const void* srcs[] = {inf.data(), minf.data()};
        ccl::reduce_with(isa, out.data(), srcs, 2, out.size(), CCL_FLOAT16, CCL_SUM, 1);
        for (uint16_t v : out) EXPECT_TRUE(half_is_nan(v)) << ccl::isa_name(isa) << std::hex << v;
    }
}

TEST(ReduceEdge, FloatSubnormalsAndAvgDivides) {
    const float tiny = std::numeric_limits<float>::denorm_min();
    expect_all<float>(CCL_FLOAT32, CCL_SUM, {tiny, tiny}, 2 * tiny);
    expect_all<double>(CCL_FLOAT64, CCL_SUM, {5e-324, 5e-324}, 1e-323);
    // AVG divides: 0.1f * 3 / 3 computed as sum then divide.
    float a = 0.1f, b = 0.7f, c = 0.3f;
    volatile float sum = a + b + c;
    expect_all<float>(CCL_FLOAT32, CCL_AVG, {a, b, c}, float(sum / 3.0f), 3);
    expect_all<double>(CCL_FLOAT64, CCL_AVG, {1.0, 2.0, 4.0}, 7.0 / 3.0, 3);
}

TEST(ReduceEdge, IntegerWraparound) {
    expect_all<int8_t>(CCL_INT8, CCL_SUM, {127, 1}, -128);
    expect_all<uint8_t>(CCL_UINT8, CCL_SUM, {255, 1}, 0);
    expect_all<int8_t>(CCL_INT8, CCL_PROD, {16, 16}, 0);
    expect_all<int8_t>(CCL_INT8, CCL_PROD, {-128, -1}, -128);
    expect_all<int16_t>(CCL_INT16, CCL_SUM, {32767, 1}, -32768);
    expect_all<uint16_t>(CCL_UINT16, CCL_PROD, {65535, 65535}, 1);  // no int promotion overflow
    expect_all<int32_t>(CCL_INT32, CCL_SUM, {INT32_MAX, 1}, INT32_MIN);
    expect_all<int32_t>(CCL_INT32, CCL_PROD, {65536, 65536}, 0);
    expect_all<uint32_t>(CCL_UINT32, CCL_PROD, {0xffffffffu, 0xffffffffu}, 1u);
    expect_all<int64_t>(CCL_INT64, CCL_SUM, {INT64_MAX, 1}, INT64_MIN);
    expect_all<uint64_t>(CCL_UINT64, CCL_PROD, {1ull << 63, 2}, 0);
    expect_all<uint64_t>(CCL_UINT64, CCL_PROD, {(1ull << 32) + 1, (1ull << 32) - 1}, ~0ull);
    expect_all<uint64_t>(CCL_UINT64, CCL_PROD, {~0ull, ~0ull}, 1);
    expect_all<int64_t>(CCL_INT64, CCL_MIN, {-5, INT64_MIN, 7}, INT64_MIN);
    expect_all<uint64_t>(CCL_UINT64, CCL_MAX, {5, ~0ull, 7}, ~0ull);
    expect_all<int8_t>(CCL_INT8, CCL_MIN, {-1, 127, -128}, -128);
    expect_all<uint8_t>(CCL_UINT8, CCL_MIN, {255, 128, 1}, 1);
}

TEST(ReduceEdge, IntegerAvgTruncatesTowardZero) {
    expect_all<int32_t>(CCL_INT32, CCL_AVG, {-7, 0}, -3, 2);
    expect_all<int8_t>(CCL_INT8, CCL_AVG, {-5, -2}, -3, 2);
    expect_all<int8_t>(CCL_INT8, CCL_AVG, {100, 100}, -28, 2);    // wrapped sum -56, then / 2
    expect_all<int8_t>(CCL_INT8, CCL_AVG, {30, 30, 30}, 0, 200);  // divisor beyond int8
    expect_all<int8_t>(CCL_INT8, CCL_AVG, {-100, -100}, 28, 2);   // wrapped sum 56
    expect_all<uint8_t>(CCL_UINT8, CCL_AVG, {255, 255}, 127, 2);  // wrapped sum 254
    expect_all<int16_t>(CCL_INT16, CCL_AVG, {-32768, 0, 1}, -10922, 3);
    expect_all<int64_t>(CCL_INT64, CCL_AVG, {-9, 0, 0, 0}, -2, 4);
    expect_all<int64_t>(CCL_INT64, CCL_AVG, {INT64_MIN, 0}, INT64_MIN / 3, 3);
    expect_all<uint64_t>(CCL_UINT64, CCL_AVG, {~0ull, 1, 1}, 0, 3);  // wrapped sum 1
    expect_all<uint32_t>(CCL_UINT32, CCL_AVG, {0xffffffffu, 0}, 0x7fffffffu, 2);
}

TEST(ReduceIsa, IsTheBestThisCpuSupports) {
    EXPECT_EQ(ccl::reduce_isa(), best_isa_of_cpu());
    std::printf("reduce kernels: %s\n", ccl::isa_name(ccl::reduce_isa()));
    for (Isa isa : supported_isas()) {
        float a[3] = {1, 2, 3}, b[3] = {4, 5, 6}, out[3];
        const void* srcs[] = {a, b};
        EXPECT_NO_THROW(ccl::reduce_with(isa, out, srcs, 2, 3, CCL_FLOAT32, CCL_SUM, 1));
        EXPECT_EQ(out[2], 9.0f);
    }
}

TEST(ReduceApi, NamesAndSizes) {
    EXPECT_STREQ(ccl::dtype_name(CCL_INT8), "int8");
    EXPECT_STREQ(ccl::dtype_name(CCL_UINT64), "uint64");
    EXPECT_STREQ(ccl::dtype_name(CCL_FLOAT16), "float16");
    EXPECT_STREQ(ccl::dtype_name(CCL_BFLOAT16), "bfloat16");
    EXPECT_STREQ(ccl::dtype_name(CCL_FLOAT32), "float32");
    EXPECT_STREQ(ccl::dtype_name(CCL_FLOAT64), "float64");
    const char* ops[] = {"sum", "prod", "min", "max", "avg"};
    for (int i = 0; i < 5; ++i) EXPECT_STREQ(ccl::op_name(kAllOps[i]), ops[i]);
    EXPECT_STREQ(ccl::isa_name(Isa::scalar), "scalar");
    EXPECT_STREQ(ccl::isa_name(Isa::avx2), "avx2");
    EXPECT_STREQ(ccl::isa_name(Isa::avx512), "avx512");
    for (ccl_datatype_t t : kAllTypes) {
        EXPECT_TRUE(ccl::dtype_valid(t));
        EXPECT_EQ(ccl::dtype_size(t), size_of(t)) << ccl::dtype_name(t);
    }
    for (ccl_reduction_t op : kAllOps) EXPECT_TRUE(ccl::op_valid(op));
    EXPECT_FALSE(ccl::dtype_valid(ccl_datatype_t(12)));
    EXPECT_FALSE(ccl::dtype_valid(ccl_datatype_t(-1)));
    EXPECT_EQ(ccl::dtype_size(ccl_datatype_t(12)), 0u);
    EXPECT_FALSE(ccl::op_valid(ccl_reduction_t(5)));
    EXPECT_FALSE(ccl::op_valid(ccl_reduction_t(-1)));
}

ccl_result_t code_of(void (*f)()) {
    try {
        f();
    } catch (const ccl::Error& e) {
        return e.code();
    }
    return CCL_SUCCESS;
}

TEST(ReduceApi, RejectsBadArguments) {
    EXPECT_EQ(code_of([] {
                  int a[1] = {0}, o[1];
                  const void* s[] = {a};
                  ccl::reduce(o, s, 1, 1, ccl_datatype_t(42), CCL_SUM, 1);
              }),
              CCL_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(code_of([] {
                  int a[1] = {0}, o[1];
                  const void* s[] = {a};
                  ccl::reduce(o, s, 1, 1, CCL_INT32, ccl_reduction_t(9), 1);
              }),
              CCL_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(code_of([] {
                  int a[1] = {0}, o[1];
                  const void* s[] = {a};
                  ccl::reduce(o, s, 0, 1, CCL_INT32, CCL_SUM, 1);
              }),
              CCL_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(code_of([] {
                  int a[1] = {0}, o[1];
                  const void* s[] = {a, nullptr};
                  ccl::reduce(o, s, 2, 1, CCL_INT32, CCL_SUM, 1);
              }),
              CCL_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(code_of([] {
                  int a[1] = {0}, o[1];
                  const void* s[] = {a};
                  ccl::reduce(o, s, 1, 1, CCL_INT32, CCL_AVG, 0);
              }),
              CCL_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(code_of([] {
                  int a[1] = {0}, o[1];
                  const void* s[] = {a};
                  ccl::reduce_with(Isa(7), o, s, 1, 1, CCL_INT32, CCL_SUM, 1);
              }),
              CCL_ERROR_INVALID_ARGUMENT);
    // count 0 touches nothing, not even the source list.
    EXPECT_EQ(code_of([] { ccl::reduce(nullptr, nullptr, 3, 0, CCL_FLOAT32, CCL_SUM, 1); }),
              CCL_SUCCESS);
}

}  // namespace
