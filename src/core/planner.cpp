#include "core/planner.h"

#include <algorithm>
#include <cstring>

#include "base/config.h"
#include "base/reduce.h"
#include "core/comm.h"
#include "shm/cma.h"
#include "shm/collectives.h"

namespace ccl {

namespace {

Step local_copy(size_t bytes) {
    return {"local_copy", [bytes](const Buffers& b) -> Task {
                if (b.send != b.recv) std::memcpy(b.recv, b.send, bytes);
                co_return;
            }};
}

// The largest allreduce that runs direct by default. Direct reads every rank's input (n x bytes
// per rank) in one round, rsag about 2 x bytes in two: on the 16-core host direct won at 2 ranks
// up to 64 KiB, and with more ranks while n x bytes stayed within about 24 KiB
// (docs/performance.md). A CCL_ALLREDUCE_DIRECT_MAX the user gives holds as is.
size_t allreduce_direct_max(const Config& cfg, int n) {
    constexpr size_t kDirectReadMax = 24u << 10;
    if (cfg.allreduce_direct_max_set || n <= 2) return cfg.allreduce_direct_max;
    return std::min(cfg.allreduce_direct_max, kDirectReadMax / size_t(n));
}

// Whether a large allreduce or reduce goes single copy (shm/cma.h): allowed here, a scratch
// piece of a cache line per rank, and with CCL_ALLREDUCE=auto slices (bytes / ranks) of at least
// CCL_ALLREDUCE_CMA_MIN in messages below CCL_ALLREDUCE_CMA_MAX. Where large transfers run on
// several threads (shm::cma_parallel) and the user set no bound, at any size: on the 16-core host,
// single copy against rsag (ms), 64 MiB, 2 ranks: reduce 9.9-10.5 / 14.3-14.4, allreduce 10.4-13.0
// / 13.3-15.0; 4 ranks: reduce 10.6-14.1 / 15.0-15.2, allreduce 15.8-16.3 / 18.4-19.6; 256 MiB
// (another lease): reduce 63-67 / 76 at 2 ranks, 57 / 69-81 at 4, allreduce even (68-81).
bool single_copy_fits(Communicator& comm, size_t bytes) {
    const Config& cfg = comm.config();
    const shm::Arena& arena = comm.arena();
    const size_t n = size_t(arena.nranks());
    const std::string& choice = cfg.allreduce_algo;
    const size_t most =
        cfg.allreduce_cma_max_set || !comm.threaded_cma() ? cfg.allreduce_cma_max : SIZE_MAX;
    return comm.single_copy() && arena.buffer_size() / n >= 64 &&
           (choice == "cma" || (choice == "auto" && comm.auto_single_copy_reductions() &&
                                bytes / n >= cfg.allreduce_cma_min && bytes < most));
}

// Whether a broadcast between two ranks goes single copy, each rank copying half
// (shm::broadcast_cma): from twice the single-copy block size, where that is cheap. On the 16-core
// Xeon host (blocks from 16 KiB) it took 2 MiB in 75-122 us against 201-221 through the arena
// (MPICH 211-220), 256 KiB in 9-11 against 19-25; on the AMD VM (256 KiB), where the kernel copied
// at 35-45% of the arena's streaming copies, it lost from 16 MiB (64 MiB: 4.4-5.5 ms against
// 3.5-3.8).
bool broadcast_halves(const Communicator& comm, size_t bytes) {
    return comm.size() == 2 && comm.cheap_single_copy() && bytes >= 2 * comm.cma_min();
}

// Whether an allgather(v) goes single copy (shm::allgatherv_cma): blocks from CCL_CMA_MIN (more
// where many ranks read each block) in messages below CCL_ALLGATHER_CMA_MAX (chosen with them:
// Communicator::probe_single_copy).
bool allgather_single_copy(const Communicator& comm, size_t block, size_t message) {
    return block >= comm.allgather_cma_min() && message < comm.allgather_cma_max();
}

Step plan_allreduce(Communicator& comm, const CollSignature& sig) {
    const Config& cfg = comm.config();
    shm::Arena& arena = comm.arena();
    const size_t bytes = sig.count * dtype_size(sig.dtype);
    const std::string& choice = cfg.allreduce_algo;
    bool direct = choice == "direct" ||
                  (choice == "auto" && bytes <= allreduce_direct_max(cfg, arena.nranks()));
    if (direct) {
        const shm::Signature round_sig = sig.round(Algo::direct);
        Step step{"shm/allreduce_direct", [&arena, sig, round_sig](const Buffers& b) {
                      return shm::allreduce_direct(arena, round_sig, b.send, b.recv, sig.count,
                                                   sig.dtype, sig.op);
                  }};
        if (bytes <= shm::Arena::kEagerBytes)
            step.run = [&arena, sig, round_sig](const Buffers& b) {
                shm::allreduce_eager(arena, round_sig, b.send, b.recv, sig.count, sig.dtype,
                                     sig.op);
            };
        return step;
    }
    // Single copy (one copy in, where rsag copies in, then out) wins for mid-size messages with
    // slices big enough to pay for the system calls; the largest stream through rsag's copy-outs
    // as fast (docs/performance.md).
    if (single_copy_fits(comm, bytes))
        return {"shm/allreduce_cma",
                [&arena, sig, round_sig = sig.round(Algo::allreduce_cma)](const Buffers& b) {
                    return shm::allreduce_cma(arena, round_sig, b.send, b.recv, sig.count,
                                              sig.dtype, sig.op);
                }};
    return {"shm/allreduce_rsag",
            [&arena, sig, round_sig = sig.round(Algo::rsag)](const Buffers& b) {
                return shm::allreduce_rsag(arena, round_sig, b.send, b.recv, sig.count, sig.dtype,
                                           sig.op);
            }};
}

Step plan_reduce(Communicator& comm, const CollSignature& sig) {
    const Config& cfg = comm.config();
    shm::Arena& arena = comm.arena();
    const size_t bytes = sig.count * dtype_size(sig.dtype);
    if (bytes <= reduce_direct_max(cfg, arena.nranks())) {
        const shm::Signature round_sig = sig.round(Algo::reduce_direct);
        Step step{"shm/reduce_direct", [&arena, sig, round_sig](const Buffers& b) {
                      return shm::reduce_direct(arena, round_sig, b.send, b.recv, sig.count,
                                                sig.dtype, sig.op, sig.root);
                  }};
        if (bytes <= shm::Arena::kEagerBytes)
            step.run = [&arena, sig, round_sig](const Buffers& b) {
                shm::reduce_eager(arena, round_sig, b.send, b.recv, sig.count, sig.dtype, sig.op,
                                  sig.root);
            };
        return step;
    }
    // Single copy where allreduce takes it: the same slices, the same system calls per piece.
    if (single_copy_fits(comm, bytes))
        return {"shm/reduce_cma",
                [&arena, sig, round_sig = sig.round(Algo::reduce_cma)](const Buffers& b) {
                    return shm::reduce_cma(arena, round_sig, b.send, b.recv, sig.count, sig.dtype,
                                           sig.op, sig.root);
                }};
    return {"shm/reduce_split",
            [&arena, sig, round_sig = sig.round(Algo::reduce_split)](const Buffers& b) {
                return shm::reduce_split(arena, round_sig, b.send, b.recv, sig.count, sig.dtype,
                                         sig.op, sig.root);
            }};
}

}  // namespace

// Direct has the root alone read every rank's input; split has every rank reduce a slice, which
// the root then gathers. On the 16-core host direct won or tied up to 8 ranks at 64 KiB, but from
// 10 ranks only while n x bytes stayed within about 80 KiB (us, direct / split: 10 ranks 8 KiB
// 3.8-4.3 / 4.5-5.1; 16 ranks 4 KiB 4.4-5.6 / 4.3-5.0, 32 KiB 24-30 / 13-18;
// docs/performance-history.md, session 29). On the 2-core machine direct won at 2 and 4 ranks up
// to 64 KiB by far.
// At 2 ranks the root reads the one other input whichever way, and direct does it in one round
// per piece, where split takes two and single copy a system call: direct at every size (2-core
// VM, us, direct / split: 256 KiB 7.1 / 9.6 and 2 MiB 59 / 82 with the cpus near, 10.6 / 28.9 and
// 75 / 225 far apart, 16 MiB 1080 / 2185; the 16-core host, direct / single copy: 256 KiB 17.3 /
// 21.7, 64 MiB 13.7 / 15.6 ms). A CCL_ALLREDUCE_DIRECT_MAX the user gives holds as is, and so
// does a CCL_ALLREDUCE other than auto.
size_t reduce_direct_max(const Config& cfg, int n) {
    constexpr size_t kManyRanksReadMax = 80u << 10;
    if (cfg.allreduce_direct_max_set) return cfg.allreduce_direct_max;
    if (n == 2 && cfg.allreduce_algo == "auto") return SIZE_MAX;
    if (n <= 8) return cfg.allreduce_direct_max;
    return std::min(cfg.allreduce_direct_max, kManyRanksReadMax / size_t(n));
}

Schedule plan(Communicator& comm, const CollSignature& sig) {
    if (comm.multinode()) return plan_multinode(comm, sig);
    Schedule s{sig, {}};
    const size_t bytes = sig.count * dtype_size(sig.dtype);
    shm::Arena& arena = comm.arena();
    switch (sig.coll) {
        case CollType::allreduce:
            if (sig.count == 0) break;
            // One rank: the reduction of one input is that input (AVG divides by 1).
            if (comm.size() == 1)
                s.steps.push_back(local_copy(bytes));
            else
                s.steps.push_back(plan_allreduce(comm, sig));
            break;
        case CollType::broadcast: {
            if (sig.count == 0 || comm.size() == 1) break;
            if (broadcast_halves(comm, bytes)) {
                s.steps.push_back({"shm/broadcast_cma",
                                   [&arena, bytes, root = sig.root,
                                    round_sig = sig.round(Algo::broadcast_cma)](const Buffers& b) {
                                       return shm::broadcast_cma(arena, round_sig, b.recv, bytes,
                                                                 root);
                                   }});
                break;
            }
            const shm::Signature round_sig = sig.round(Algo::broadcast);
            s.steps.push_back(
                {"shm/broadcast", [&arena, bytes, root = sig.root, round_sig](const Buffers& b) {
                     return shm::broadcast(arena, round_sig, b.recv, bytes, root);
                 }});
            if (bytes <= shm::Arena::kEagerBytes)
                s.steps.back().run = [&arena, bytes, root = sig.root, round_sig](const Buffers& b) {
                    shm::broadcast_eager(arena, round_sig, b.recv, bytes, root);
                };
            break;
        }
        case CollType::reduce:
            if (sig.count == 0) break;
            if (comm.size() == 1)
                s.steps.push_back(local_copy(bytes));
            else
                s.steps.push_back(plan_reduce(comm, sig));
            break;
        case CollType::allgather:
        case CollType::allgatherv: {
            if (sig.count == 0) break;
            // allgather's counts are all the same: kept in the step, not passed with each call.
            std::vector<size_t> equal;
            if (sig.coll == CollType::allgather) equal.assign(size_t(comm.size()), sig.count);
            const size_t n = size_t(comm.size());
            const size_t block = sig.coll == CollType::allgather ? bytes : bytes / n;
            const bool cma = allgather_single_copy(
                comm, block, sig.coll == CollType::allgather ? bytes * n : bytes);
            const shm::Signature round_sig = sig.round(cma ? Algo::allgather_cma : Algo::allgather);
            const bool eager = !equal.empty() && block <= shm::Arena::kEagerBytes;
            s.steps.push_back(
                {cma ? "shm/allgatherv_cma" : "shm/allgatherv",
                 [&arena, dtype = sig.dtype, equal,
                  run = cma ? shm::allgatherv_cma : shm::allgatherv, round_sig](const Buffers& b) {
                     return run(arena, round_sig, b.send, b.recv, equal.empty() ? b.counts : equal,
                                dtype, equal.empty());
                 }});
            if (eager)  // allgatherv decides per call (its counts come with it), in the coroutine
                s.steps.back().run = [&arena, dtype = sig.dtype, equal = std::move(equal),
                                      round_sig](const Buffers& b) {
                    shm::allgatherv_eager(arena, round_sig, b.send, b.recv, equal, dtype);
                };
            break;
        }
        case CollType::reduce_scatter:
            if (sig.count == 0) break;
            if (comm.size() == 1) {
                s.steps.push_back(local_copy(bytes));
                break;
            }
            s.steps.push_back(
                {"shm/reduce_scatter",
                 [&arena, sig, round_sig = sig.round(Algo::reduce_scatter)](const Buffers& b) {
                     return shm::reduce_scatter(arena, round_sig, b.send, b.recv, sig.count,
                                                sig.dtype, sig.op);
                 }});
            break;
        case CollType::alltoall:
        case CollType::alltoallv: {
            if (sig.coll == CollType::alltoall && sig.count == 0) break;
            if (sig.coll == CollType::alltoall &&
                size_t(comm.size()) * bytes <= shm::Arena::kLaneBytes) {
                s.steps.push_back(
                    {"shm/alltoall_lane",
                     [&arena, bytes, round_sig = sig.round(Algo::alltoall_lane)](const Buffers& b) {
                         return shm::alltoall_lane(arena, round_sig, b.send, b.recv, bytes);
                     }});
                break;
            }
            std::vector<size_t> equal;
            if (sig.coll == CollType::alltoall) equal.assign(size_t(comm.size()), sig.count);
            s.steps.push_back(
                {"shm/alltoallv", [&arena, dtype = sig.dtype, equal = std::move(equal),
                                   cma_min = comm.cma_min(), cma_max = comm.alltoall_cma_max(),
                                   round_sig = sig.round(Algo::alltoall)](const Buffers& b) {
                     const size_t n = size_t(arena.nranks());
                     const size_t* send_counts = equal.empty() ? b.counts.data() : equal.data();
                     const size_t* recv_counts = equal.empty() ? send_counts + n : equal.data();
                     return shm::alltoallv(arena, round_sig, b.send, send_counts, b.recv,
                                           recv_counts, dtype, cma_min, cma_max);
                 }});
            break;
        }
        case CollType::send:
            s.steps.push_back({"shm/send", [&box = comm.mailbox(), bytes, peer = sig.root,
                                            cma_min = comm.p2p_cma_min(),
                                            digest = sig.p2p_digest()](const Buffers& b) {
                                   return box.send(b.send, bytes, digest, peer, cma_min);
                               }});
            break;
        case CollType::recv:
            s.steps.push_back({"shm/recv", [&box = comm.mailbox(), bytes, peer = sig.root,
                                            cma_min = comm.p2p_cma_min(),
                                            digest = sig.p2p_digest()](const Buffers& b) {
                                   return box.recv(b.recv, bytes, digest, peer, cma_min);
                               }});
            break;
        case CollType::barrier: {
            if (comm.size() == 1) break;
            const shm::Signature round_sig = sig.round(Algo::barrier);
            s.steps.push_back(
                {"shm/barrier",
                 [&arena, round_sig](const Buffers&) { return shm::barrier(arena, round_sig); },
                 [&arena, round_sig](const Buffers&) { shm::barrier_now(arena, round_sig); }});
            break;
        }
    }
    return s;
}

bool fusable(Communicator& comm, const std::vector<GroupCall>& calls) {
    if (comm.multinode()) return false;  // each call runs its own hierarchical schedule
    size_t packed = 0;
    for (const GroupCall& c : calls) {
        size_t bytes = c.sig.count * dtype_size(c.sig.dtype);
        if (c.sig.coll != CollType::allreduce || bytes > comm.config().allreduce_direct_max)
            return false;
        packed += shm::packed_size(bytes);
    }
    packed += shm::packed_size(shm::fused_description_bytes(calls.size()));
    return comm.size() > 1 && packed <= comm.arena().buffer_size();
}

Schedule plan_fused_allreduce(Communicator& comm, const std::vector<GroupCall>& calls) {
    std::vector<shm::AllreducePart> parts;
    for (const GroupCall& c : calls)
        parts.push_back({c.bufs.send, c.bufs.recv, c.sig.count, c.sig.dtype, c.sig.op});
    // The round counts the parts; every rank compares the parts themselves in the round.
    CollSignature sig{CollType::allreduce, parts.size(), CCL_UINT8, CCL_SUM, 0};
    shm::Arena& arena = comm.arena();
    Schedule s{sig, {}};
    s.steps.push_back({"shm/allreduce_fused", [&arena, parts = std::move(parts),
                                               round_sig = sig.round(Algo::fused)](const Buffers&) {
                           return shm::allreduce_direct_multi(arena, round_sig, parts);
                       }});
    return s;
}

}  // namespace ccl
