// The benchmark's data: deterministic inputs every rank can compute for every other rank, and the
// checks of results against a reference computed from them independently of ccl.
//
// Element i of rank r's input depends only on (r, i) and the reduction. The values are small
// integers, exact in every datatype, so sums and products are exact whatever the order of
// reduction (integer types wrap like ccl's, and AVG truncates like ccl's).
#pragma once

#include <cstddef>
#include <cstdint>

#include "ccl/ccl.h"

namespace bench {

// How inputs are made: for a data movement (no reduction) or for a given reduction.
struct Pattern {
    bool reduces;
    ccl_reduction_t op;  // when reduces
};

// Element k of buf (count elements) := element first + k of rank's input.
void fill_input(void* buf, size_t count, ccl_datatype_t t, Pattern p, int rank, size_t first);

// Overwrites bytes with all ones (NaN in floating point, -1 or the maximum in integers): no input
// and, below about 80 ranks, no result has that value, so an output ccl left untouched shows.
void poison(void* buf, size_t bytes);

// How many of buf's count elements differ from elements first .. first + count - 1 of rank src's
// input.
uint64_t wrong_copy(const void* buf, size_t count, ccl_datatype_t t, Pattern p, int src,
                    size_t first);

// How many of buf's count elements differ from the reduction over ranks 0 .. nranks - 1 of
// elements first .. first + count - 1 of their inputs.
uint64_t wrong_reduced(const void* buf, size_t count, ccl_datatype_t t, Pattern p, int nranks,
                       size_t first);

}  // namespace bench
