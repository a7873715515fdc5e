#include "core/hierarchical.h"

#include <algorithm>
#include <cstring>

#include "core/comm.h"
#include "core/reduce.h"
#include "shm/collectives.h"
#include "transport/collectives.h"
#include "transport/fabric.h"

namespace ccl::hier {

namespace {

// Runs a nested task to its end inside the calling coroutine.
#define CCL_NESTED(expr)                    \
    do {                                    \
        Task nested_ = (expr);              \
        while (!co_await Nested{nested_}) { \
        }                                   \
    } while (0)

char* at(void* p, size_t off) { return static_cast<char*>(p) + off; }
const char* at(const void* p, size_t off) { return static_cast<const char*>(p) + off; }

// One rank per node, in node order: node k's `rank_on(k)`.
template <class F>
transport::Group group_of(const Topology& t, F rank_on) {
    transport::Group g;
    for (int k = 0; k < t.nnodes(); ++k) g.ranks.push_back(rank_on(k));
    g.me = t.node();
    return g;
}
transport::Group leaders(const Topology& t) {
    return group_of(t, [&](int k) { return t.leader(k); });
}
// The root itself on its node, the leaders elsewhere.
transport::Group reps(const Topology& t, int root) {
    return group_of(t, [&](int k) { return k == t.node_of(root) ? root : t.leader(k); });
}
int local_root(const Topology& t, int root) {
    return t.node() == t.node_of(root) ? t.local_rank_of(root) : 0;
}

// A reduction to local rank `root` of the node (the shm algorithms' choice by size).
Task local_reduce(Communicator& c, uint32_t d, const void* send, void* recv, size_t count,
                  ccl_datatype_t dtype, ccl_reduction_t op, int root) {
    if (count * dtype_size(dtype) <= c.config().allreduce_direct_max)
        return shm::reduce_direct(c.arena(), d, send, recv, count, dtype, op, root);
    return shm::reduce_split(c.arena(), d, send, recv, count, dtype, op, root);
}

// CCL_AVG: the sum over every rank, divided once by the communicator's size.
void divide(void* buf, size_t count, ccl_datatype_t dtype, int size) {
    const void* srcs[1] = {buf};
    ccl::reduce(buf, srcs, 1, count, dtype, CCL_AVG, size);
}

// Large messages with several ranks on every node: each of a node's L ranks takes a block of
// the node's sum (a reduce-scatter over shared memory), allreduces it with the ranks of the same
// local index on the other nodes (L fabric allreduces at once, each of 1/L of the data, over
// every rank's connections), and the node's ranks gather the blocks. Blocks of count / L
// elements; the last rank's also holds the count % L elements left over, reduced to it apart.
Task allreduce_by_blocks(Communicator& c, uint32_t d, const void* send, void* recv, size_t count,
                         ccl_datatype_t dtype, ccl_reduction_t op) {
    const Topology& t = c.topology();
    const int L = t.local_size(), i = t.local_rank();
    const size_t esize = dtype_size(dtype), q = count / size_t(L), rest = count % size_t(L);
    void* mine = at(recv, size_t(i) * q * esize);
    CCL_NESTED(shm::reduce_scatter(c.arena(), d, send, mine, q, dtype, op));
    if (rest > 0)
        CCL_NESTED(local_reduce(c, d, at(send, size_t(L) * q * esize),
                                at(recv, size_t(L) * q * esize), rest, dtype, op, L - 1));
    transport::Group g = group_of(t, [&](int k) { return t.ranks_of(k)[size_t(i)]; });
    CCL_NESTED(transport::allreduce(c.fabric(), g, mine, q + (i == L - 1 ? rest : 0), dtype, op));
    std::vector<size_t> counts(size_t(L), q);
    counts.back() += rest;
    CCL_NESTED(shm::allgatherv(c.arena(), d, mine, recv, counts, dtype));
}

}  // namespace

Task allreduce(Communicator& c, uint32_t d, const void* send, void* recv, size_t count,
               ccl_datatype_t dtype, ccl_reduction_t op) {
    const Topology& t = c.topology();
    const ccl_reduction_t rop = op == CCL_AVG ? CCL_SUM : op;
    const size_t bytes = count * dtype_size(dtype);
    if (t.local_size() > 1 && t.uniform() &&
        bytes >= size_t(t.local_size()) * transport::kRingMinBytes) {
        CCL_NESTED(allreduce_by_blocks(c, d, send, recv, count, dtype, rop));
    } else {  // through the node's leader
        if (t.local_size() > 1)
            CCL_NESTED(local_reduce(c, d, send, recv, count, dtype, rop, 0));
        else if (send != recv)
            std::memcpy(recv, send, bytes);
        if (t.local_rank() == 0) {
            transport::Group g = leaders(t);
            CCL_NESTED(transport::allreduce(c.fabric(), g, recv, count, dtype, rop));
        }
        if (t.local_size() > 1) CCL_NESTED(shm::broadcast(c.arena(), d, recv, bytes, 0));
    }
    if (op == CCL_AVG) divide(recv, count, dtype, c.size());
}

Task reduce(Communicator& c, uint32_t d, const void* send, void* recv, size_t count,
            ccl_datatype_t dtype, ccl_reduction_t op, int root) {
    const Topology& t = c.topology();
    const ccl_reduction_t rop = op == CCL_AVG ? CCL_SUM : op;
    const size_t bytes = count * dtype_size(dtype);
    const int lr = local_root(t, root);
    const bool rep = t.local_rank() == lr;
    const bool scratch = rep && c.rank() != root;
    transport::Fabric::Scratch tmp = c.fabric().scratch(scratch ? bytes : 0);
    void* acc = scratch ? tmp.data() : recv;  // this node's sum: the root's output, or scratch
    if (t.local_size() > 1)
        CCL_NESTED(local_reduce(c, d, send, acc, count, dtype, rop, lr));
    else if (acc != send)
        std::memcpy(acc, send, bytes);
    if (rep) {
        transport::Group g = reps(t, root);
        CCL_NESTED(transport::reduce(c.fabric(), g, acc, count, dtype, rop, t.node_of(root)));
    }
    if (c.rank() == root && op == CCL_AVG) divide(recv, count, dtype, c.size());
}

Task broadcast(Communicator& c, uint32_t d, void* buf, size_t bytes, int root) {
    const Topology& t = c.topology();
    const int lr = local_root(t, root);
    if (t.local_rank() == lr) {
        transport::Group g = reps(t, root);
        CCL_NESTED(transport::broadcast(c.fabric(), g, buf, bytes, t.node_of(root)));
    }
    if (t.local_size() > 1) CCL_NESTED(shm::broadcast(c.arena(), d, buf, bytes, lr));
}

Task barrier(Communicator& c, uint32_t d) {
    const Topology& t = c.topology();
    // Everyone on the node has arrived, the leaders meet, then they let their nodes go.
    if (t.local_size() > 1) CCL_NESTED(shm::barrier(c.arena(), d));
    if (t.local_rank() == 0) {
        transport::Group g = leaders(t);
        CCL_NESTED(transport::barrier(c.fabric(), g));
    }
    if (t.local_size() > 1) CCL_NESTED(shm::barrier(c.arena(), d));
}

Task allgatherv(Communicator& c, uint32_t d, const void* send, void* recv,
                std::vector<size_t> counts, ccl_datatype_t dtype) {
    const Topology& t = c.topology();
    const size_t esize = dtype_size(dtype);
    const std::vector<size_t> goff = shm::byte_offsets(counts.data(), counts.size(), esize);
    // The leaders exchange node packs: node k's ranks' blocks, in local order.
    std::vector<size_t> pack(size_t(t.nnodes()) + 1, 0);
    for (int k = 0; k < t.nnodes(); ++k) {
        size_t b = 0;
        for (int r : t.ranks_of(k)) b += counts[size_t(r)] * esize;
        pack[size_t(k) + 1] = pack[size_t(k)] + b;
    }
    const bool leader = t.local_rank() == 0;
    // At least a byte each: a node whose blocks are all empty still passes a valid pointer.
    const size_t node_bytes = pack[size_t(t.node()) + 1] - pack[size_t(t.node())];
    const size_t all_bytes = leader ? std::max<size_t>(1, pack.back()) : 0;
    transport::Fabric::Scratch all = c.fabric().scratch(all_bytes);
    transport::Fabric::Scratch node =
        c.fabric().scratch(leader ? 0 : std::max<size_t>(1, node_bytes));
    char* mine = leader ? all.data() + pack[size_t(t.node())] : node.data();
    if (t.local_size() > 1) {
        std::vector<size_t> local;
        for (int r : t.ranks_of(t.node())) local.push_back(counts[size_t(r)]);
        CCL_NESTED(shm::allgatherv(c.arena(), d, send, mine, local, dtype));
    } else {
        if (counts[size_t(c.rank())]) std::memcpy(mine, send, counts[size_t(c.rank())] * esize);
    }
    if (leader) {
        transport::Group g = leaders(t);
        CCL_NESTED(transport::allgatherv(c.fabric(), g, all.data(), pack));
        size_t pos = 0;
        for (int k = 0; k < t.nnodes(); ++k)
            for (int r : t.ranks_of(k)) {
                const size_t b = counts[size_t(r)] * esize;
                if (b) std::memcpy(at(recv, goff[size_t(r)]), all.data() + pos, b);
                pos += b;
            }
    }
    if (t.local_size() > 1) CCL_NESTED(shm::broadcast(c.arena(), d, recv, goff.back(), 0));
}

Task reduce_scatter(Communicator& c, uint32_t d, const void* send, void* recv, size_t count,
                    ccl_datatype_t dtype, ccl_reduction_t op) {
    const Topology& t = c.topology();
    const ccl_reduction_t rop = op == CCL_AVG ? CCL_SUM : op;
    const size_t blk = count * dtype_size(dtype);
    const size_t node_bytes = size_t(t.local_size()) * blk;
    const bool leader = t.local_rank() == 0;
    // The node's sum of everything at its leader.
    transport::Fabric::Scratch full = c.fabric().scratch(leader ? size_t(c.size()) * blk : 0);
    if (t.local_size() > 1)
        CCL_NESTED(local_reduce(c, d, send, full.data(), count * size_t(c.size()), dtype, rop, 0));
    else
        std::memcpy(full.data(), send, full.size());
    transport::Fabric::Scratch mine = c.fabric().scratch(node_bytes);
    if (leader) {
        // Leader k gets every other leader's sums of node k's blocks and adds them up.
        auto pack_for = [&](int k, char* out) {
            for (int r : t.ranks_of(k)) {
                std::memcpy(out, full.data() + size_t(r) * blk, blk);
                out += blk;
            }
        };
        const int n = t.nnodes(), me = t.node();
        std::vector<transport::Fabric::Scratch> in, out;  // by node (none for this one)
        for (int k = 0; k < n; ++k) {
            in.push_back(c.fabric().scratch(k == me ? 0 : node_bytes));
            out.push_back(c.fabric().scratch(k == me ? 0 : t.ranks_of(k).size() * blk));
        }
        std::vector<transport::Fabric::OpRef> ops;
        for (int k = 0; k < n; ++k) {
            if (k == me) continue;
            ops.push_back(c.fabric().post_recv(t.leader(k), transport::Channel::coll,
                                               in[size_t(k)].data(), node_bytes));
        }
        for (int i = 1; i < n; ++i) {
            const int k = (me + i) % n;
            pack_for(k, out[size_t(k)].data());
            ops.push_back(c.fabric().post_send(t.leader(k), transport::Channel::coll,
                                               out[size_t(k)].data(), out[size_t(k)].size()));
        }
        for (auto& o : ops) co_await c.fabric().done(o);
        pack_for(me, mine.data());
        std::vector<const void*> srcs;
        for (int k = 0; k < n; ++k) srcs.push_back(k == me ? mine.data() : in[size_t(k)].data());
        if (count)
            ccl::reduce(mine.data(), srcs.data(), n, count * size_t(t.local_size()), dtype, rop, 1);
    }
    if (t.local_size() > 1) CCL_NESTED(shm::broadcast(c.arena(), d, mine.data(), node_bytes, 0));
    std::memcpy(recv, mine.data() + size_t(t.local_rank()) * blk, blk);
    if (op == CCL_AVG) divide(recv, count, dtype, c.size());
}

namespace {

// The blocks between a node's ranks, over shared memory. Where the node's ranks are consecutive
// (the usual placement) so are their blocks, and the shm algorithm works on them where they are;
// otherwise they are packed in local order first and unpacked after.
Task local_alltoallv(Communicator& c, uint32_t d, const void* send, const size_t* soff,
                     const std::vector<size_t>& sendcounts, void* recv, const size_t* roff,
                     const std::vector<size_t>& recvcounts, ccl_datatype_t dtype) {
    const Topology& t = c.topology();
    const std::vector<int>& local = t.ranks_of(t.node());
    const size_t L = local.size(), f = size_t(local[0]), esize = dtype_size(dtype);
    bool consecutive = true;
    for (size_t i = 0; i < L; ++i) consecutive = consecutive && size_t(local[i]) == f + i;
    if (consecutive) {
        CCL_NESTED(shm::alltoallv(c.arena(), d, at(send, soff[f]), sendcounts.data() + f,
                                  at(recv, roff[f]), recvcounts.data() + f, dtype,
                                  c.single_copy()));
        co_return;
    }
    std::vector<size_t> sc(L), rc(L);
    size_t sbytes = 0, rbytes = 0;
    for (size_t i = 0; i < L; ++i) {
        sc[i] = sendcounts[size_t(local[i])];
        rc[i] = recvcounts[size_t(local[i])];
        sbytes += sc[i] * esize;
        rbytes += rc[i] * esize;
    }
    transport::Fabric::Scratch in = c.fabric().scratch(sbytes), out = c.fabric().scratch(rbytes);
    for (size_t i = 0, off = 0; i < L; off += sc[i++] * esize)
        std::memcpy(in.data() + off, at(send, soff[size_t(local[i])]), sc[i] * esize);
    CCL_NESTED(shm::alltoallv(c.arena(), d, in.data(), sc.data(), out.data(), rc.data(), dtype,
                              c.single_copy()));
    for (size_t i = 0, off = 0; i < L; off += rc[i++] * esize)
        std::memcpy(at(recv, roff[size_t(local[i])]), out.data() + off, rc[i] * esize);
}

}  // namespace

Task alltoallv(Communicator& c, uint32_t d, const void* send, std::vector<size_t> sendcounts,
               void* recv, std::vector<size_t> recvcounts, ccl_datatype_t dtype) {
    const Topology& t = c.topology();
    const size_t esize = dtype_size(dtype), n = size_t(c.size()), me = size_t(c.rank());
    const auto soff = shm::byte_offsets(sendcounts.data(), n, esize);
    const auto roff = shm::byte_offsets(recvcounts.data(), n, esize);
    transport::Fabric& f = c.fabric();
    // In place: the blocks to send are copied out first (the receives overwrite them).
    transport::Fabric::Scratch copy = f.scratch(send == recv ? soff[n] : 0);
    if (send == recv) {
        if (soff[n]) std::memcpy(copy.data(), send, soff[n]);
        send = copy.data();
    }
    if (sendcounts[me] != recvcounts[me])
        throw Error(CCL_ERROR_INVALID_USAGE, "alltoallv: rank " + std::to_string(me) +
                                                 " sends itself " + std::to_string(sendcounts[me]) +
                                                 " elements but expects " +
                                                 std::to_string(recvcounts[me]));
    // Ranks on other nodes over the fabric, posted first so that they move while the node's
    // ranks exchange theirs over shared memory.
    const bool on_node = t.local_size() > 1;
    auto remote = [&](size_t j) { return on_node ? t.node_of(int(j)) != t.node() : j != me; };
    std::vector<transport::Fabric::OpRef> ops;
    for (size_t j = 0; j < n; ++j)
        if (remote(j))
            ops.push_back(f.post_recv(int(j), transport::Channel::coll, at(recv, roff[j]),
                                      recvcounts[j] * esize));
    // Staggered, so that not every rank sends to rank 0 first.
    for (size_t i = 1; i < n; ++i) {
        const size_t j = (me + i) % n;
        if (remote(j))
            ops.push_back(f.post_send(int(j), transport::Channel::coll, at(send, soff[j]),
                                      sendcounts[j] * esize));
    }
    if (on_node)
        CCL_NESTED(local_alltoallv(c, d, send, soff.data(), sendcounts, recv, roff.data(),
                                   recvcounts, dtype));
    else if (sendcounts[me])
        std::memmove(at(recv, roff[me]), at(send, soff[me]), sendcounts[me] * esize);
    for (auto& o : ops) co_await f.done(o);
}

// A point-to-point message is one tagged message straight into the receive's buffer, carrying
// the call's digest (count and datatype) as remote CQ data, so that a receive that expects
// another is refused as over shared memory. A message of another length fails the receive (a
// longer one is truncated by the provider: FI_ETRUNC); its buffer's contents are then undefined.
Task send(Communicator& c, uint32_t digest, const void* buf, size_t bytes, int peer) {
    // Copied: the caller may reuse its buffer at once, and the send completes in the background.
    auto op = c.fabric().send_message(peer, buf, bytes, digest);
    co_return;
}

Task recv(Communicator& c, uint32_t digest, void* buf, size_t bytes, int peer) {
    transport::Fabric& f = c.fabric();
    auto op = f.post_recv(peer, transport::Channel::p2p, buf, bytes);
    co_await f.done(op);
    if (op.data() != digest)
        throw Error(CCL_ERROR_INVALID_USAGE,
                    "the message from rank " + std::to_string(peer) +
                        " was sent with another datatype than its receive expects (the message "
                        "is dropped)");
}

}  // namespace ccl::hier
