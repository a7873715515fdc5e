// Algorithm choice, in one place: plain inputs (the call, the communicator's shape, what the
// single-copy probe measured at creation, the knobs) in, one Algo out. The planner builds the
// chosen algorithm's steps (core/planner.cpp); nothing here touches a communicator, so every
// choice is tested alone (tests/unit/test_planner.cpp). The fitted constants live in tuning.cpp,
// each with a pointer to its measurements in docs/tuning.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "core/schedule.h"

namespace ccl {
struct Config;
}

namespace ccl::tuning {

// What a node's ranks agreed at a communicator's creation (Communicator::probe_single_copy, one
// allreduce of every rank's figures), so that every rank derives the same bounds from it.
struct Probe {
    bool works = false;   // process_vm_readv worked on every rank, and every rank wants it
    double fixed_ns = 0;  // the fastest transfer's fixed cost (the system call)
    // A byte through the kernel over a byte by memcpy from the arena, x100, on the dearest rank
    // and on the cheapest (0: not measured).
    uint64_t dearest_x100 = 0, cheapest_x100 = 0;
    bool threaded = false;  // every rank has a team (base/team.h) that cuts large transfers
    // Bounds the user gave, the largest over the ranks (0: automatic): CCL_CMA_MIN,
    // CCL_ALLGATHER_CMA_MAX, CCL_ALLTOALL_CMA_MAX.
    size_t cma_min = 0, allgather_cma_max = 0, alltoall_cma_max = 0;
    // The most crowded node's floor (crowded_cma_min_bytes(0, ...)): 0 where no node has more
    // ranks than cpus.
    size_t crowd_floor = 0;
};

// What single copy may carry on a communicator, derived from its Probe. Sizes in bytes; SIZE_MAX
// as a minimum and 0 as a maximum: never.
struct SingleCopy {
    bool on = false;    // every rank may copy straight from its peers' memory
    bool dear = false;  // the kernel's bytes are dear (dear_bytes)
    // Reduces single copy of ccl's own choice where no rank shares a cpu and the bytes are not
    // dear (docs/tuning.md, "Reduce").
    bool reduces = false;
    // Between two such ranks, a byte through the kernel costs under twice memcpy's (byte_pays):
    // allreduces and reduce-scatters single copy of ccl's own choice, and allgathers and
    // all-to-alls as where blocks are cheap (docs/tuning.md, "Allreduce", "Dear bytes").
    bool byte_pays = false;
    bool threaded = false;      // every rank has a team that cuts large transfers
    size_t min = SIZE_MAX;      // blocks from this size go single copy (all-to-all, allgather base)
    size_t p2p_min = SIZE_MAX;  // sends and receives from this size
    size_t allgather_min = SIZE_MAX, allgather_max = 0;  // blocks from min in messages below max
    size_t alltoall_max = SIZE_MAX;                      // all-to-all blocks below this
    // Broadcasts between two ranks of this size, from min below max, each rank copying half.
    size_t broadcast_min = SIZE_MAX, broadcast_max = 0;
    // Whether single copy pays from small blocks (64 KiB or less).
    bool cheap() const { return min <= kCheapBlock; }
    static constexpr size_t kCheapBlock = size_t(64) << 10;
};
SingleCopy single_copy(const Probe& p, int local_ranks, int cpus);
// The log line of what single_copy chose, and why.
std::string describe(const Probe& p, const SingleCopy& s);

// The fitted rules single_copy derives from (each tested alone).
// The block size from which single copy pays where one transfer has the fixed cost `probe_ns`:
// 16 KiB at 0.8 us, doubling with every 275 ns more (8 KiB to 512 KiB).
size_t cma_min_bytes(double probe_ns);
// Whether the kernel's copies are dear by the byte: 3x memcpy's time or more.
inline bool dear_bytes(double kernel_ns, double user_ns) {
    return kernel_ns > 0 && user_ns > 0 && kernel_ns >= 3 * user_ns;
}
// Whether single copy pays by the byte between two ranks: the kernel's copy under 2x memcpy's.
inline bool byte_pays(double kernel_ns, double user_ns) {
    return kernel_ns > 0 && user_ns > 0 && kernel_ns < 2 * user_ns;
}
// The broadcasts between two ranks that go single copy, [min, max), for single copy's block
// size `min`: from twice the size the user gave; on a crowded node none; else from 32 KiB (or
// twice a smaller block size), at every size where single copy is `cheap` (small blocks pay, or a
// byte does), else below 4 MiB.
std::pair<size_t, size_t> broadcast_cma_bounds(size_t min, bool cheap, bool given, bool crowded);
// `cma_min` where `local_ranks` share `cpus` (0: unknown): with more ranks than cpus at least
// 4 MiB over the ranks per cpu.
size_t crowded_cma_min_bytes(size_t cma_min, int local_ranks, int cpus);
// Sends and receives: with more ranks than cpus at least 16 KiB per rank per cpu.
size_t crowded_p2p_cma_min_bytes(size_t cma_min, int local_ranks, int cpus);
// The probed size where the kernel's bytes are cheap; where they are dear, at least the crowded
// floor, else 4 MiB.
size_t dear_cma_min_bytes(size_t probed, size_t crowd_floor, bool dear);
// Below what size all-to-all blocks go single copy: any where cheap, none where dear with a cpu
// per rank, else 8 MiB where only the crowd stands in the way, 4 MiB otherwise.
size_t alltoall_cma_max_bytes(bool cheap, bool dear, bool crowded);
// The rank's team (base/team.h): `given` (CCL_RANK_THREADS), else the `own` cpus the rank may
// run on, at most its share of the node's (unbound ranks may run anywhere).
int team_threads(int given, int own, int node_cpus, int local_ranks);
// Bytes of each of a rank's two arena buffers: `given` (CCL_SHM_BUFFER_SIZE) where `set`, else
// `given` times the rank's team of `threads`, at most 4 times (a chunk split over a team fits its
// threads' caches; fewer rounds).
size_t arena_buffer_bytes(size_t given, bool set, int threads);

// A communicator as the choice sees it.
struct Shape {
    int ranks = 1;        // the communicator's
    int local_ranks = 1;  // this node's (the arena's)
    size_t buffer = 0;    // an arena buffer's bytes
    bool multinode = false;
    SingleCopy copy;
};

// The algorithm of a call of `bytes` (count x datatype size; allgatherv, alltoallv: the whole
// receive buffer) on `s` under the knobs `cfg`. Algo::none: nothing to do (no data, one rank).
// Sends and receives on a communicator across nodes get Algo::p2p: the peer's node routes them.
Algo choose(CollType coll, size_t bytes, const Shape& s, const Config& cfg);

// Whether an allreduce of `bytes` may join a group's fused allreduce.
bool fuses(size_t bytes, const Config& cfg);

}  // namespace ccl::tuning
