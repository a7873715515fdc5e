// Where the reducing collectives' rounds (allreduce, reduce, reduce_scatter) find every rank's
// part: each helper points a reduction's sources at them, in rank order, once the round's waits
// are over, for a blocking form and its coroutine alike. `srcs` is the caller's (a coroutine's
// stays in its frame), with an entry per rank.
#pragma once

#include <cstddef>

#include <algorithm>

#include "base/reduce.h"
#include "base/team.h"
#include "shm/collectives.h"

namespace ccl::shm {

// An eager round, once every peer's slot carries it: the peers' slots and this rank's own input
// `mine` (which never goes through its slot for itself) reduced into `out`.
inline void reduce_eager_slots(const Arena& arena, PerRank<const void*>& srcs, const void* mine,
                               void* out, size_t count, ccl_datatype_t dtype, ccl_reduction_t op) {
    const int n = arena.nranks(), me = arena.rank();
    for (int r = 0; r < n; ++r) srcs[r] = arena.peer_eager(r);
    srcs[me] = mine;
    reduce(out, srcs.data(), n, count, dtype, op, n);
}

// A round through the buffers, once every rank is ready: byte `at` of every peer's buffer, and
// `mine` for this rank (its input, which only the peers need in the arena; or its own buffer +
// at). The caller reduces: the reduction's arguments then need not be kept across the calls of
// peer_buffer (made for the peers only).
inline void point_at_buffers(const Arena& arena, size_t at, const void* mine,
                             PerRank<const void*>& srcs) {
    const int n = arena.nranks(), me = arena.rank();
    for (int r = 0; r < n; ++r)
        srcs[r] = r == me ? mine : static_cast<const char*>(arena.peer_buffer(r)) + at;
}

// A single-copy reduction's slice, elements [lo, hi) of `esize` bytes, in parts over the rank's
// team: each part gets its share of the `scratch_bytes` at `scratch`, room for `pieces` pieces of
// `piece` bytes (a multiple of a cache line), and runs fn(share, piece, begin, end) for its byte
// range [begin, end) of the message.
template <class Fn>
void split_over_scratch(char* scratch, size_t scratch_bytes, size_t pieces, size_t lo, size_t hi,
                        size_t esize, Fn&& fn) {
    const size_t parts = std::min(team_parts((hi - lo) * esize), scratch_bytes / pieces / 64);
    const size_t share = scratch_bytes / std::max<size_t>(parts, 1);
    const size_t piece = share / pieces / 64 * 64;
    team_split(hi - lo, 64 / esize, parts, true, [&](size_t p, size_t b, size_t e) {
        fn(scratch + p * share, piece, (lo + b) * esize, (lo + e) * esize);
    });
}

}  // namespace ccl::shm
