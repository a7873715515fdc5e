// Communicator's execution queue: a call runs on the calling thread when nothing of the
// communicator's is queued, else behind the queued work on a worker; small sends and receives go
// at once through the mailbox (recv_now, send_now).
#include <cassert>

#include "base/pool.h"
#include "base/reduce.h"
#include "base/wait.h"
#include "core/comm.h"
#include "core/planner.h"
#include "core/worker.h"

namespace ccl {

// Inlined: it is on the path of every blocking call.
[[gnu::always_inline]] inline void Communicator::execute_now(const Schedule& schedule,
                                                             const Buffers& bufs) {
    try {
        execute(schedule, bufs);
    } catch (const Error& e) {
        note_failure(e, is_p2p(schedule.sig.coll));
        throw;
    }
}

bool Communicator::recv_now(const CollSignature& sig, const Buffers& bufs,
                            std::shared_ptr<Request>* req) {
    const size_t bytes = sig.count * dtype_size(sig.dtype);
    // One that may go single-copy takes the general path, which offers its buffer to the sender.
    if (fabric_ || bytes > shm::Mailbox::kQuickBytes || bytes >= shape_.copy.p2p_min ||
        sig.root == CollSignature::kAnySource || !idle())
        return false;
    check_broken(false);  // as start() does
    if (sig.count != last_recv_.count || sig.dtype != last_recv_.dtype ||
        sig.tag != last_recv_.tag) {
        last_recv_ = sig;
        last_recv_digest_ = sig.p2p_digest();
    }
    if (mailbox_->try_recv(bufs.recv, bytes, last_recv_digest_, sig.root)) {
        if (req) {
            *req = make_pooled<Request>();
            (*req)->complete(CCL_SUCCESS);
        }
        return true;
    }
    if (!req) return false;
    // Idle: an earlier deferred receive is resolved and its execution, if it had one, finished,
    // so no lock is needed to reuse the fields. Not counted in pending_ (two locked instructions
    // a receive) until it becomes an execution: idle() looks at it instead.
    deferred_sig_ = sig;
    deferred_buf_ = bufs.recv;
    deferred_digest_ = last_recv_digest_;
    deferred_exec_.reset();
    deferred_ = make_pooled<Request>();
    // A message in flight arrives within a cache-line transfer or two: worth a few polls before
    // paying for an execution (which then waits the usual way). Where the ranks share cores, the
    // sender may need this one's core: yield it between the tries (as the waits do).
    const shm::WaitPolicy& policy = arena_->policy();
    deferred_->defer(this, policy.own_core ? 64 : policy.yields, !policy.own_core);
    *req = deferred_;
    return true;
}

bool Communicator::send_now(const CollSignature& sig, const Buffers& bufs) {
    const size_t bytes = sig.count * dtype_size(sig.dtype);
    if (fabric_ || bytes > shm::Mailbox::kSpanMax || bytes >= shape_.copy.p2p_min) return false;
    check_broken();  // as run() does for a send
    if (sig.count != last_send_.count || sig.dtype != last_send_.dtype ||
        sig.tag != last_send_.tag) {
        last_send_ = sig;
        last_send_digest_ = sig.p2p_digest();
    }
    return mailbox_->try_send(bufs.send, bytes, last_send_digest_, sig.root);
}

bool Communicator::try_complete(Request& r) {
    const size_t bytes = deferred_sig_.count * dtype_size(deferred_sig_.dtype);
    if (is_broken_.load(std::memory_order_acquire) ||
        !mailbox_->try_recv(deferred_buf_, bytes, deferred_digest_, deferred_sig_.root))
        return false;
    r.undefer();
    r.complete(CCL_SUCCESS);
    return true;
}

void Communicator::materialize(Request& r) {
    assert(&r == deferred_.get());  // the only request deferred to this communicator
    // Nothing was pending when it was deferred: it follows no unfinished execution. Counted
    // before it is undeferred, so that idle() sees one or the other.
    pending_.fetch_add(1, std::memory_order_relaxed);
    deferred_exec_ = make_pooled<Execution>(
        std::make_shared<const Schedule>(plan(*this, deferred_sig_)),
        Buffers{nullptr, deferred_buf_, {}}, RequestList{deferred_}, nullptr, shared_from_this());
    r.set_execution(deferred_exec_);
    r.undefer();
}

void Communicator::run(const CollSignature& sig, const Buffers& bufs) {
    run(schedule_for(sig, {}), bufs);
}

void Communicator::run(const std::shared_ptr<const Schedule>& schedule, const Buffers& bufs) {
    check_broken();
    // Only this communicator's (single) user thread adds work, so when nothing is pending no
    // worker touches the arena and the call may run right here.
    if (schedule->sig.coll == CollType::send || idle()) {
        execute_now(*schedule, bufs);
        return;
    }
    auto req = make_pooled<Request>();
    start(schedule, bufs, {req});
    req->wait();
    req->rethrow();
}

void Communicator::start(std::shared_ptr<const Schedule> schedule, const Buffers& bufs,
                         RequestList reqs) {
    check_broken(schedule->sig.coll == CollType::send);
    if (schedule->sig.coll == CollType::send) {  // never queues (see run)
        ccl_result_t code = CCL_SUCCESS;
        std::string message;
        try {
            execute_now(*schedule, bufs);
        } catch (const Error& e) {
            code = e.code();
            message = e.what();
        }
        for (const auto& r : reqs) r->complete(code, message);
        return;
    }
    unpark();  // queued work runs in issue order
    // With nothing of this communicator queued, this thread starts the work itself: a receive
    // offers its buffer to the sender at once, a collective publishes its input.
    const bool idle = pending_.fetch_add(1, std::memory_order_acq_rel) == 0;
    const bool parkable = schedule->sig.coll == CollType::recv;
    // The execution keeps this communicator alive until it has run. Only the user thread starts
    // work, so last_started_ needs no lock.
    auto exec = make_pooled<Execution>(std::move(schedule), bufs, std::move(reqs),
                                       std::move(last_started_), shared_from_this());
    for (const auto& r : exec->requests()) r->set_execution(exec);
    last_started_ = exec;
    if (idle && exec->progress()) return;  // finished already
    if (idle && parkable) {
        // A posted receive holds up no peer (senders never wait for it), so it needs no worker
        // until this thread moves on: waiting on it, testing it or the next call finishes it
        // without waking a thread (a wake-up costs more than a small message).
        parked_ = std::move(exec);
        return;
    }
    hand_to_worker(std::move(exec));
}

void Communicator::hand_to_worker(std::shared_ptr<Execution> exec) {
    // The worker holds it weakly; this thread keeps it until it has finished and lets it go at a
    // later call (release_finished). A nonblocking call is usually finished by its caller, and
    // the worker, had it held the last reference, would free the execution, its requests and its
    // frames on its own cpu, and drop a reference to the schedule this thread is reusing: their
    // cache lines and the allocator's blocks then crossed to the worker's cpu and back at every
    // call (16-core host, 2 ranks, 8 B allreduce waited on at once: 1.5-1.7 us, 0.9-1.1 without).
    workers().submit(id_, exec);
    inflight_.push_back(std::move(exec));
}

void Communicator::release_finished() {
    while (!inflight_.empty() && inflight_.front()->finished()) inflight_.pop_front();
}

void Communicator::finished(Execution& e, ccl_result_t code, const std::string& message) {
    if (code != CCL_SUCCESS) note_failure(Error(code, message), is_p2p(e.schedule().sig.coll));
    for (const auto& r : e.requests()) r->complete(code, message);
    // The locked subtraction orders it before the look at the sleepers (Dekker with wait_idle).
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1 &&
        idle_waiters_.load(std::memory_order_relaxed) != 0)
        futex_wake_all(&pending_);
}

void Communicator::unpark() {
    if (deferred_) [[unlikely]] {
        std::shared_ptr<Execution> exec;
        {
            deferred_->exclude_owner();
            auto lock = deferred_->lock();
            if (deferred_->deferred()) materialize(*deferred_);
            exec = std::move(deferred_exec_);  // null if a wait or test took the message
        }
        deferred_.reset();
        if (exec) {
            last_started_ = exec;  // what comes next runs after it
            parked_ = std::move(exec);
        }
    }
    // Usually it has finished, waited on: then no worker needs waking.
    if (parked_ && !parked_->finished()) hand_to_worker(std::move(parked_));
    parked_.reset();
    release_finished();
}

void Communicator::wait_idle() {
    unpark();
    // Queued work finishes or fails within its own deadlines (CCL_TIMEOUT).
    idle_waiters_.fetch_add(1, std::memory_order_seq_cst);
    for (uint32_t n; (n = pending_.load(std::memory_order_seq_cst)) != 0;)
        futex_wait(&pending_, n, std::chrono::milliseconds(50));
    idle_waiters_.fetch_sub(1, std::memory_order_relaxed);
    release_finished();
}

}  // namespace ccl
