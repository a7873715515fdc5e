// Communicator's single-copy probe at creation: what the kernel's copies cost here, agreed by
// every rank; core/tuning derives the bounds from it.
#include <unistd.h>

#include <algorithm>
#include <cmath>

#include "base/config.h"
#include "base/log.h"
#include "base/team.h"
#include "base/wait.h"
#include "core/comm.h"
#include "core/tuning.h"
#include "shm/cma.h"

namespace ccl {

namespace {

// The rank's team (base/team.h, tuning::team_threads).
int team_threads_wanted(const Config& c, const Topology& t) {
    return tuning::team_threads(c.rank_threads, usable_cpus(), t.node_cpus(), t.local_size());
}

}  // namespace

void Communicator::configure_team() {
    team_configure(team_threads_wanted(config_, topo_));
    shm::cma_slice(config_.cma_slice);
    if (team_size() > 1 && rank_ == 0)
        log().info("each rank moves large collectives' bytes on {} threads", team_size());
}

tuning::SingleCopy Communicator::probe_single_copy() {
    if (size_ == 1) return {};
    // Every rank reads a word of the next rank's memory; all must succeed (and want it).
    const int64_t word = 0x63636c;
    std::vector<int64_t> mine{::getpid(), int64_t(reinterpret_cast<intptr_t>(&word))};
    std::vector<int64_t> all(2 * size_t(size_));
    run({CollType::allgather, 2, CCL_INT64, CCL_SUM, 0}, {mine.data(), all.data(), {}});
    // The next rank on this node (single copy is for co-located ranks only).
    const auto& node = topo_.ranks_of(topo_.node());
    size_t next = size_t(node[size_t(topo_.local_rank() + 1) % node.size()]);
    const double ns =
        config_.single_copy
            ? shm::cma_probe(pid_t(all[2 * next]),
                             reinterpret_cast<const void*>(intptr_t(all[2 * next + 1])),
                             sizeof(word))
            : -1;
    // The cost of a byte, the kernel's copy against memcpy (shm::cma_copy_costs), among this
    // node's ranks: 256 KiB, a size that stays in the caches, where most transfers are.
    double kernel_ns = -1, user_ns = -1;
    const size_t probe_bytes = std::min(arena_->buffer_size(), size_t(256) << 10);
    if (arena_->nranks() > 1)
        shm::cma_copy_costs(*arena_, CollSignature{}.round(Algo::copy_costs), probe_bytes, 3,
                            config_.single_copy, &kernel_ns, &user_ns)
            .run_blocking();
    const uint64_t per_byte =
        kernel_ns > 0 && user_ns > 0 ? uint64_t(100 * kernel_ns / user_ns) : 0;
    // One allreduce (max) agrees on all of it, so that every rank chooses alike (an all-to-all's
    // ranks each decide for all): whether any rank failed, the fastest probe (noise only adds to
    // one; as its complement), the largest CCL_CMA_MIN, CCL_ALLGATHER_CMA_MAX and
    // CCL_ALLTOALL_CMA_MAX given, the largest floor of a node with more ranks than cpus (none
    // where a node's cpus are unknown), the dearest and cheapest byte (the cheapest as its
    // complement), and whether any rank copies large transfers on one thread.
    uint64_t vote[9] = {ns < 0,
                        ~(ns < 0 ? UINT64_MAX : uint64_t(ns)),
                        config_.cma_min,
                        config_.allgather_cma_max,
                        config_.alltoall_cma_max,
                        tuning::crowded_cma_min_bytes(0, topo_.local_size(), topo_.node_cpus()),
                        per_byte,
                        ~per_byte,
                        uint64_t(team_size() < 2)},
             agreed[9];
    run({CollType::allreduce, 9, CCL_UINT64, CCL_MAX, 0}, {vote, agreed, {}});
    tuning::Probe p;
    p.works = agreed[0] == 0;
    p.fixed_ns = double(~agreed[1]);
    p.cma_min = size_t(agreed[2]);
    p.allgather_cma_max = size_t(agreed[3]);
    p.alltoall_cma_max = size_t(agreed[4]);
    p.crowd_floor = size_t(agreed[5]);
    p.dearest_x100 = agreed[6];
    p.cheapest_x100 = ~agreed[7];
    p.threaded = agreed[8] == 0;
    const tuning::SingleCopy copy = tuning::single_copy(p, topo_.local_size(), topo_.node_cpus());
    if (!p.works && config_.single_copy && rank_ == 0)
        log().info(
            "single-copy transfers (process_vm_readv) are not allowed here: ptrace "
            "restrictions or a seccomp profile; using shared-memory copies only");
    if (p.works && rank_ == 0) {
        log().info("{}", tuning::describe(p, copy));
        // Bytes per ns are GB/s; to a tenth.
        auto rate = [&](double ns) { return std::round(10 * double(probe_bytes) / ns) / 10; };
        if (kernel_ns > 0 && user_ns > 0)
            log().info(
                "rank 0 copied {} KiB from the next rank at {} GB/s through the kernel, {} "
                "GB/s by memcpy",
                probe_bytes >> 10, rate(kernel_ns), rate(user_ns));
    }
    return copy;
}

}  // namespace ccl
