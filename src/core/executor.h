// The executor: runs a schedule's steps, either to completion on the calling thread (blocking
// calls) or a little at a time for a progress worker (nonblocking calls).
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/task.h"
#include "core/request.h"
#include "core/schedule.h"

namespace ccl {

// Runs every step to completion on this thread, blocking in its waits (a step's plain form where
// it has one); throws its failure.
[[gnu::always_inline]] inline void execute(const Schedule& schedule, const Buffers& bufs) {
    for (const Step& step : schedule.steps) {
        if (step.run)
            step.run(bufs);
        else
            step.start(bufs).run_blocking();
    }
}

class Execution;

// Who is told when an execution finishes (the communicator): it completes the execution's
// requests with the result.
class ExecutionOwner {
public:
    virtual void finished(Execution& e, ccl_result_t code, const std::string& message) = 0;

protected:
    ~ExecutionOwner() = default;
};

// One queued run of a schedule. A progress worker advances it; a thread waiting for its result
// may drive it instead (finish()), so that a nonblocking call waited on at once costs no thread
// hand-offs. Whoever holds its lock advances it; an execution runs only after the one issued
// before it on the same communicator (`prev`) has finished.
class Execution {
public:
    // `owner` (the communicator) is told of the end and kept alive until then, also while a
    // worker naps on this execution's wait.
    Execution(std::shared_ptr<const Schedule> schedule, const Buffers& bufs, RequestList reqs,
              std::shared_ptr<Execution> prev, std::shared_ptr<ExecutionOwner> owner)
        : schedule_(std::move(schedule)),
          bufs_(bufs),
          reqs_(std::move(reqs)),
          prev_(prev && !prev->finished() ? std::move(prev) : nullptr),
          owner_(std::move(owner)),
          has_prev_(prev_ != nullptr) {}

    // Advances as far as it can without blocking, unless another thread is advancing it.
    // Returns true once finished (the owner has been told, by whoever finished).
    bool progress();
    // Runs to the end on this thread, blocking in its waits, after the unfinished executions
    // issued before it; from then on the worker leaves them alone.
    void finish();
    // Sleeps at most `max` on what it waits for (a worker with nothing else to do), without
    // keeping a waiting thread from driving it meanwhile.
    void nap(std::chrono::microseconds max);
    bool finished() const { return finished_.load(std::memory_order_acquire); }
    // The requests that complete with its result.
    const RequestList& requests() const { return reqs_; }
    const Schedule& schedule() const { return *schedule_; }

private:
    bool advance(bool blocking);  // with mu_ held
    void drive();                 // finish() once the predecessors are finished

    std::mutex mu_;
    std::shared_ptr<const Schedule> schedule_;
    Buffers bufs_;
    RequestList reqs_;
    std::shared_ptr<Execution> prev_;        // dropped once finished
    std::shared_ptr<ExecutionOwner> owner_;  // dropped once finished
    size_t step_ = 0;
    Task task_;
    std::atomic<bool> finished_{false};
    std::atomic<bool> driven_{false};  // a waiting thread runs it: the worker keeps off
    std::atomic<bool> has_prev_;       // prev_ is set (finish() looks without the lock)
};

}  // namespace ccl
