// Datatypes and the vectorized reduction kernels (AVX-512 / AVX2 picked at run time, scalar
// fallback).
#pragma once

#include <cstddef>

#include "ccl/ccl.h"

namespace ccl {

// Inline: every call checks its datatype and reduction and sizes its buffers.
inline bool dtype_valid(ccl_datatype_t dtype) {
    return static_cast<int>(dtype) >= CCL_INT8 && static_cast<int>(dtype) <= CCL_FLOAT64;
}
inline bool op_valid(ccl_reduction_t op) {
    return static_cast<int>(op) >= CCL_SUM && static_cast<int>(op) <= CCL_AVG;
}
inline size_t dtype_size(ccl_datatype_t dtype) {  // 0 when invalid
    switch (dtype) {
        case CCL_INT8:
        case CCL_UINT8: return 1;
        case CCL_INT16:
        case CCL_UINT16:
        case CCL_FLOAT16:
        case CCL_BFLOAT16: return 2;
        case CCL_INT32:
        case CCL_UINT32:
        case CCL_FLOAT32: return 4;
        case CCL_INT64:
        case CCL_UINT64:
        case CCL_FLOAT64: return 8;
    }
    return 0;
}
const char* dtype_name(ccl_datatype_t dtype);
const char* op_name(ccl_reduction_t op);

// out[i] = op(srcs[0][i], ..., srcs[nsrc-1][i]) for i < count, nsrc >= 1. 16-bit floats accumulate
// in float and round once to nearest even; integer SUM/PROD wrap. For CCL_AVG the sum is divided
// by `avg_divisor` (integers: truncated). `out` may be one of the srcs (exactly, not overlapping
// otherwise); srcs need no alignment.
void reduce(void* out, const void* const* srcs, int nsrc, size_t count, ccl_datatype_t dtype,
            ccl_reduction_t op, int avg_divisor);

// reduce() of elements [begin, end) only, of out and of every source: a part of a larger
// reduction, as one thread of the team runs it.
void reduce_range(void* out, const void* const* srcs, int nsrc, size_t begin, size_t end,
                  ccl_datatype_t dtype, ccl_reduction_t op, int avg_divisor);

// reduce() split over the rank's team (base/team.h) where it is large enough, at cache-line
// multiples: the form the data path calls.
void reduce_wide(void* out, const void* const* srcs, int nsrc, size_t count, ccl_datatype_t dtype,
                 ccl_reduction_t op, int avg_divisor);

enum class Isa { scalar, avx2, avx512 };
Isa reduce_isa();  // what reduce() uses on this CPU
const char* isa_name(Isa isa);
// The same with a given instruction set (it must be supported by this CPU): for tests.
void reduce_with(Isa isa, void* out, const void* const* srcs, int nsrc, size_t count,
                 ccl_datatype_t dtype, ccl_reduction_t op, int avg_divisor);

}  // namespace ccl
