// Inputs and reference checks; see data.h.
#include "data.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <vector>

namespace bench {

namespace {

// bfloat16 as its bits: the upper half of a float32.
struct Bf16 {
    uint16_t bits;
    bool operator==(const Bf16&) const = default;
};

// Runs f(T{}) with T the C++ type of datatype t.
template <class F>
auto with_type(ccl_datatype_t t, F&& f) {
    switch (t) {
        case CCL_INT8: return f(int8_t{});
        case CCL_UINT8: return f(uint8_t{});
        case CCL_INT16: return f(int16_t{});
        case CCL_UINT16: return f(uint16_t{});
        case CCL_INT32: return f(int32_t{});
        case CCL_UINT32: return f(uint32_t{});
        case CCL_INT64: return f(int64_t{});
        case CCL_UINT64: return f(uint64_t{});
        case CCL_FLOAT16: return f(_Float16{});
        case CCL_BFLOAT16: return f(Bf16{});
        case CCL_FLOAT32: return f(float{});
        case CCL_FLOAT64: return f(double{});
    }
    std::abort();
}

// v as a T: integers wrap as two's complement, floating point rounds to nearest even.
template <class T>
T encode(double v) {
    if constexpr (std::is_same_v<T, Bf16>) {
        uint32_t u = std::bit_cast<uint32_t>(float(v));
        u += 0x7fff + ((u >> 16) & 1);
        return Bf16{uint16_t(u >> 16)};
    } else if constexpr (std::is_integral_v<T>) {
        return T(int64_t(v));
    } else {
        return T(v);
    }
}

template <class T>
double decode(T x) {
    if constexpr (std::is_same_v<T, Bf16>)
        return std::bit_cast<float>(uint32_t(x.bits) << 16);
    else
        return double(x);
}

// Integers must match exactly; floating point to within about one rounding (AVG's division may
// round differently than the reference's).
template <class T>
bool same(T got, T want) {
    if constexpr (std::is_integral_v<T>) {
        return got == want;
    } else {
        double eps = std::is_same_v<T, Bf16>       ? 0x1p-7
                     : std::is_same_v<T, _Float16> ? 0x1p-10
                     : std::is_same_v<T, float>    ? 0x1p-22
                                                   : 0x1p-50;
        double g = decode(got), w = decode(want);
        return std::fabs(g - w) <= eps * std::max(1.0, std::fabs(w));  // false for NaN
    }
}

// Inputs repeat with this period in the element index.
size_t period(Pattern p) {
    if (!p.reduces || p.op == CCL_MIN || p.op == CCL_MAX) return 97;
    return p.op == CCL_PROD ? 5 : 4;
}

// Element i of rank r's input. Sums stay small (at most 3 per rank); products are powers of two
// (about one rank in five contributes a 2); the rest are 0 .. 96, different across ranks and
// elements so that misplaced data shows.
double input(Pattern p, int r, size_t i) {
    if (p.reduces && (p.op == CCL_SUM || p.op == CCL_AVG)) return double((size_t(r) + i) % 4);
    if (p.reduces && p.op == CCL_PROD) return (i + 3 * size_t(r)) % 5 == 0 ? 2 : 1;
    return double((size_t(r) * 31 + i * 7) % 97);
}

// The reduced result for element i, as a T.
template <class T>
T reduced(Pattern p, int nranks, size_t i) {
    double v = input(p, 0, i);
    for (int r = 1; r < nranks; ++r) {
        double x = input(p, r, i);
        switch (p.op) {
            case CCL_SUM:
            case CCL_AVG: v += x; break;
            case CCL_PROD: v *= x; break;
            case CCL_MIN: v = std::min(v, x); break;
            case CCL_MAX: v = std::max(v, x); break;
        }
    }
    if (p.op != CCL_AVG) return encode<T>(v);
    if constexpr (std::is_integral_v<T>)
        return T(int64_t(encode<T>(v)) / nranks);  // wrap, then
    else
        return encode<T>(v / nranks);  // truncate
}

template <class T>
uint64_t count_wrong(const T* got, size_t count, size_t first, const std::vector<T>& want) {
    uint64_t wrong = 0;
    for (size_t k = 0; k < count; ++k) wrong += !same(got[k], want[(first + k) % want.size()]);
    return wrong;
}

}  // namespace

void fill_input(void* buf, size_t count, ccl_datatype_t t, Pattern p, int rank, size_t first) {
    with_type(t, [&]<class T>(T) {
        std::vector<T> in(period(p));
        for (size_t i = 0; i < in.size(); ++i) in[i] = encode<T>(input(p, rank, i));
        T* out = static_cast<T*>(buf);
        for (size_t k = 0; k < count; ++k) out[k] = in[(first + k) % in.size()];
    });
}

void poison(void* buf, size_t bytes) { std::memset(buf, 0xff, bytes); }

uint64_t wrong_copy(const void* buf, size_t count, ccl_datatype_t t, Pattern p, int src,
                    size_t first) {
    return with_type(t, [&]<class T>(T) {
        std::vector<T> want(period(p));
        for (size_t i = 0; i < want.size(); ++i) want[i] = encode<T>(input(p, src, i));
        return count_wrong(static_cast<const T*>(buf), count, first, want);
    });
}

uint64_t wrong_reduced(const void* buf, size_t count, ccl_datatype_t t, Pattern p, int nranks,
                       size_t first) {
    return with_type(t, [&]<class T>(T) {
        std::vector<T> want(period(p));
        for (size_t i = 0; i < want.size(); ++i) want[i] = reduced<T>(p, nranks, i);
        return count_wrong(static_cast<const T*>(buf), count, first, want);
    });
}

}  // namespace bench
