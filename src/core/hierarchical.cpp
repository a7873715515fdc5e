#include "core/hierarchical.h"

#include <algorithm>
#include <cstring>

#include "base/reduce.h"
#include "core/comm.h"
#include "core/planner.h"
#include "core/tuning.h"
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
// This rank's counterparts: the rank of its local index on every node (nodes of equal size).
transport::Group counterparts(const Topology& t) {
    return group_of(t, [&](int k) { return t.ranks_of(k)[size_t(t.local_rank())]; });
}
int local_root(const Topology& t, int root) {
    return t.node() == t.node_of(root) ? t.local_rank_of(root) : 0;
}

// Whether a collective runs by blocks, every rank on the fabric with its counterparts: nodes of
// equal size with several ranks, and each rank's share over the fabric at least the ring's size.
bool by_blocks(const Topology& t, size_t share_bytes) {
    return t.local_size() > 1 && t.uniform() && share_bytes >= transport::kRingMinBytes;
}

Task nothing() { co_return; }
Task copy(const void* send, void* recv, size_t bytes) {
    if (bytes && send != recv) std::memcpy(recv, send, bytes);
    co_return;
}

// A reduction to local rank `root` of the node, as a node's reduce through the arena would choose
// (core/tuning); on a node of one rank, the copy to recv.
Task local_reduce(Communicator& c, shm::Signature d, const void* send, void* recv, size_t count,
                  ccl_datatype_t dtype, ccl_reduction_t op, int root) {
    const int local = c.topology().local_size();
    const size_t bytes = count * dtype_size(dtype);
    if (local == 1) return copy(send, recv, bytes);
    const tuning::Shape node{local, local, c.arena().buffer_size(), false, {}};
    if (tuning::choose(CollType::reduce, bytes, node, c.config()) == Algo::reduce_split)
        return shm::reduce_split(c.arena(), d, send, recv, count, dtype, op, root);
    return shm::reduce_direct(c.arena(), d, send, recv, count, dtype, op, root);
}

// A broadcast from local rank `root` of the node; nothing on a node of one rank.
Task local_broadcast(Communicator& c, shm::Signature d, void* buf, size_t bytes, int root) {
    if (c.topology().local_size() == 1) return nothing();
    return shm::broadcast(c.arena(), d, buf, bytes, root);
}

// CCL_AVG: the sum over every rank, divided once by the communicator's size.
void divide(void* buf, size_t count, ccl_datatype_t dtype, int size) {
    const void* srcs[1] = {buf};
    ccl::reduce(buf, srcs, 1, count, dtype, CCL_AVG, size);
}

// A piece of a call: `count` elements at `send` / `recv` (either may be null where the call
// has no such buffer on this rank).
struct Piece {
    const void* send;
    void* recv;
    size_t count;
};

// The call in pieces of about CCL_FABRIC_PIPELINE_CHUNK bytes, equal but for the last, each a
// multiple of `unit` elements but the last; always at least one. With one rank on every node
// there is no node's part to overlap: one piece.
std::vector<Piece> pieces_of(const Communicator& c, const void* send, void* recv, size_t count,
                             size_t esize, size_t unit) {
    const Topology& t = c.topology();
    const size_t chunk =
        t.local_size() == 1 && t.uniform() ? SIZE_MAX : c.config().fabric_pipeline_chunk;
    const size_t bytes = count * esize,
                 n = std::max<size_t>(1, bytes / chunk + (bytes % chunk != 0));
    const size_t per = std::max<size_t>(1, ((count + n - 1) / n + unit - 1) / unit) * unit;
    auto off = [esize](auto* p, size_t first) { return p ? at(p, first * esize) : nullptr; };
    std::vector<Piece> pieces;
    for (size_t first = 0; first < count || pieces.empty(); first += per)
        pieces.push_back({off(send, first), off(recv, first), std::min(per, count - first)});
    return pieces;
}

// How a collective crosses the levels, per piece of the call: the node's part before the
// fabric's (`in`), the fabric's (`across`) and the node's part after (`out`). The tasks may
// refer to the object (it outlives them), not to anything else of the call that makes them.
struct Levels {
    virtual Task in(const Piece&) const { return nothing(); }
    virtual Task across(const Piece&) const = 0;
    virtual Task out(const Piece&) const { return nothing(); }

protected:
    ~Levels() = default;
};

Task node_between(const Levels& lv, const Piece* before, const Piece* after) {
    if (before) CCL_NESTED(lv.out(*before));
    if (after) CCL_NESTED(lv.in(*after));
}

