// The completion of one collective: what a ccl_request_t stands for, and what a blocking call
// waits on when it must queue behind nonblocking work.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "ccl/ccl.h"
#include "core/pool.h"

namespace ccl {

class Execution;

class Request {
public:
    // The execution that completes this request, which wait() may drive itself.
    void set_execution(std::weak_ptr<Execution> e) { execution_ = std::move(e); }
    // Called once, by whoever ran the collective.
    void complete(ccl_result_t code, std::string message = {});
    bool done() const { return done_.load(std::memory_order_acquire); }
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
    std::atomic<bool> done_{false};  // set last; sleepers wait on it (futex)
    ccl_result_t code_ = CCL_SUCCESS;
    std::string message_;
    std::weak_ptr<Execution> execution_;
};

// The requests one execution completes (one, or a group's several).
using RequestList = std::vector<std::shared_ptr<Request>, PoolAllocator<std::shared_ptr<Request>>>;

}  // namespace ccl
