// Collectives of a communicator whose ranks span several nodes: the node's ranks work together
// over shared memory (shm/collectives.h), one rank per node (its leader, or the root's node's
// root) works with the other nodes over the fabric (transport/collectives.h), and the node's ranks
// finish over shared memory. With one rank per node the shared-memory parts vanish and what
// remains is the flat fabric algorithm. Every rank calls the same function with the same
// arguments, like the shm algorithms; `sig` identifies the call to the node's arena.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/task.h"
#include "ccl/ccl.h"
#include "shm/arena.h"

namespace ccl {
class Communicator;
}

namespace ccl::hier {

Task allreduce(Communicator& c, shm::Signature sig, const void* send, void* recv, size_t count,
               ccl_datatype_t dtype, ccl_reduction_t op);
Task reduce(Communicator& c, shm::Signature sig, const void* send, void* recv, size_t count,
            ccl_datatype_t dtype, ccl_reduction_t op, int root);
Task broadcast(Communicator& c, shm::Signature sig, void* buf, size_t bytes, int root);
Task barrier(Communicator& c, shm::Signature sig);
// counts: every rank's count.
Task allgatherv(Communicator& c, shm::Signature sig, const void* send, void* recv,
                std::vector<size_t> counts, ccl_datatype_t dtype);
Task reduce_scatter(Communicator& c, shm::Signature sig, const void* send, void* recv, size_t count,
                    ccl_datatype_t dtype, ccl_reduction_t op);
// Blocks between co-located ranks over shared memory, the others over the fabric at the same
// time (the messages are the user's own blocks).
Task alltoallv(Communicator& c, shm::Signature sig, const void* send,
               std::vector<size_t> sendcounts, void* recv, std::vector<size_t> recvcounts,
               ccl_datatype_t dtype);
// Point to point with a rank on another node. A send copies the data and returns at once (it
// never waits for its receiver).
// `digest` identifies count and datatype: a receive expecting another fails with
// CCL_ERROR_INVALID_USAGE and drops the message.
Task send(Communicator& c, uint32_t digest, const void* buf, size_t bytes, int peer);
Task recv(Communicator& c, uint32_t digest, void* buf, size_t bytes, int peer);

}  // namespace ccl::hier
