#include "core/tuning.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "base/config.h"

namespace ccl::tuning {

// Single copy's bounds. Fitted on an Intel Xeon VM (0.8 us probe), the 16-core Xeon host and the
// 2-core AMD EPYC VM, whose kernel copies a byte at a quarter of memcpy's speed:
// docs/tuning.md, "Single copy".

size_t cma_min_bytes(double probe_ns) {
    // docs/tuning.md, "The fixed cost".
    const int shift = int(std::lround((probe_ns - 800) / 275));
    return (size_t(8) << 10) << std::clamp(shift + 1, 0, 6);  // 16 KiB at shift 0
}

size_t crowded_cma_min_bytes(size_t cma_min, int local_ranks, int cpus) {
    // docs/tuning.md, "More ranks than cpus".
    if (cpus <= 0 || local_ranks <= cpus) return cma_min;
    return std::max(cma_min, (size_t(4) << 20) * size_t(cpus) / size_t(local_ranks));
}

size_t crowded_p2p_cma_min_bytes(size_t cma_min, int local_ranks, int cpus) {
    // docs/tuning.md, "Sends on a crowded node".
    if (cpus <= 0 || local_ranks <= cpus) return cma_min;
    return std::max(cma_min, (size_t(16) << 10) * size_t(local_ranks) / size_t(cpus));
}

size_t dear_cma_min_bytes(size_t probed, size_t crowd_floor, bool dear) {
    // docs/tuning.md, "Dear bytes".
    if (!dear) return probed;
    return std::max(probed, crowd_floor ? crowd_floor : size_t(4) << 20);
}

size_t alltoall_cma_max_bytes(bool cheap, bool dear, bool crowded) {
    // docs/tuning.md, "All-to-all".
    if (cheap) return SIZE_MAX;
    if (dear && !crowded) return 0;
    return size_t(crowded && !dear ? 8 : 4) << 20;
}

std::pair<size_t, size_t> broadcast_cma_bounds(size_t min, bool cheap, bool given, bool crowded) {
    // docs/tuning.md, "Broadcast".
    constexpr size_t kFrom = size_t(32) << 10, kArenaFrom = size_t(4) << 20;
    if (given) return {2 * min, SIZE_MAX};
    if (crowded) return {SIZE_MAX, 0};
    return {std::min(2 * min, kFrom), cheap ? SIZE_MAX : kArenaFrom};
}

int team_threads(int given, int own, int node_cpus, int local_ranks) {
    // docs/tuning.md, "The rank's team".
    if (given) return given;
    const int share = node_cpus > 0 ? node_cpus / std::max(1, local_ranks) : 1;
    return std::clamp(std::min(own, share), 1, 256);
}

size_t arena_buffer_bytes(size_t given, bool set, int threads) {
    // docs/tuning.md, "The rank's team".
    return set ? given : given * size_t(std::clamp(threads, 1, 4));
}

namespace {

// The byte cost that decides whether the kernel's bytes are dear: on a crowded node a rank's
// copies are cut by the others' turns on its cpu, at random, so the cheapest rank's byte;
// else the dearest's (docs/tuning.md, "Dear bytes").
uint64_t deciding_byte(const Probe& p) { return p.crowd_floor ? p.cheapest_x100 : p.dearest_x100; }

// Allgather blocks are read by every other rank, whose pinning adds up: past 4 ranks on a node
// each doubles the smallest block that goes single copy (docs/tuning.md, "Allgather").
size_t allgather_min_bytes(size_t cma_min, size_t max, int local_ranks) {
    size_t min = cma_min;
    for (int r = 4; r < local_ranks && min < max; ++r) min *= 2;
    return min;
}

}  // namespace

SingleCopy single_copy(const Probe& p, int local_ranks, int cpus) {
    SingleCopy s;
    s.threaded = p.threaded;
    const double byte = double(deciding_byte(p));
    s.dear = dear_bytes(byte, 100);
    if (!p.works) return s;
    s.on = true;
    s.reduces = !s.dear && p.crowd_floor == 0;
    s.byte_pays = s.reduces && local_ranks == 2 && byte_pays(byte, 100);
    const size_t probed = cma_min_bytes(p.fixed_ns);
    const bool given = p.cma_min != 0;
    s.min = given ? p.cma_min : dear_cma_min_bytes(probed, p.crowd_floor, s.dear);
    s.p2p_min = given ? s.min : crowded_p2p_cma_min_bytes(s.min, local_ranks, cpus);
    // Where the kernel's bytes are cheap, single copy won allgathers below 32 MiB; where dear,
    // at no size (docs/tuning.md, "Allgather"). Cheap: small blocks pay, or between two ranks a
    // byte does.
    const bool cheap = (s.cheap() || s.byte_pays) && (given || (p.crowd_floor == 0 && !s.dear));
    s.allgather_max = p.allgather_cma_max ? p.allgather_cma_max : cheap ? size_t(32) << 20 : 0;
    s.allgather_min =
        p.allgather_cma_max ? s.min : allgather_min_bytes(s.min, s.allgather_max, local_ranks);
    s.alltoall_max = p.alltoall_cma_max ? p.alltoall_cma_max
                                        : alltoall_cma_max_bytes(cheap, s.dear, p.crowd_floor != 0);
    std::tie(s.broadcast_min, s.broadcast_max) =
        broadcast_cma_bounds(s.min, s.cheap() || s.byte_pays, given, p.crowd_floor != 0);
    return s;
}

std::string describe(const Probe& p, const SingleCopy& s) {
    auto kib = [](size_t b) { return std::to_string(b >> 10) + " KiB"; };
    auto below = [&](size_t bound) {
        return bound == 0          ? std::string("none")
               : bound == SIZE_MAX ? "any size"
                                   : "below " + kib(bound);
    };
    const size_t probed = cma_min_bytes(p.fixed_ns);
    const uint64_t byte = deciding_byte(p);
    std::string why =
        p.cma_min ? std::string("CCL_CMA_MIN")
                  : "a transfer's fixed cost: " + std::to_string(uint64_t(p.fixed_ns)) + " ns";
    if (s.min != probed && !p.cma_min)
        why += ", raised from " + kib(probed) + ": the kernel's bytes are dear" +
               (p.crowd_floor ? ", on a node with more ranks than cpus" : "");
    why += "; a byte through the kernel took " + std::to_string(byte / 100) + "." +
           std::to_string(byte / 10 % 10) + "x memcpy's";
    if (s.dear) why += ", dear";
    // As reduces_single_copy chooses with no bound given.
    const std::string reductions = s.threaded    ? "none (every rank has a team)"
                                   : s.byte_pays ? "allreduces, reduce-scatters and reduces"
                                   : s.reduces   ? "reduces"
                                                 : "none";
    return "single copy for blocks from " + kib(s.min) + " (" + why + ")" +
           (s.p2p_min != s.min ? "; sends from " + kib(s.p2p_min) + " (more ranks than cpus)"
                               : std::string()) +
           "; allgathers: " +
           (s.allgather_min >= s.allgather_max ? std::string("none")
                                               : "blocks from " + kib(s.allgather_min) +
                                                     " in messages " + below(s.allgather_max)) +
           "; all-to-all blocks: " + (s.alltoall_max > s.min ? below(s.alltoall_max) : "none") +
           "; broadcasts between two: " +
           (s.broadcast_min >= s.broadcast_max
                ? std::string("none")
                : "from " + kib(s.broadcast_min) +
                      (s.broadcast_max == SIZE_MAX ? std::string()
                                                   : " " + below(s.broadcast_max))) +
           "; reductions of ccl's choice: " + reductions;
}

namespace {

// The largest allreduce that runs direct by default: direct reads n x bytes per rank in one
// round, rsag about 2 x bytes in two; with more than 2 ranks while n x bytes stays within
// 24 KiB; 2 ranks with a team up to 2 MiB (one round, its copy and its reduction each one job
// for the team, where rsag takes two rounds of jobs half as large: docs/tuning.md, "Allreduce").
// A CCL_ALLREDUCE_DIRECT_MAX the user gives holds as is.
size_t allreduce_direct_max(const Config& cfg, int n, bool threaded) {
    constexpr size_t kDirectReadMax = 24u << 10, kTeamPairMax = 2u << 20;
    if (cfg.allreduce_direct_max_set) return cfg.allreduce_direct_max;
    if (n <= 2)
        return threaded ? std::max(cfg.allreduce_direct_max, kTeamPairMax)
                        : cfg.allreduce_direct_max;
    return std::min(cfg.allreduce_direct_max, kDirectReadMax / size_t(n));
}

// The largest reduce that runs direct among n ranks: at 2 ranks every size (the root reads the
// one other input in one round whichever way); up to 8 as allreduce; from 10 while n x bytes
// stays within 80 KiB (docs/tuning.md, "Reduce").
size_t reduce_direct_max(const Config& cfg, int n) {
    constexpr size_t kManyRanksReadMax = 80u << 10;
    if (cfg.allreduce_direct_max_set) return cfg.allreduce_direct_max;
    if (n == 2 && cfg.allreduce_algo == "auto") return SIZE_MAX;
    if (n <= 8) return cfg.allreduce_direct_max;
    return std::min(cfg.allreduce_direct_max, kManyRanksReadMax / size_t(n));
}

// The smallest slice of a single-copy allreduce, reduce-scatter or reduce of ccl's choice:
// CCL_ALLREDUCE_CMA_MIN, but 16 KiB for allreduces and reduce-scatters where a byte through the
// kernel pays and single copy's fixed cost is dear (blocks from more than 64 KiB: the AMD VM
// with its cpus far apart, where the arena's copies of what the other cpu wrote are slow; 2
// ranks, reduce-scatter 256 KiB 20-22 against 90-91 us; docs/tuning.md, "Reduce-scatter").
size_t allreduce_cma_min(CollType coll, const SingleCopy& c, const Config& cfg) {
    constexpr size_t kFarSlice = 16u << 10;
    if (cfg.allreduce_cma_min_set || coll != CollType::allreduce || !c.byte_pays || c.cheap())
        return cfg.allreduce_cma_min;
    return std::min(cfg.allreduce_cma_min, kFarSlice);
}

// Whether a large allreduce or reduce goes single copy: allowed, a scratch piece of a cache line
// per rank, CCL_ALLREDUCE=cma; or with auto, slices (bytes / ranks) of at least
// allreduce_cma_min and: below a CCL_ALLREDUCE_CMA_MAX the user gives, whatever the probe
// said; else, where no rank has a team (the team splits the arena's copies as well), allreduces
// below CCL_ALLREDUCE_CMA_MAX where the probe allows them, reduces at any size where it allows
// those (docs/tuning.md, "Allreduce", "Reduce").
bool reduces_single_copy(CollType coll, const Shape& s, size_t bytes, const Config& cfg) {
    const size_t n = size_t(s.local_ranks);
    const std::string& choice = cfg.allreduce_algo;
    if (!s.copy.on || s.buffer / n < 64) return false;
    if (choice == "cma") return true;
    if (choice != "auto" || bytes / n < allreduce_cma_min(coll, s.copy, cfg)) return false;
    if (cfg.allreduce_cma_max_set) return bytes < cfg.allreduce_cma_max;
    if (s.copy.threaded) return false;
    return coll == CollType::allreduce ? s.copy.byte_pays && bytes < cfg.allreduce_cma_max
                                       : s.copy.reduces;
}

Algo multinode(CollType coll) {
    switch (coll) {
        case CollType::allreduce: return Algo::hier_allreduce;
        case CollType::broadcast: return Algo::hier_broadcast;
        case CollType::reduce: return Algo::hier_reduce;
        case CollType::allgather:
        case CollType::allgatherv: return Algo::hier_allgather;
        case CollType::reduce_scatter: return Algo::hier_reduce_scatter;
        case CollType::alltoall:
        case CollType::alltoallv: return Algo::hier_alltoall;
        case CollType::barrier: return Algo::hier_barrier;
        case CollType::send:
        case CollType::recv: return Algo::p2p;
    }
    return Algo::none;
}

}  // namespace

Algo choose(CollType coll, size_t bytes, const Shape& s, const Config& cfg) {
    // Calls with no data do nothing, but for barriers, sends, receives and all-to-allvs (whose
    // counts come with each call).
    const bool empty =
        bytes == 0 && coll != CollType::barrier && !is_p2p(coll) && coll != CollType::alltoallv;
    if (empty) return Algo::none;
    if (s.multinode) return multinode(coll);
    const bool alone = s.ranks == 1;
    switch (coll) {
        case CollType::allreduce: {
            if (alone) return Algo::local_copy;  // AVG divides by 1
            const std::string& choice = cfg.allreduce_algo;
            if (choice == "direct" ||
                (choice == "auto" &&
                 bytes <= allreduce_direct_max(cfg, s.local_ranks, s.copy.threaded)))
                return Algo::direct;
            return reduces_single_copy(coll, s, bytes, cfg) ? Algo::allreduce_cma : Algo::rsag;
        }
        case CollType::reduce:
            if (alone) return Algo::local_copy;
            if (bytes <= reduce_direct_max(cfg, s.local_ranks)) return Algo::reduce_direct;
            return reduces_single_copy(coll, s, bytes, cfg) ? Algo::reduce_cma : Algo::reduce_split;
        case CollType::broadcast:
            if (alone) return Algo::none;
            // Each of two ranks copies half, in the probe's bounds (docs/tuning.md, "Broadcast").
            return s.ranks == 2 && bytes >= s.copy.broadcast_min && bytes < s.copy.broadcast_max
                       ? Algo::broadcast_cma
                       : Algo::broadcast;
        case CollType::allgather:
        case CollType::allgatherv: {
            const size_t n = size_t(s.ranks);
            const size_t block = coll == CollType::allgather ? bytes : bytes / n;
            const size_t message = coll == CollType::allgather ? bytes * n : bytes;
            return block >= s.copy.allgather_min && message < s.copy.allgather_max
                       ? Algo::allgather_cma
                       : Algo::allgather;
        }
        case CollType::reduce_scatter:
            // Single copy where the allreduce it is the first half of would take it: blocks as
            // its slices.
            if (alone) return Algo::local_copy;
            return reduces_single_copy(CollType::allreduce, s, size_t(s.local_ranks) * bytes, cfg)
                       ? Algo::reduce_scatter_cma
                       : Algo::reduce_scatter;
        case CollType::alltoall:
            return size_t(s.ranks) * bytes <= shm::Arena::kLaneBytes ? Algo::alltoall_lane
                                                                     : Algo::alltoall;
        case CollType::alltoallv: return Algo::alltoall;
        case CollType::send:
        case CollType::recv: return Algo::p2p;
        case CollType::barrier: return alone ? Algo::none : Algo::barrier;
    }
    return Algo::none;
}

bool fuses(size_t bytes, const Config& cfg) { return bytes <= cfg.allreduce_direct_max; }

}  // namespace ccl::tuning