// Pipelined: while piece k crosses the fabric, the node finishes piece k - 1 and starts piece
// k + 1 (one thread runs both, each going on whenever its wait is met). Every rank of a node
// runs the node's parts in the same order, and every rank the same pieces (by value: the frame
// keeps them).
Task pipelined(const Levels& lv, std::vector<Piece> pieces) {
    CCL_NESTED(lv.in(pieces.front()));
    if (pieces.size() == 1) {
        CCL_NESTED(lv.across(pieces.front()));
    } else {
        for (size_t k = 0; k < pieces.size(); ++k)
            CCL_NESTED(together(lv.across(pieces[k]),
                                node_between(lv, k > 0 ? &pieces[k - 1] : nullptr,
                                             k + 1 < pieces.size() ? &pieces[k + 1] : nullptr)));
    }
    CCL_NESTED(lv.out(pieces.back()));
}

// ---- allreduce ----

// With L ranks on every node and large messages, local rank k owns block k of each piece:
// count / L elements, the last block also holding the count % L left over.
size_t block_first(const Piece& p, int L, int k) { return size_t(k) * (p.count / size_t(L)); }
size_t block_count(const Piece& p, int L, int k) {
    return p.count / size_t(L) + (k == L - 1 ? p.count % size_t(L) : 0);
}

// The node's sum of this rank's block, into its place in recv (a reduce-scatter over shared
// memory; the left-over elements reduced to the last rank apart).
Task node_reduce_scatter(Communicator& c, shm::Signature d, Piece p, ccl_datatype_t dtype,
                         ccl_reduction_t op) {
    const int L = c.topology().local_size(), i = c.topology().local_rank();
    const size_t esize = dtype_size(dtype), q = p.count / size_t(L), rest = p.count % size_t(L);
    CCL_NESTED(shm::reduce_scatter(c.arena(), d, p.send, at(p.recv, block_first(p, L, i) * esize),
                                   q, dtype, op));
    if (rest > 0)
        CCL_NESTED(local_reduce(c, d, at(p.send, size_t(L) * q * esize),
                                at(p.recv, size_t(L) * q * esize), rest, dtype, op, L - 1));
}

// This rank's block allreduced with the ranks of its local index on the other nodes.
Task block_across(Communicator& c, Piece p, ccl_datatype_t dtype, ccl_reduction_t op) {
    const int L = c.topology().local_size(), i = c.topology().local_rank();
    const transport::Group g = counterparts(c.topology());
    CCL_NESTED(transport::allreduce(c.fabric(), g,
                                    at(p.recv, block_first(p, L, i) * dtype_size(dtype)),
                                    block_count(p, L, i), dtype, op));
}

// Every rank of the node gathers the node's blocks (reduced over every node) into recv.
Task node_allgather(Communicator& c, shm::Signature d, Piece p, ccl_datatype_t dtype) {
    const int L = c.topology().local_size(), i = c.topology().local_rank();
    std::vector<size_t> counts;
    for (int k = 0; k < L; ++k) counts.push_back(block_count(p, L, k));
    CCL_NESTED(shm::allgatherv(c.arena(), d, at(p.recv, block_first(p, L, i) * dtype_size(dtype)),
                               p.recv, counts, dtype, false));
}

// The node's leader allreduces the piece with the other nodes' leaders.
Task leader_across(Communicator& c, Piece p, ccl_datatype_t dtype, ccl_reduction_t op) {
    if (c.topology().local_rank() != 0) co_return;
    const transport::Group g = leaders(c.topology());
    CCL_NESTED(transport::allreduce(c.fabric(), g, p.recv, p.count, dtype, op));
}

// By blocks (L ranks on every node, large messages): every rank on the fabric with 1/L of the
// piece. Otherwise through the node's leader: a reduce to it, its allreduce with the other
// leaders, a broadcast from it.
struct AllreduceLevels final : Levels {
    Communicator& c;
    shm::Signature d;
    ccl_datatype_t dtype;
    ccl_reduction_t op;
    bool by_blocks;

    AllreduceLevels(Communicator& c, shm::Signature d, ccl_datatype_t dtype, ccl_reduction_t op,
                    bool by_blocks)
        : c(c), d(d), dtype(dtype), op(op), by_blocks(by_blocks) {}
    Task in(const Piece& p) const override {
        if (by_blocks) return node_reduce_scatter(c, d, p, dtype, op);
        return local_reduce(c, d, p.send, p.recv, p.count, dtype, op, 0);
    }
    Task across(const Piece& p) const override {
        return by_blocks ? block_across(c, p, dtype, op) : leader_across(c, p, dtype, op);
    }
    Task out(const Piece& p) const override {
        if (by_blocks) return node_allgather(c, d, p, dtype);
        return local_broadcast(c, d, p.recv, p.count * dtype_size(dtype), 0);
    }
};

