// The planner: picks an algorithm for a call from its signature, the communicator's shape and the
// CCL_<COLL> overrides, and builds the schedule (set-up happens here, data moves in execute()).
#pragma once

#include <vector>

#include "core/schedule.h"

namespace ccl {

class Communicator;
struct Config;

Schedule plan(Communicator& comm, const CollSignature& sig);
// The same for a communicator across nodes (core/hierarchical.h).
Schedule plan_multinode(Communicator& comm, const CollSignature& sig);

// The largest reduce (bytes) that runs direct among n co-located ranks by default; beyond it,
// single copy or split (split on each node of a communicator across nodes).
size_t reduce_direct_max(const Config& cfg, int n);

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
