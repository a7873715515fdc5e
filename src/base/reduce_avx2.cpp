// The reduction kernels with 32-byte vectors; this file alone is compiled with the avx2 -m flags
// (CMakeLists.txt) and reduce.cpp calls it only when the CPU has them.
#define CCL_KERNELS_NS kernels_avx2
#define CCL_VEC_BYTES 32
#include "base/reduce_kernels.h"
