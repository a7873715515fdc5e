// Datatypes, and reduce(): argument checks plus the run-time choice of kernel. The baseline
// (16-byte SSE2 vector) kernels are compiled here; the wider ones in reduce_avx2.cpp and
// reduce_avx512.cpp.
#include "base/reduce.h"

#include <cstring>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/team.h"

#define CCL_KERNELS_NS kernels_scalar
#define CCL_VEC_BYTES 16
#include "base/reduce_kernels.h"

namespace ccl {

namespace {

using KernelFn = void (*)(void*, const void* const*, int, size_t, ccl_datatype_t, ccl_reduction_t,
                          int);

bool cpu_has(Isa isa) {
    __builtin_cpu_init();
    // libgcc's checks include the OS's support (XCR0) for the YMM/ZMM state.
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                      __builtin_cpu_supports("f16c");
    switch (isa) {
        case Isa::scalar: return true;
        case Isa::avx2: return avx2;
        case Isa::avx512:
            // The AVX-512 file is built with F, BW, VL and DQ (and AVX2/FMA/F16C): all are needed.
            return avx2 && __builtin_cpu_supports("avx512f") &&
                   __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                   __builtin_cpu_supports("avx512dq");
    }
    return false;
}

Isa detect_isa() {
    if (cpu_has(Isa::avx512)) return Isa::avx512;
    if (cpu_has(Isa::avx2)) return Isa::avx2;
    return Isa::scalar;
}

KernelFn kernel_for(Isa isa) {
    switch (isa) {
        case Isa::avx512: return kernels_avx512::reduce;
        case Isa::avx2: return kernels_avx2::reduce;
        case Isa::scalar: break;
    }
    return kernels_scalar::reduce;
}

struct Dispatch {
    Isa isa;
    KernelFn fn;
};

const Dispatch& dispatch() {
    // Decided once; a function-local static so that it is ready even during static init.
    static const Dispatch d = [] {
        Isa isa = detect_isa();
        return Dispatch{isa, kernel_for(isa)};
    }();
    return d;
}

// Out of line and cold: the checks below are on the path of every reduction, small ones too.
[[noreturn, gnu::cold, gnu::noinline]] void bad_arg(const std::string& what) {
    throw Error(CCL_ERROR_INVALID_ARGUMENT, "reduce: " + what);
}

void check_args(void* out, const void* const* srcs, int nsrc, size_t count, ccl_datatype_t dtype,
                ccl_reduction_t op, int avg_divisor) {
    if (!dtype_valid(dtype)) [[unlikely]]
        bad_arg("invalid datatype " + std::to_string(static_cast<int>(dtype)));
    if (!op_valid(op)) [[unlikely]]
        bad_arg("invalid reduction " + std::to_string(static_cast<int>(op)));
    if (nsrc < 1) [[unlikely]]
        bad_arg("nsrc must be at least 1, got " + std::to_string(nsrc));
    if (op == CCL_AVG && avg_divisor < 1) [[unlikely]]
        bad_arg("avg divisor must be at least 1, got " + std::to_string(avg_divisor));
    if (count == 0) return;
    if (out == nullptr || srcs == nullptr) [[unlikely]]
        bad_arg("null buffer");
    for (int i = 0; i < nsrc; ++i)
        if (srcs[i] == nullptr) [[unlikely]]
            bad_arg("null source");
}

void run(KernelFn fn, void* out, const void* const* srcs, int nsrc, size_t count,
         ccl_datatype_t dtype, ccl_reduction_t op, int avg_divisor) {
    check_args(out, srcs, nsrc, count, dtype, op, avg_divisor);
    if (count == 0) return;
    if (nsrc == 1 && op != CCL_AVG) {
        // A reduction of one buffer is that buffer, bit for bit.
        if (out != srcs[0]) std::memmove(out, srcs[0], count * dtype_size(dtype));
        return;
    }
    fn(out, srcs, nsrc, count, dtype, op, avg_divisor);
}

}  // namespace

const char* dtype_name(ccl_datatype_t dtype) {
    switch (dtype) {
        case CCL_INT8: return "int8";
        case CCL_UINT8: return "uint8";
        case CCL_INT16: return "int16";
        case CCL_UINT16: return "uint16";
        case CCL_INT32: return "int32";
        case CCL_UINT32: return "uint32";
        case CCL_INT64: return "int64";
        case CCL_UINT64: return "uint64";
        case CCL_FLOAT16: return "float16";
        case CCL_BFLOAT16: return "bfloat16";
        case CCL_FLOAT32: return "float32";
        case CCL_FLOAT64: return "float64";
    }
    return "invalid";
}

const char* op_name(ccl_reduction_t op) {
    switch (op) {
        case CCL_SUM: return "sum";
        case CCL_PROD: return "prod";
        case CCL_MIN: return "min";
        case CCL_MAX: return "max";
        case CCL_AVG: return "avg";
    }
    return "invalid";
}

const char* isa_name(Isa isa) {
    switch (isa) {
        case Isa::scalar: return "scalar";
        case Isa::avx2: return "avx2";
        case Isa::avx512: return "avx512";
    }
    return "invalid";
}

Isa reduce_isa() { return dispatch().isa; }

void reduce(void* out, const void* const* srcs, int nsrc, size_t count, ccl_datatype_t dtype,
            ccl_reduction_t op, int avg_divisor) {
    run(dispatch().fn, out, srcs, nsrc, count, dtype, op, avg_divisor);
}

void reduce_range(void* out, const void* const* srcs, int nsrc, size_t begin, size_t end,
                  ccl_datatype_t dtype, ccl_reduction_t op, int avg_divisor) {
    const size_t esize = dtype_size(dtype);
    constexpr int kInPlace = 64;
    const void* in_place[kInPlace];
    std::vector<const void*> heap(nsrc > kInPlace ? size_t(nsrc) : 0);
    const void** part = nsrc > kInPlace ? heap.data() : in_place;
    for (int i = 0; i < nsrc; ++i) part[i] = static_cast<const char*>(srcs[i]) + begin * esize;
    reduce(static_cast<char*>(out) + begin * esize, part, nsrc, end - begin, dtype, op,
           avg_divisor);
}

void reduce_wide(void* out, const void* const* srcs, int nsrc, size_t count, ccl_datatype_t dtype,
                 ccl_reduction_t op, int avg_divisor) {
    const size_t esize = dtype_size(dtype);
    if (team_parts(count * esize) < 2)
        return reduce(out, srcs, nsrc, count, dtype, op, avg_divisor);
    team_for(count, esize, 64 / esize, [&](size_t b, size_t e) {
        reduce_range(out, srcs, nsrc, b, e, dtype, op, avg_divisor);
    });
}

void reduce_with(Isa isa, void* out, const void* const* srcs, int nsrc, size_t count,
                 ccl_datatype_t dtype, ccl_reduction_t op, int avg_divisor) {
    if (isa != Isa::scalar && isa != Isa::avx2 && isa != Isa::avx512)
        throw Error(CCL_ERROR_INVALID_ARGUMENT, "reduce: invalid instruction set");
    if (!cpu_has(isa))
        throw Error(CCL_ERROR_UNSUPPORTED,
                    std::string("reduce: this CPU does not support ") + isa_name(isa));
    run(kernel_for(isa), out, srcs, nsrc, count, dtype, op, avg_divisor);
}

}  // namespace ccl
