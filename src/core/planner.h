// The planner: builds a call's schedule from the algorithm core/tuning chooses for it (set-up
// happens here, data moves in execute()).
#pragma once

#include <vector>

#include "core/schedule.h"

namespace ccl {

class Communicator;
namespace shm {
class Mailbox;
}

Schedule plan(Communicator& comm, const CollSignature& sig);
// The same for a communicator across nodes (core/hierarchical.h), given the chosen algorithm.
Schedule plan_multinode(Communicator& comm, const CollSignature& sig, Algo algo);
// A send or receive (sig.coll) through the node's mailbox, to local rank `peer`; single copy
// from `cma_min` bytes.
Step mailbox_step(shm::Mailbox& box, const CollSignature& sig, int peer, size_t cma_min);

// One call of a group, as the planner fuses them.
struct GroupCall {
    CollSignature sig;
    Buffers bufs;
};
// Whether these consecutive calls can share one fused allreduce step on this communicator.
bool fusable(Communicator& comm, const std::vector<GroupCall>& calls);
// One schedule that runs several small allreduces with a single synchronisation. It is bound to
// the calls' buffers (run it with empty Buffers) and never cached.
Schedule plan_fused_allreduce(Communicator& comm, const std::vector<GroupCall>& calls);

}  // namespace ccl
