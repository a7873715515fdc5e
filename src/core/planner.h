// The planner: picks an algorithm for a call from its signature, the communicator's shape and the
// CCL_<COLL> overrides, and builds the schedule (set-up happens here, data moves in execute()).
#pragma once

#include "core/schedule.h"

namespace ccl {

class Communicator;

Schedule plan(Communicator& comm, const CollSignature& sig);

// Runs the steps of a schedule in order on the calling thread.
void execute(const Schedule& schedule, const Buffers& bufs);

}  // namespace ccl
