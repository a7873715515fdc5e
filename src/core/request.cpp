#include "core/request.h"

#include <sched.h>

#include "core/error.h"
#include "core/executor.h"
#include "shm/wait.h"

namespace ccl {

void Request::complete(ccl_result_t code, std::string message) {
    code_ = code;
    message_ = std::move(message);
    done_.store(true, std::memory_order_release);
    done_.notify_all();  // no system call when nobody sleeps
}

void Request::resolve(bool block) {
    std::lock_guard<std::mutex> lock(mu_);
    if (deferral_) deferral_->resolve(*this, block);
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
        for (int k = 0; k < 32; ++k) shm::cpu_relax();
        if (i >= 16) sched_yield();
    }
    done_.wait(false, std::memory_order_acquire);
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
