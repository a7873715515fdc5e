// The reduction kernels with 64-byte vectors; this file alone is compiled with the avx512 -m flags
// (CMakeLists.txt) and reduce.cpp calls it only when the CPU has them.
#define CCL_KERNELS_NS kernels_avx512
#define CCL_VEC_BYTES 64
#include "base/reduce_kernels.h"
