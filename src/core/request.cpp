#include "core/request.h"

#include <sched.h>

#include "base/error.h"
#include "base/wait.h"
#include "core/executor.h"

namespace ccl {

void Request::complete(ccl_result_t code, std::string message) {
    code_ = code;
    message_ = std::move(message);
    done_.store(1, std::memory_order_release);
    light_fence();  // Dekker with wait(): the store before the look at the sleepers
    if (sleepers_.load(std::memory_order_relaxed) != 0) futex_wake_all(&done_);
}

void Request::resolve(bool block) {
    int tries = block ? tries_ : 0;
    auto pause = [this] {
        if (yield_)
            sched_yield();
        else
            cpu_relax();
    };
    if (pthread_equal(owner_, pthread_self())) {
        // The thread that deferred it (usually the only one that ever looks at it) tries without
        // the lock first: taking a lock is a full fence, which waits for this thread's last store
        // to reach the cache, and that store is usually the news of a send, on a line the peer
        // polls (a cross-core round trip per call). Another thread that undefers it excludes this
        // one first (exclude_owner): a Dekker handshake, whose fence the other side pays.
        owner_trying_.store(true, std::memory_order_relaxed);
        light_fence();
        bool done = false;
        if (!owner_excluded_.load(std::memory_order_relaxed) &&
            deferred_.load(std::memory_order_relaxed))
            for (int i = 0; !(done = deferral_->try_complete(*this)) && i < tries; ++i) pause();
        owner_trying_.store(false, std::memory_order_release);
        if (done) return;
        tries = 0;
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (!deferral_) return;
    for (int i = 0; !deferral_->try_complete(*this); ++i) {
        if (i >= tries) {
            deferral_->materialize(*this);
            return;
        }
        pause();
    }
}

void Request::exclude_owner() {
    if (pthread_equal(owner_, pthread_self())) return;  // then it is not trying now
    owner_excluded_.store(true, std::memory_order_relaxed);
    heavy_fence();
    while (owner_trying_.load(std::memory_order_acquire)) sched_yield();
}

void Request::wait() {
    if (done()) return;
    if (deferred_.load(std::memory_order_acquire)) {
        resolve(true);
        if (done()) return;
    }
    if (auto e = execution_.lock()) e->finish();  // completes this request
    // Short collectives finish within microseconds of the wait: poll a little before sleeping,
    // yielding so that on a crowded node the worker that completes it gets the cpu.
    for (int i = 0; i < 64; ++i) {
        if (done()) return;
        for (int k = 0; k < 32; ++k) cpu_relax();
        if (i >= 16) sched_yield();
    }
    sleepers_.fetch_add(1, std::memory_order_relaxed);
    heavy_fence();  // the count before the last look (complete() pays only a light fence)
    // Bounded sleeps: no wake-up can be lost for good.
    while (!done()) futex_wait(&done_, 0, std::chrono::milliseconds(50));
    sleepers_.fetch_sub(1, std::memory_order_relaxed);
}

bool Request::test() {
    if (done()) return true;
    if (deferred_.load(std::memory_order_acquire)) {
        resolve(false);
        if (done()) return true;
    }
    if (auto e = execution_.lock()) e->progress();
    return done();
}

void Request::rethrow() const {
    if (code_ != CCL_SUCCESS) throw Error(code_, message_);
}

}  // namespace ccl
