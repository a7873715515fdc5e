#include "core/submit.h"

#include "base/error.h"
#include "core/device_coll.h"

namespace ccl {

namespace {

// What device buffers and streams do not support yet.
void xpu_checks(const Communicator& comm, const CollSignature& sig, const Buffers& bufs,
                const CallAttrs& attrs, bool nonblocking, bool synchronous) {
    if (attrs.stream && nonblocking && !synchronous)
        throw Error(CCL_ERROR_UNSUPPORTED,
                    "a nonblocking call cannot take a stream: pass req NULL or set synchronous");
    if (group_active() &&
        (attrs.stream ||
         (ze::enabled() && ze::has_device_buffer(sig, bufs, comm.rank(), comm.size()))))
        throw Error(CCL_ERROR_UNSUPPORTED,
                    "device buffers and streams are not supported inside ccl_group_start / "
                    "ccl_group_end yet");
}

}  // namespace

void dispatch(Communicator& comm, const std::shared_ptr<const Schedule>& schedule,
              const Buffers& bufs, bool synchronous, std::shared_ptr<Request>* req) {
    if (!req) {
        comm.run(schedule, bufs);
        return;
    }
    auto r = make_pooled<Request>();
    if (synchronous) {
        // Complete now; the request carries the result like any other.
        try {
            comm.run(schedule, bufs);
            r->complete(CCL_SUCCESS);
        } catch (const Error& e) {
            r->complete(e.code(), e.what());
        }
        *req = r;
        r->rethrow();
        return;
    }
    comm.start(schedule, bufs, {r});
    *req = std::move(r);
}

void submit_general(Communicator& comm, const void* name, const CollSignature& sig,
                    const Buffers& bufs, const CallAttrs& attrs, bool synchronous,
                    std::shared_ptr<Request>* req) {
    CallOptions opts;
    if (attrs.match_id) {
        opts.to_cache = true;
        opts.match_id = attrs.match_id;
    }
    if (ze::active() || attrs.stream)
        xpu_checks(comm, sig, bufs, attrs, req != nullptr, synchronous);
    if (group_active()) {
        std::shared_ptr<Request> r = req ? make_pooled<Request>() : nullptr;
        group_add(comm.shared_from_this(), name, sig, bufs, opts, r);
        if (req) *req = std::move(r);
        return;
    }
    if (ze::active() || attrs.stream) {
        // A copy: planning the device part may replace the host plan among the recent ones.
        std::shared_ptr<const Schedule> host = comm.schedule_for(sig, opts);
        auto staged = ze::device_schedule(comm, host, bufs, attrs.stream);
        dispatch(comm, staged ? staged : host, bufs, synchronous, req);
        return;
    }
    dispatch(comm, comm.schedule_for(sig, opts), bufs, synchronous, req);
}

}  // namespace ccl
