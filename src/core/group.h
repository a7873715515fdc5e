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
// Whether this thread's open group recorded the call of `r` (issued only at the outermost
// group_end): a wait for it before then would never end.
bool group_holds(const Request& r);
// Records an already checked call on `comm`, which the caller enters by `name` (see group_end).
// `req` is the caller's request for a nonblocking call, or null for a blocking one (which has
// completed when group_end returns).
void group_add(std::shared_ptr<Communicator> comm, const void* name, const CollSignature& sig,
               const Buffers& bufs, const CallOptions& opts, std::shared_ptr<Request> req);
// Has the communicator the caller named `name` in group_add to this thread alone (ccl.h: a
// communicator is used by one thread at a time) until the returned guard goes, or throws the
// Error why it cannot (the C binding: an entry into its handle's slot).
using GroupEnter = std::shared_ptr<void> (*)(const void* name);
// Closes a group. The outermost enters every communicator the group recorded calls on (the calls
// on one it cannot enter complete with that error instead), issues the calls, waits for the
// blocking ones and throws the first failure among them; then leaves the communicators. Throws
// CCL_ERROR_INVALID_USAGE without a group_start.
void group_end(GroupEnter enter);

}  // namespace ccl