// ---- reduce and broadcast: a tree between the nodes' representatives (the root on its node,
// the leaders elsewhere) ----

Task reduce_across(Communicator& c, Piece p, ccl_datatype_t dtype, ccl_reduction_t op, int root) {
    const transport::Group g = reps(c.topology(), root);
    CCL_NESTED(
        transport::reduce(c.fabric(), g, p.recv, p.count, dtype, op, c.topology().node_of(root)));
}

Task broadcast_across(Communicator& c, Piece p, int root) {
    const transport::Group g = reps(c.topology(), root);
    CCL_NESTED(transport::broadcast(c.fabric(), g, p.recv, p.count, c.topology().node_of(root)));
}

// A piece's `recv` is the node's sum (the root's output, or scratch on other representatives).
struct ReduceLevels final : Levels {
    Communicator& c;
    shm::Signature d;
    ccl_datatype_t dtype;
    ccl_reduction_t op;
    int root;

    ReduceLevels(Communicator& c, shm::Signature d, ccl_datatype_t dtype, ccl_reduction_t op,
                 int root)
        : c(c), d(d), dtype(dtype), op(op), root(root) {}
    bool rep() const { return c.topology().local_rank() == local_root(c.topology(), root); }
    Task in(const Piece& p) const override {
        return local_reduce(c, d, p.send, p.recv, p.count, dtype, op,
                            local_root(c.topology(), root));
    }
    Task across(const Piece& p) const override {
        return rep() ? reduce_across(c, p, dtype, op, root) : nothing();
    }
};

// Pieces of bytes.
struct BroadcastLevels final : Levels {
    Communicator& c;
    shm::Signature d;
    int root;

    BroadcastLevels(Communicator& c, shm::Signature d, int root) : c(c), d(d), root(root) {}
    int lr() const { return local_root(c.topology(), root); }
    Task across(const Piece& p) const override {
        return c.topology().local_rank() == lr() ? broadcast_across(c, p, root) : nothing();
    }
    Task out(const Piece& p) const override { return local_broadcast(c, d, p.recv, p.count, lr()); }
};

}  // namespace

Task allreduce(Communicator& c, shm::Signature d, const void* send, void* recv, size_t count,
               ccl_datatype_t dtype, ccl_reduction_t op) {
    const Topology& t = c.topology();
    const ccl_reduction_t rop = op == CCL_AVG ? CCL_SUM : op;
    const size_t esize = dtype_size(dtype), L = size_t(t.local_size());
    const bool blocks = by_blocks(t, count * esize / L);
    const AllreduceLevels lv(c, d, dtype, rop, blocks);
    CCL_NESTED(pipelined(lv, pieces_of(c, send, recv, count, esize, blocks ? L : 1)));
    if (op == CCL_AVG) divide(recv, count, dtype, c.size());
}

Task reduce(Communicator& c, shm::Signature d, const void* send, void* recv, size_t count,
            ccl_datatype_t dtype, ccl_reduction_t op, int root) {
    const Topology& t = c.topology();
    const ccl_reduction_t rop = op == CCL_AVG ? CCL_SUM : op;
    const size_t esize = dtype_size(dtype);
    const bool scratch = t.local_rank() == local_root(t, root) && c.rank() != root;
    transport::Fabric::Scratch tmp = c.fabric().scratch(scratch ? count * esize : 0);
    void* acc = scratch ? tmp.data() : recv;  // this node's sum: the root's output, or scratch
    const ReduceLevels lv(c, d, dtype, rop, root);
    CCL_NESTED(pipelined(lv, pieces_of(c, send, acc, count, esize, 1)));
    if (c.rank() == root && op == CCL_AVG) divide(recv, count, dtype, c.size());
}

Task broadcast(Communicator& c, shm::Signature d, void* buf, size_t bytes, int root) {
    const BroadcastLevels lv(c, d, root);
    CCL_NESTED(pipelined(lv, pieces_of(c, buf, buf, bytes, 1, 1)));
}

Task barrier(Communicator& c, shm::Signature d) {
    const Topology& t = c.topology();
    // Everyone on the node has arrived, the leaders meet, then they let their nodes go.
    if (t.local_size() > 1) CCL_NESTED(shm::barrier(c.arena(), d));
    if (t.local_rank() == 0) {
        transport::Group g = leaders(t);
        CCL_NESTED(transport::barrier(c.fabric(), g));
    }
    if (t.local_size() > 1) CCL_NESTED(shm::barrier(c.arena(), d));
}

