#include "core/group.h"

#include <algorithm>
#include <atomic>
#include <vector>

#include "core/planner.h"

namespace ccl {

namespace {

struct Recorded {
    std::shared_ptr<Communicator> comm;
    const void* name;  // what group_end enters comm by
    GroupCall call;
    std::string match_id;  // the call's, kept until the group issues it
    bool to_cache;
    std::shared_ptr<Request> req;  // always set: blocking calls get an internal one
    bool blocking;
    bool refused = false;  // completed already by refuse: not issued
};

// The depth apart from the calls: a trivially destructible thread-local costs no per-access
// initialization check, and group_active() is on the path of every call.
thread_local int group_depth = 0;
// Groups open on any thread: while there are none, group_active() need not reach the thread-local
// (in a shared library, a call through a TLS descriptor on the path of every call).
std::atomic<int> open_groups{0};
thread_local std::vector<Recorded> group_calls;

// Issues calls[begin, end) as one unit: one fused step when there are several, else the call's own
// schedule. A call that cannot be issued (a broken communicator, a match_id cached for another
// call) completes with that error at once, so that no request is left waiting.
void issue(const std::vector<Recorded>& calls, size_t begin, size_t end) {
    Communicator& comm = *calls[begin].comm;
    try {
        if (end - begin == 1) {
            const Recorded& r = calls[begin];
            comm.start(comm.schedule_for(r.call.sig, {r.match_id.c_str(), r.to_cache}), r.call.bufs,
                       {r.req});
            return;
        }
        std::vector<GroupCall> parts;
        RequestList reqs;
        for (size_t i = begin; i < end; ++i) {
            parts.push_back(calls[i].call);
            reqs.push_back(calls[i].req);
        }
        comm.start(std::make_shared<const Schedule>(plan_fused_allreduce(comm, parts)), {},
                   std::move(reqs));
    } catch (const Error& e) {
        for (size_t i = begin; i < end; ++i) calls[i].req->complete(e.code(), e.what());
    }
}

// The calls recorded on `comm` complete with `e` instead of being issued (group_end could not have
// the communicator to itself).
void refuse(const Communicator& comm, const Error& e) {
    for (Recorded& r : group_calls)
        if (r.comm.get() == &comm && !r.refused) {
            r.refused = true;
            r.req->complete(e.code(), e.what());
        }
}

// Enters each communicator the group recorded calls on, once, in the order of their first calls;
// refuses the calls on one it cannot enter. Returns the guards that keep them entered.
std::vector<std::shared_ptr<void>> enter_all(GroupEnter enter) {
    std::vector<const Communicator*> seen;
    std::vector<std::shared_ptr<void>> entered;
    for (const Recorded& r : group_calls) {
        if (std::find(seen.begin(), seen.end(), r.comm.get()) != seen.end()) continue;
        seen.push_back(r.comm.get());
        try {
            entered.push_back(enter(r.name));
        } catch (const Error& e) {
            refuse(*r.comm, e);
        }
    }
    return entered;
}

// The longest run of calls from `begin` that fuses (at least two), or 0.
size_t fusable_run(const std::vector<Recorded>& calls, size_t begin) {
    std::vector<GroupCall> run;
    size_t end = begin;
    for (; end < calls.size(); ++end) {
        const Recorded& r = calls[end];
        if (r.comm != calls[begin].comm || r.to_cache) break;
        run.push_back(r.call);
        if (!fusable(*r.comm, run)) break;
    }
    return end - begin >= 2 ? end - begin : 0;
}

}  // namespace

void group_start() {
    ++group_depth;
    open_groups.fetch_add(1, std::memory_order_relaxed);
}

bool group_active() {
    // This thread's own start is seen by its later loads; another thread's count only sends it
    // to the thread-local.
    return open_groups.load(std::memory_order_relaxed) != 0 && group_depth > 0;
}

bool group_holds(const Request& r) {
    if (!group_active()) return false;
    return std::any_of(group_calls.begin(), group_calls.end(),
                       [&](const Recorded& c) { return c.req.get() == &r; });
}

void group_add(std::shared_ptr<Communicator> comm, const void* name, const CollSignature& sig,
               const Buffers& bufs, const CallOptions& opts, std::shared_ptr<Request> req) {
    bool blocking = !req;
    if (blocking) req = make_pooled<Request>();
    group_calls.push_back({std::move(comm),
                           name,
                           {sig, bufs},
                           opts.to_cache ? opts.match_id : "",
                           opts.to_cache,
                           std::move(req),
                           blocking});
}

void group_end(GroupEnter enter) {
    if (group_depth == 0)
        throw Error(CCL_ERROR_INVALID_USAGE, "ccl_group_end without a matching ccl_group_start");
    // Held until the calls are done: each communicator is this thread's while they issue and wait.
    std::vector<std::shared_ptr<void>> entered;
    if (group_depth == 1) entered = enter_all(enter);
    open_groups.fetch_sub(1, std::memory_order_relaxed);
    if (--group_depth > 0) return;
    std::vector<Recorded> calls = std::move(group_calls);
    group_calls.clear();
    // Everything goes to the workers, so that calls on different communicators progress together
    // (as NCCL's groups let them); each communicator's calls stay in order.
    for (size_t i = 0; i < calls.size();) {
        if (calls[i].refused) {
            ++i;
            continue;
        }
        size_t n = std::max<size_t>(1, fusable_run(calls, i));
        issue(calls, i, i + n);
        i += n;
    }
    // Wait for every blocking call before reporting any failure: none may still be writing into
    // the caller's buffers once this returns.
    for (const Recorded& r : calls)
        if (r.blocking) r.req->wait();
    for (const Recorded& r : calls)
        if (r.blocking) r.req->rethrow();
}

}  // namespace ccl
