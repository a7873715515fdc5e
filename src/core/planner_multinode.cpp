// The planner's part for communicators across nodes: one hierarchical step per call
// (core/hierarchical.h), as core/tuning chose it.
#include <cstring>

#include "base/error.h"
#include "base/reduce.h"
#include "core/comm.h"
#include "core/hierarchical.h"
#include "core/planner.h"
#include "shm/collectives.h"

namespace ccl {

Schedule plan_multinode(Communicator& comm, const CollSignature& sig, Algo algo) {
    Schedule s{sig, {}};
    Communicator& c = comm;
    const size_t bytes = sig.count * dtype_size(sig.dtype);
    const Topology& t = comm.topology();
    switch (algo) {
        case Algo::none: break;
        case Algo::hier_allreduce:
            s.steps.push_back({"hier/allreduce",
                               [&c, sig, d = sig.round(Algo::hier_allreduce)](const Buffers& b) {
                                   return hier::allreduce(c, d, b.send, b.recv, sig.count,
                                                          sig.dtype, sig.op);
                               }});
            break;
        case Algo::hier_broadcast:
            s.steps.push_back(
                {"hier/broadcast",
                 [&c, bytes, root = sig.root, d = sig.round(Algo::hier_broadcast)](
                     const Buffers& b) { return hier::broadcast(c, d, b.recv, bytes, root); }});
            break;
        case Algo::hier_reduce:
            s.steps.push_back(
                {"hier/reduce", [&c, sig, d = sig.round(Algo::hier_reduce)](const Buffers& b) {
                     return hier::reduce(c, d, b.send, b.recv, sig.count, sig.dtype, sig.op,
                                         sig.root);
                 }});
            break;
        case Algo::hier_allgather: {
            std::vector<size_t> equal;
            if (sig.coll == CollType::allgather) equal.assign(size_t(comm.size()), sig.count);
            s.steps.push_back(
                {"hier/allgatherv", [&c, dtype = sig.dtype, equal = std::move(equal),
                                     d = sig.round(Algo::hier_allgather)](const Buffers& b) {
                     return hier::allgatherv(c, d, b.send, b.recv, equal.empty() ? b.counts : equal,
                                             dtype);
                 }});
            break;
        }
        case Algo::hier_reduce_scatter:
            s.steps.push_back(
                {"hier/reduce_scatter",
                 [&c, sig, d = sig.round(Algo::hier_reduce_scatter)](const Buffers& b) {
                     return hier::reduce_scatter(c, d, b.send, b.recv, sig.count, sig.dtype,
                                                 sig.op);
                 }});
            break;
        case Algo::hier_alltoall: {
            const size_t n = size_t(comm.size());
            std::vector<size_t> equal;
            if (sig.coll == CollType::alltoall) equal.assign(n, sig.count);
            s.steps.push_back(
                {"hier/alltoallv", [&c, n, dtype = sig.dtype, equal = std::move(equal),
                                    d = sig.round(Algo::hier_alltoall)](const Buffers& b) {
                     std::vector<size_t> sc = equal, rc = equal;
                     if (equal.empty()) {
                         sc.assign(b.counts.begin(), b.counts.begin() + long(n));
                         rc.assign(b.counts.begin() + long(n), b.counts.begin() + long(2 * n));
                     }
                     return hier::alltoallv(c, d, b.send, std::move(sc), b.recv, std::move(rc),
                                            dtype);
                 }});
            break;
        }
        case Algo::p2p: {
            const int peer = sig.root;
            const bool is_send = sig.coll == CollType::send;
            const uint32_t digest = sig.p2p_digest();
            if (peer == CollSignature::kAnySource)
                throw Error(CCL_ERROR_UNSUPPORTED,
                            "a receive from any rank is not supported on a communicator whose "
                            "ranks span nodes (name the peer)");
            if (t.node_of(peer) == t.node()) {  // a co-located peer: the node's mailbox
                s.steps.push_back(mailbox_step(comm.mailbox(), sig, t.local_rank_of(peer),
                                               comm.shape().copy.p2p_min));
                break;
            }
            if (sig.tag != 0)
                throw Error(CCL_ERROR_UNSUPPORTED,
                            "tagged messages (tag " + std::to_string(sig.tag) +
                                ") to and from "
                                "ranks on other nodes are not supported (rank " +
                                std::to_string(peer) + " is on another node): use tag 0");
            if (is_send)
                s.steps.push_back({"ofi/send", [&c, digest, bytes, peer](const Buffers& b) {
                                       return hier::send(c, digest, b.send, bytes, peer);
                                   }});
            else
                s.steps.push_back({"ofi/recv", [&c, digest, bytes, peer](const Buffers& b) {
                                       return hier::recv(c, digest, b.recv, bytes, peer);
                                   }});
            break;
        }
        case Algo::hier_barrier:
            s.steps.push_back(
                {"hier/barrier", [&c, d = sig.round(Algo::hier_barrier)](const Buffers&) {
                     return hier::barrier(c, d);
                 }});
            break;
        default:
            throw Error(CCL_ERROR_INTERNAL,
                        std::string("no plan across nodes for ") + algo_name(algo));
    }
    return s;
}

}  // namespace ccl
