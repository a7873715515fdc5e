// Group calls (ccl_group_start / ccl_group_end): the calling thread's collectives are recorded and
// issued together at the outermost end, with consecutive small allreduces on one communicator fused
// into one step.
#pragma once

#include <memory>

#include "core/comm.h"
#include "core/request.h"
#include "core/schedule.h"

namespace ccl {

void group_start();
bool group_active();  // on this thread
// Records an already checked call. `req` is the caller's request for a nonblocking call, or null
// for a blocking one (which has completed when group_end returns).
void group_add(std::shared_ptr<Communicator> comm, const CollSignature& sig, const Buffers& bufs,
               const CallOptions& opts, std::shared_ptr<Request> req);
// The calls recorded on `comm` in this thread's group complete with `e` instead of being issued
// (ccl_group_end could not have the communicator to itself).
void group_refuse(const Communicator& comm, const Error& e);
// Closes a group; the outermost issues it, waits for its blocking calls and throws the first
// failure among them. Throws CCL_ERROR_INVALID_USAGE without a group_start.
void group_end();

}  // namespace ccl