namespace {

// Large messages with L ranks on every node: rank i first gathers, over the fabric, the blocks of
// every node's rank i (L ring allgathers at once, each rank on its own connections), then the
// node's ranks gather those groups over shared memory, and each puts the blocks in rank order.
Task allgatherv_by_blocks(Communicator& c, shm::Signature d, const void* send, void* recv,
                          const std::vector<size_t>& counts, const std::vector<size_t>& goff,
                          ccl_datatype_t dtype) {
    const Topology& t = c.topology();
    const int L = t.local_size(), i = t.local_rank(), n = t.nnodes();
    const size_t esize = dtype_size(dtype);
    // Group j: every node's rank j, in node order; offs[j]: its blocks' byte offsets in the
    // group, start[j]: the group's place among the node's groups.
    std::vector<std::vector<size_t>> offs(size_t(L), std::vector<size_t>(size_t(n) + 1, 0));
    std::vector<size_t> start(size_t(L) + 1, 0), group_counts;
    for (int j = 0; j < L; ++j) {
        auto& a = offs[size_t(j)];
        for (int k = 0; k < n; ++k)
            a[size_t(k) + 1] = a[size_t(k)] + counts[size_t(t.ranks_of(k)[size_t(j)])] * esize;
        start[size_t(j) + 1] = start[size_t(j)] + a.back();
        group_counts.push_back(a.back() / esize);
    }
    transport::Fabric::Scratch mine =
        c.fabric().scratch(std::max<size_t>(1, offs[size_t(i)].back()));
    transport::Fabric::Scratch all = c.fabric().scratch(std::max<size_t>(1, start.back()));
    if (counts[size_t(c.rank())])
        std::memcpy(mine.data() + offs[size_t(i)][size_t(t.node())], send,
                    counts[size_t(c.rank())] * esize);
    const transport::Group g = counterparts(t);
    CCL_NESTED(transport::allgatherv(c.fabric(), g, mine.data(), offs[size_t(i)]));
    CCL_NESTED(shm::allgatherv(c.arena(), d, mine.data(), all.data(), group_counts, dtype, true));
    for (int j = 0; j < L; ++j)
        for (int k = 0; k < n; ++k) {
            const int r = t.ranks_of(k)[size_t(j)];
            const size_t b = counts[size_t(r)] * esize;
            if (b)
                std::memcpy(at(recv, goff[size_t(r)]),
                            all.data() + start[size_t(j)] + offs[size_t(j)][size_t(k)], b);
        }
}

}  // namespace

Task allgatherv(Communicator& c, shm::Signature d, const void* send, void* recv,
                std::vector<size_t> counts, ccl_datatype_t dtype) {
    const Topology& t = c.topology();
    const size_t esize = dtype_size(dtype);
    const std::vector<size_t> goff = shm::byte_offsets(counts.data(), counts.size(), esize);
    if (by_blocks(t, goff.back() / size_t(t.local_size()))) {
        CCL_NESTED(allgatherv_by_blocks(c, d, send, recv, counts, goff, dtype));
        co_return;
    }
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
        CCL_NESTED(shm::allgatherv(c.arena(), d, send, mine, local, dtype, true));
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
    CCL_NESTED(local_broadcast(c, d, recv, goff.back(), 0));
}

namespace {

// Large blocks with L ranks on every node: local rank i reduce-scatters, over shared memory, the
// node's send buffers packed by local index so that it gets the node's sums of every node's
// rank-i block; the ranks of local index i then swap those over the fabric (L exchanges at once,
// every rank on its own connections) and each adds up its own. Nobody gathers everything and no
// broadcast follows.
Task reduce_scatter_by_blocks(Communicator& c, shm::Signature d, const void* send, void* recv,
                              size_t count, ccl_datatype_t dtype, ccl_reduction_t op) {
    const Topology& t = c.topology();
    const int L = t.local_size(), n = t.nnodes();
    const size_t blk = count * dtype_size(dtype);
    transport::Fabric& f = c.fabric();
    // Packed: for local index j, for node k, the block of node k's rank j.
    transport::Fabric::Scratch packed = f.scratch(size_t(c.size()) * blk);
    for (int j = 0; j < L; ++j)
        for (int k = 0; k < n; ++k)
            std::memcpy(packed.data() + (size_t(j) * size_t(n) + size_t(k)) * blk,
                        at(send, size_t(t.ranks_of(k)[size_t(j)]) * blk), blk);
    // The node's sums of node k's rank-i block, for every k.
    transport::Fabric::Scratch sums = f.scratch(size_t(n) * blk);
    CCL_NESTED(shm::reduce_scatter(c.arena(), d, packed.data(), sums.data(), size_t(n) * count,
                                   dtype, op));
    std::vector<size_t> off;
    for (int k = 0; k <= n; ++k) off.push_back(size_t(k) * blk);
    const transport::Group g = counterparts(t);  // a coroutine's reference: not a temporary
    CCL_NESTED(transport::reduce_scatter(f, g, sums.data(), off, recv, dtype, op));
}

}  // namespace

