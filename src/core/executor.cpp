#include "core/executor.h"

#include <algorithm>
#include <thread>
#include <vector>

#include "base/error.h"

namespace ccl {

bool Execution::advance(bool blocking) {
    if (finished()) return true;
    if (prev_) {
        if (!prev_->finished()) return false;
        prev_.reset();
        has_prev_.store(false, std::memory_order_release);
    }
    ccl_result_t code = CCL_SUCCESS;
    std::string message;
    try {
        while (step_ < schedule_->steps.size()) {
            if (!task_.valid()) task_ = schedule_->steps[step_].start(bufs_);
            if (Waiter* w = task_.waiting(); w && !w->ready()) {
                if (!blocking) return false;
                w->block();
            }
            task_.resume();
            if (!task_.done()) continue;
            task_ = Task();
            ++step_;
        }
    } catch (const Error& e) {
        code = e.code();
        message = e.what();
    } catch (const std::exception& e) {
        code = CCL_ERROR_INTERNAL;
        message = std::string("internal error: ") + e.what();
    }
    task_ = Task();
    // Once, outside the try: its own failure is not the step's. The owner is let go after.
    std::shared_ptr<ExecutionOwner> owner = std::move(owner_);
    owner->finished(*this, code, message);
    // Only now, with the requests complete: the next execution starts once this one is finished,
    // and a call that returns after it must find the earlier requests done (ccl_test), not in
    // the middle of completing on another thread.
    finished_.store(true, std::memory_order_release);
    return true;
}

bool Execution::progress() {
    if (driven_.load(std::memory_order_acquire)) return finished();
    std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
    if (!lock) return finished();
    return advance(false);
}

void Execution::drive() {
    driven_.store(true, std::memory_order_release);
    std::lock_guard<std::mutex> lock(mu_);  // a napping worker lets go within its nap
    advance(true);
}

void Execution::finish() {
    // Oldest first, so that each runs after its predecessor (no recursion however long the
    // queue).
    std::vector<std::shared_ptr<Execution>> before;
    if (has_prev_.load(std::memory_order_acquire)) {
        std::shared_ptr<Execution> p;
        {
            std::lock_guard<std::mutex> lock(mu_);
            p = prev_;
        }
        while (p && !p->finished()) {
            before.push_back(p);
            std::lock_guard<std::mutex> lock(p->mu_);
            p = p->prev_;
        }
    }
    for (auto it = before.rbegin(); it != before.rend(); ++it) (*it)->drive();
    drive();
}

void Execution::nap(std::chrono::microseconds max) {
    Waiter::Sleeper sleep;
    std::shared_ptr<ExecutionOwner> keep;  // the memory the sleeper watches
    {
        std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
        if (lock && !driven_.load(std::memory_order_acquire) && !finished() && task_.valid())
            if (Waiter* w = task_.waiting()) {
                sleep = w->sleeper();
                keep = owner_;
            }
    }
    if (sleep)
        sleep(max);
    else  // a waiting thread drives it, or it is between steps
        std::this_thread::sleep_for(std::min(max, std::chrono::microseconds(50)));
}

}  // namespace ccl
