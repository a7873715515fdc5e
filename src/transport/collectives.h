// Collectives among a group of ranks over the fabric (one rank per node: the node leaders of a
// hierarchical collective, or every rank with one rank per node). Every member calls the same
// function with the same group, count, datatype, reduction and root; messages go on the
// collective channel, in the same order on every rank. Coroutines (base/task.h): what they take
// by reference (the group, offsets) must outlive the task, so pass named objects, not temporaries.
#pragma once

#include <cstddef>
#include <vector>

#include "base/task.h"
#include "ccl/ccl.h"
#include "transport/fabric.h"

namespace ccl::transport {

// The members' ranks in the communicator, and this rank's index among them.
struct Group {
    std::vector<int> ranks;
    int me = 0;
    int size() const { return int(ranks.size()); }
};

// Messages up to this size take the latency algorithms (recursive doubling, trees); larger ones
// the bandwidth ones (ring).
constexpr size_t kRingMinBytes = 64 << 10;

// In place. `op` must not be CCL_AVG (the caller divides once, by the whole communicator).
// Recursive doubling for small buffers, ring reduce-scatter + all-gather for large ones (its
// blocks passed on in parts, pipelined); every member ends with the same bits.
Task allreduce(Fabric& f, const Group& g, void* buf, size_t count, ccl_datatype_t dtype,
               ccl_reduction_t op);
// To member `root` (in place there; `buf` is scratch on the others): a binomial tree.
Task reduce(Fabric& f, const Group& g, void* buf, size_t count, ccl_datatype_t dtype,
            ccl_reduction_t op, int root);
// From member `root`: a binomial tree.
Task broadcast(Fabric& f, const Group& g, void* buf, size_t bytes, int root);
// In place: member i's block is bytes [at[i], at[i+1]) of buf. A ring.
Task allgatherv(Fabric& f, const Group& g, void* buf, const std::vector<size_t>& at);
// Member k gets, in `recv`, the reduction over the members of their block k (bytes [at[k],
// at[k+1]) of `send`; blocks may differ in size between members): each member sends every other
// its block at once, one round. `op` as for allreduce.
Task reduce_scatter(Fabric& f, const Group& g, const void* send, const std::vector<size_t>& at,
                    void* recv, ccl_datatype_t dtype, ccl_reduction_t op);
// Dissemination: log2(n) rounds of empty messages.
Task barrier(Fabric& f, const Group& g);

}  // namespace ccl::transport
