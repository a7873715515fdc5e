// Submitting a checked call: run it on this thread, queue it for a worker (a nonblocking call) or
// record it in this thread's open group (core/group.h); with device buffers or a stream, through
// a device schedule (core/device_coll.h). The C binding checks the arguments, then calls submit.
#pragma once

#include <memory>

#include "core/comm.h"
#include "core/device.h"
#include "core/group.h"
#include "core/request.h"
#include "core/schedule.h"

namespace ccl {

// What a call asks for beyond its signature and buffers (the C binding's ccl_coll_attr_t;
// synchronous is a parameter of submit's own, as it means something only with a request).
struct CallAttrs {
    const char* match_id = nullptr;  // not null: the plan is cached under it (to_cache)
    ze::Stream* stream = nullptr;    // the call's device copies go on it (kept alive by the caller)
};
// A call that asks for neither: a constant, so that submit's tests of it fold away.
inline constexpr CallAttrs kNoAttrs{};

// The options of a call with no match_id: a constant, so that schedule_for's test folds away.
inline constexpr CallOptions kPlainCall{};

// submit's other paths: groups, device buffers and streams.
void submit_general(Communicator& comm, const void* name, const CollSignature& sig,
                    const Buffers& bufs, const CallAttrs& attrs, bool synchronous,
                    std::shared_ptr<Request>* req);

// Runs or queues a planned call, as `synchronous` and `req` ask (see submit).
void dispatch(Communicator& comm, const std::shared_ptr<const Schedule>& schedule,
              const Buffers& bufs, bool synchronous, std::shared_ptr<Request>* req);

// Runs, queues or records (in this thread's open group) a checked call on `comm`, which its caller
// enters by `name` (group_end). `req` null: a blocking call, done when this returns. Else *req
// gets the call's request; `synchronous`: it is complete, and set before the call's failure, if
// any, is thrown (the request carries it too).
// Inlined into the caller: the common case (host buffers, no stream, no group) takes a few
// branches here, and the cost of a small blocking call is mostly its instructions
// (docs/performance-history.md, session 12).
[[gnu::always_inline]] inline void submit(Communicator& comm, const void* name,
                                          const CollSignature& sig, const Buffers& bufs,
                                          const CallAttrs& attrs, bool synchronous,
                                          std::shared_ptr<Request>* req) {
    if (attrs.stream || ze::active() || group_active()) [[unlikely]] {
        submit_general(comm, name, sig, bufs, attrs, synchronous, req);
        return;
    }
    if (sig.coll == CollType::recv) {  // sends and receives take no match_id
        if (comm.recv_now(sig, bufs, req)) return;
    } else if (sig.coll == CollType::send && comm.send_now(sig, bufs)) {
        if (req) {
            *req = make_pooled<Request>();
            (*req)->complete(CCL_SUCCESS);
        }
        return;
    }
    // A cached call finds its schedule as quickly as an uncached one (schedule_for's memo).
    const std::shared_ptr<const Schedule>& schedule =
        attrs.match_id ? comm.schedule_for(sig, {attrs.match_id, true})
                       : comm.schedule_for(sig, kPlainCall);
    if (!req) {  // dispatch's first case, one call less on the path of a blocking call
        comm.run(schedule, bufs);
        return;
    }
    dispatch(comm, schedule, bufs, synchronous, req);
}

}  // namespace ccl
