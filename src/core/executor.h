// The executor: runs a schedule's steps, either to completion on the calling thread (blocking
// calls) or a little at a time for a progress worker (nonblocking calls).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "core/schedule.h"
#include "core/task.h"

namespace ccl {

// Runs every step to completion on this thread, blocking in its waits; throws its failure.
void execute(const Schedule& schedule, const Buffers& bufs);

// One queued run of a schedule. A progress worker advances it; a thread waiting for its result
// may drive it instead (finish()), so that a nonblocking call waited on at once costs no thread
// hand-offs. Whoever holds its lock advances it; an execution runs only after the one issued
// before it on the same communicator (`prev`) has finished.
class Execution {
public:
    using OnDone = std::function<void(ccl_result_t, const std::string&)>;
    // `owner` (the communicator) is kept alive while a worker naps on this execution's wait.
    Execution(std::shared_ptr<const Schedule> schedule, const Buffers& bufs, OnDone on_done,
              std::shared_ptr<Execution> prev, std::shared_ptr<void> owner)
        : schedule_(std::move(schedule)),
          bufs_(bufs),
          on_done_(std::move(on_done)),
          prev_(std::move(prev)),
          owner_(std::move(owner)) {}

    // Advances as far as it can without blocking, unless another thread is advancing it.
    // Returns true once finished (on_done has been called with the result, by whoever finished).
    bool progress();
    // Runs to the end on this thread, blocking in its waits, after the unfinished executions
    // issued before it; from then on the worker leaves them alone.
    void finish();
    // Sleeps at most `max` on what it waits for (a worker with nothing else to do), without
    // keeping a waiting thread from driving it meanwhile.
    void nap(std::chrono::microseconds max);
    bool finished() const { return finished_.load(std::memory_order_acquire); }

private:
    bool advance(bool blocking);  // with mu_ held
    void drive();                 // finish() once the predecessors are finished

    std::mutex mu_;
    std::shared_ptr<const Schedule> schedule_;
    Buffers bufs_;
    OnDone on_done_;
    std::shared_ptr<Execution> prev_;  // dropped once finished
    std::shared_ptr<void> owner_;      // dropped once finished
    size_t step_ = 0;
    Task task_;
    std::atomic<bool> finished_{false};
    std::atomic<bool> driven_{false};  // a waiting thread runs it: the worker keeps off
};

}  // namespace ccl
