#include "core/planner.h"

#include <algorithm>
#include <cstring>

#include "base/config.h"
#include "base/error.h"
#include "base/reduce.h"
#include "core/comm.h"
#include "core/tuning.h"
#include "shm/collectives.h"

namespace ccl {

namespace {

Step local_copy(size_t bytes) {
    return {"local_copy", [bytes](const Buffers& b) -> Task {
                if (b.send != b.recv) std::memcpy(b.recv, b.send, bytes);
                co_return;
            }};
}

// The eager forms: the same algorithm and rounds run as a plain function that blocks in its waits,
// for a blocking call of at most one eager slot (shm::Arena::kEagerBytes).
bool eager(size_t bytes) { return bytes <= shm::Arena::kEagerBytes; }

}  // namespace

Step mailbox_step(shm::Mailbox& box, const CollSignature& sig, int peer, size_t cma_min) {
    const size_t bytes = sig.count * dtype_size(sig.dtype);
    const uint32_t digest = sig.p2p_digest();
    if (sig.coll == CollType::send)
        return {"shm/send", [&box, bytes, peer, cma_min, digest](const Buffers& b) {
                    return box.send(b.send, bytes, digest, peer, cma_min);
                }};
    return {"shm/recv", [&box, bytes, peer, cma_min, digest](const Buffers& b) {
                return box.recv(b.recv, bytes, digest, peer, cma_min, b.source);
            }};
}

Schedule plan(Communicator& comm, const CollSignature& sig) {
    const size_t bytes = sig.count * dtype_size(sig.dtype);
    const Algo algo = tuning::choose(sig.coll, bytes, comm.shape(), comm.config());
    if (comm.multinode()) return plan_multinode(comm, sig, algo);
    Schedule s{sig, {}};
    shm::Arena& arena = comm.arena();
    const shm::Signature round_sig = sig.round(algo);
    switch (algo) {
        case Algo::none: break;
        case Algo::local_copy: s.steps.push_back(local_copy(bytes)); break;
        case Algo::direct:
            s.steps.push_back({"shm/allreduce_direct", [&arena, sig, round_sig](const Buffers& b) {
                                   return shm::allreduce_direct(arena, round_sig, b.send, b.recv,
                                                                sig.count, sig.dtype, sig.op);
                               }});
            if (eager(bytes))
                s.steps.back().run = [&arena, sig, round_sig](const Buffers& b) {
                    shm::allreduce_eager(arena, round_sig, b.send, b.recv, sig.count, sig.dtype,
                                         sig.op);
                };
            break;
        case Algo::allreduce_cma:
            s.steps.push_back({"shm/allreduce_cma", [&arena, sig, round_sig](const Buffers& b) {
                                   return shm::allreduce_cma(arena, round_sig, b.send, b.recv,
                                                             sig.count, sig.dtype, sig.op);
                               }});
            break;
        case Algo::rsag:
            s.steps.push_back({"shm/allreduce_rsag", [&arena, sig, round_sig](const Buffers& b) {
                                   return shm::allreduce_rsag(arena, round_sig, b.send, b.recv,
                                                              sig.count, sig.dtype, sig.op);
                               }});
            break;
        case Algo::reduce_direct:
            s.steps.push_back({"shm/reduce_direct", [&arena, sig, round_sig](const Buffers& b) {
                                   return shm::reduce_direct(arena, round_sig, b.send, b.recv,
                                                             sig.count, sig.dtype, sig.op,
                                                             sig.root);
                               }});
            if (eager(bytes))
                s.steps.back().run = [&arena, sig, round_sig](const Buffers& b) {
                    shm::reduce_eager(arena, round_sig, b.send, b.recv, sig.count, sig.dtype,
                                      sig.op, sig.root);
                };
            break;
        case Algo::reduce_cma:
            s.steps.push_back({"shm/reduce_cma", [&arena, sig, round_sig](const Buffers& b) {
                                   return shm::reduce_cma(arena, round_sig, b.send, b.recv,
                                                          sig.count, sig.dtype, sig.op, sig.root);
                               }});
            break;
        case Algo::reduce_split:
            s.steps.push_back({"shm/reduce_split", [&arena, sig, round_sig](const Buffers& b) {
                                   return shm::reduce_split(arena, round_sig, b.send, b.recv,
                                                            sig.count, sig.dtype, sig.op, sig.root);
                               }});
            break;
        case Algo::broadcast_cma:
            s.steps.push_back({"shm/broadcast_cma",
                               [&arena, bytes, root = sig.root, round_sig](const Buffers& b) {
                                   return shm::broadcast_cma(arena, round_sig, b.recv, bytes, root);
                               }});
            break;
        case Algo::broadcast:
            s.steps.push_back(
                {"shm/broadcast", [&arena, bytes, root = sig.root, round_sig](const Buffers& b) {
                     return shm::broadcast(arena, round_sig, b.recv, bytes, root);
                 }});
            if (eager(bytes))
                s.steps.back().run = [&arena, bytes, root = sig.root, round_sig](const Buffers& b) {
                    shm::broadcast_eager(arena, round_sig, b.recv, bytes, root);
                };
            break;
        case Algo::allgather:
        case Algo::allgather_cma: {
            // allgather's counts are all the same: kept in the step, not passed with each call.
            std::vector<size_t> equal;
            if (sig.coll == CollType::allgather) equal.assign(size_t(comm.size()), sig.count);
            const bool cma = algo == Algo::allgather_cma;
            s.steps.push_back(
                {cma ? "shm/allgatherv_cma" : "shm/allgatherv",
                 [&arena, dtype = sig.dtype, equal,
                  run = cma ? shm::allgatherv_cma : shm::allgatherv, round_sig](const Buffers& b) {
                     return run(arena, round_sig, b.send, b.recv, equal.empty() ? b.counts : equal,
                                dtype, equal.empty());
                 }});
            // allgatherv decides per call (its counts come with it), in the coroutine.
            if (!equal.empty() && eager(bytes))
                s.steps.back().run = [&arena, dtype = sig.dtype, equal = std::move(equal),
                                      round_sig](const Buffers& b) {
                    shm::allgatherv_eager(arena, round_sig, b.send, b.recv, equal, dtype);
                };
            break;
        }
        case Algo::reduce_scatter:
            s.steps.push_back({"shm/reduce_scatter", [&arena, sig, round_sig](const Buffers& b) {
                                   return shm::reduce_scatter(arena, round_sig, b.send, b.recv,
                                                              sig.count, sig.dtype, sig.op);
                               }});
            break;
        case Algo::reduce_scatter_cma:
            s.steps.push_back(
                {"shm/reduce_scatter_cma", [&arena, sig, round_sig](const Buffers& b) {
                     return shm::reduce_scatter_cma(arena, round_sig, b.send, b.recv, sig.count,
                                                    sig.dtype, sig.op);
                 }});
            break;
        case Algo::alltoall_lane:
            s.steps.push_back({"shm/alltoall_lane", [&arena, bytes, round_sig](const Buffers& b) {
                                   return shm::alltoall_lane(arena, round_sig, b.send, b.recv,
                                                             bytes);
                               }});
            break;
        case Algo::alltoall: {
            std::vector<size_t> equal;
            if (sig.coll == CollType::alltoall) equal.assign(size_t(comm.size()), sig.count);
            s.steps.push_back(
                {"shm/alltoallv",
                 [&arena, dtype = sig.dtype, equal = std::move(equal),
                  cma_min = comm.shape().copy.min, cma_max = comm.shape().copy.alltoall_max,
                  round_sig](const Buffers& b) {
                     const size_t n = size_t(arena.nranks());
                     const size_t* send_counts = equal.empty() ? b.counts.data() : equal.data();
                     const size_t* recv_counts = equal.empty() ? send_counts + n : equal.data();
                     return shm::alltoallv(arena, round_sig, b.send, send_counts, b.recv,
                                           recv_counts, dtype, cma_min, cma_max);
                 }});
            break;
        }
        case Algo::p2p:
            s.steps.push_back(
                mailbox_step(comm.mailbox(), sig, sig.root, comm.shape().copy.p2p_min));
            break;
        case Algo::barrier:
            s.steps.push_back(
                {"shm/barrier",
                 [&arena, round_sig](const Buffers&) { return shm::barrier(arena, round_sig); },
                 [&arena, round_sig](const Buffers&) { shm::barrier_now(arena, round_sig); }});
            break;
        default:
            throw Error(CCL_ERROR_INTERNAL,
                        std::string("no single-node plan for ") + algo_name(algo));
    }
    return s;
}

bool fusable(Communicator& comm, const std::vector<GroupCall>& calls) {
    if (comm.multinode()) return false;  // each call runs its own hierarchical schedule
    size_t packed = 0;
    for (const GroupCall& c : calls) {
        size_t bytes = c.sig.count * dtype_size(c.sig.dtype);
        if (c.sig.coll != CollType::allreduce || !tuning::fuses(bytes, comm.config())) return false;
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