Task reduce_scatter(Communicator& c, shm::Signature d, const void* send, void* recv, size_t count,
                    ccl_datatype_t dtype, ccl_reduction_t op) {
    const Topology& t = c.topology();
    const ccl_reduction_t rop = op == CCL_AVG ? CCL_SUM : op;
    const size_t blk = count * dtype_size(dtype);
    if (by_blocks(t, blk * size_t(t.nnodes()))) {
        CCL_NESTED(reduce_scatter_by_blocks(c, d, send, recv, count, dtype, rop));
        if (op == CCL_AVG) divide(recv, count, dtype, c.size());
        co_return;
    }
    const size_t node_bytes = size_t(t.local_size()) * blk;
    const bool leader = t.local_rank() == 0;
    // The node's sum of everything at its leader.
    transport::Fabric::Scratch full = c.fabric().scratch(leader ? size_t(c.size()) * blk : 0);
    CCL_NESTED(local_reduce(c, d, send, full.data(), count * size_t(c.size()), dtype, rop, 0));
    transport::Fabric::Scratch mine = c.fabric().scratch(node_bytes);
    if (leader) {
        // Leader k gets every other leader's sums of node k's blocks and adds them up: the
        // node's sums in node order (node k's ranks' blocks, one after the other) are the send.
        const int n = t.nnodes();
        transport::Fabric::Scratch packed = c.fabric().scratch(size_t(c.size()) * blk);
        std::vector<size_t> off{0};
        char* out = packed.data();
        for (int k = 0; k < n; ++k) {
            for (int r : t.ranks_of(k)) {
                std::memcpy(out, full.data() + size_t(r) * blk, blk);
                out += blk;
            }
            off.push_back(size_t(out - packed.data()));
        }
        const transport::Group g = leaders(t);
        CCL_NESTED(
            transport::reduce_scatter(c.fabric(), g, packed.data(), off, mine.data(), dtype, rop));
    }
    CCL_NESTED(local_broadcast(c, d, mine.data(), node_bytes, 0));
    std::memcpy(recv, mine.data() + size_t(t.local_rank()) * blk, blk);
    if (op == CCL_AVG) divide(recv, count, dtype, c.size());
}

namespace {

// The blocks between a node's ranks, over shared memory. Where the node's ranks are consecutive
// (the usual placement) so are their blocks, and the shm algorithm works on them where they are;
// otherwise they are packed in local order first and unpacked after.
Task local_alltoallv(Communicator& c, shm::Signature d, const void* send, const size_t* soff,
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
                                  c.shape().copy.min, c.shape().copy.alltoall_max));
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
                              c.shape().copy.min, c.shape().copy.alltoall_max));
    for (size_t i = 0, off = 0; i < L; off += rc[i++] * esize)
        std::memcpy(at(recv, roff[size_t(local[i])]), out.data() + off, rc[i] * esize);
}

}  // namespace

Task alltoallv(Communicator& c, shm::Signature d, const void* send, std::vector<size_t> sendcounts,
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

// A point-to-point message goes straight into the receive's buffer (in parts when long: the
// fabric's send_message), carrying the call's digest (count and datatype) as remote CQ data, so
// that a receive that expects another is refused as over shared memory. A message of another
// length fails the receive (a longer one is truncated by the provider: FI_ETRUNC); its buffer's
// contents are then undefined.
Task send(Communicator& c, uint32_t digest, const void* buf, size_t bytes, int peer) {
    // Copied: the caller may reuse its buffer at once, and the send completes in the background.
    auto op = c.fabric().send_message(peer, buf, bytes, digest);
    co_return;
}

Task recv(Communicator& c, uint32_t digest, void* buf, size_t bytes, int peer) {
    transport::Fabric& f = c.fabric();
    auto op = f.post_message(peer, buf, bytes, digest);
    co_await f.done(op);
}

}  // namespace ccl::hier
