// The completion of one collective: what a ccl_request_t stands for, and what a blocking call
// waits on when it must queue behind nonblocking work.
#pragma once

#include <pthread.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/pool.h"
#include "ccl/ccl.h"

namespace ccl {

class Execution;
class Request;

// Who completes a request that has no execution yet: the communicator that deferred a small
// receive (Communicator::recv_now).
class Deferral {
public:
    // Completes the request (and undefers it) if that can be done at once: its message has
    // arrived. False: nothing happened. With the request's lock held, or without it on the thread
    // that deferred it (Request::resolve).
    virtual bool try_complete(Request& r) = 0;
    // With the request's lock held and the request still deferred to it: gives it an execution
    // and undefers it.
    virtual void materialize(Request& r) = 0;

protected:
    ~Deferral() = default;
};

// Not enable_shared_from_this: its weak count would make every request's creation and release cost
// locked instructions (a small receive pays for each: docs/performance-history.md, session 36).
class Request {
public:
    // The execution that completes this request, which wait() may drive itself.
    void set_execution(std::weak_ptr<Execution> e) { execution_ = std::move(e); }
    // Until undefer(), wait() and test() first have `d` complete this request, else (wait(),
    // after `tries` more tries, with a pause or, with `yield`, a sched_yield between them) make
    // it an execution. Called by the thread that made the request, before it is shared with
    // other threads.
    void defer(Deferral* d, int tries, bool yield) {
        deferral_ = d;
        tries_ = tries;
        yield_ = yield;
        owner_ = pthread_self();
        deferred_.store(true, std::memory_order_relaxed);
    }
    // For the deferral, before it undefers the request on a thread that did not defer it: waits
    // until the thread that did is out of its attempt without the lock, and keeps it out.
    void exclude_owner();
    // By the deferral, with lock() held.
    void undefer() {
        deferral_ = nullptr;
        deferred_.store(false, std::memory_order_release);
    }
    bool deferred() const { return deferral_ != nullptr; }  // with lock() held
    // Still deferred, seen from any thread without the lock: once false, whatever undeferred it
    // (a completion, or an execution made for it) is visible.
    bool still_deferred() const { return deferred_.load(std::memory_order_acquire); }
    std::unique_lock<std::mutex> lock() { return std::unique_lock<std::mutex>(mu_); }
    // Called once, by whoever ran the collective.
    void complete(ccl_result_t code, std::string message = {});
    bool done() const { return done_.load(std::memory_order_acquire) != 0; }
    // done(), after advancing the collective as far as it goes without blocking (unless a worker
    // or another thread has it in hand): ccl_test makes progress, as MPI_Test does.
    bool test();
    // Blocks until complete, running the collective on this thread if no worker has it in hand.
    // It needs no deadline of its own: the collective's every wait has one (CCL_TIMEOUT), so it
    // completes, failing if need be.
    void wait();
    // After done(): the collective's result and, if it failed, why.
    ccl_result_t result() const { return code_; }
    const std::string& message() const { return message_; }
    // Throws the collective's error, if any (after wait()).
    void rethrow() const;

private:
    void resolve(bool block);  // has the deferral, if any, complete or materialize this request

    // Set last; sleepers wait on it (futex). Not std::atomic::wait: libstdc++'s notify_all
    // does a locked add on a global line at every completion, sleeper or not.
    std::atomic<uint32_t> done_{0};
    std::atomic<uint32_t> sleepers_{0};
    ccl_result_t code_ = CCL_SUCCESS;
    std::string message_;
    std::weak_ptr<Execution> execution_;  // set before it is shared, or under mu_ by resolve
    std::atomic<bool> deferred_{false};   // deferral_ is set: look under mu_
    std::mutex mu_;
    Deferral* deferral_ = nullptr;  // guarded by mu_, but see resolve()
    int tries_ = 0;
    bool yield_ = false;
    pthread_t owner_{};                        // the thread that deferred it
    std::atomic<bool> owner_trying_{false};    // it tries without the lock (resolve)
    std::atomic<bool> owner_excluded_{false};  // it may no longer (exclude_owner)
};

// The requests one execution completes (one, or a group's several).
using RequestList = std::vector<std::shared_ptr<Request>, PoolAllocator<std::shared_ptr<Request>>>;

}  // namespace ccl
