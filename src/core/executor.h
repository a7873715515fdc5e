// The executor: runs a schedule's steps, either to completion on the calling thread (blocking
// calls) or a little at a time for a progress worker (nonblocking calls).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "core/schedule.h"
#include "core/task.h"

namespace ccl {

// Runs every step to completion on this thread, blocking in its waits; throws its failure.
void execute(const Schedule& schedule, const Buffers& bufs);

// One queued run of a schedule.
class Execution {
public:
    using OnDone = std::function<void(ccl_result_t, const std::string&)>;
    Execution(std::shared_ptr<const Schedule> schedule, const Buffers& bufs, OnDone on_done)
        : schedule_(std::move(schedule)), bufs_(bufs), on_done_(std::move(on_done)) {}

    // Advances as far as it can without blocking. Returns true once finished, after calling
    // on_done with the result.
    bool progress();
    // What the current step waits for (nullptr if it can run).
    Waiter* waiting() const { return task_.valid() ? task_.waiting() : nullptr; }

private:
    std::shared_ptr<const Schedule> schedule_;
    Buffers bufs_;
    OnDone on_done_;
    size_t step_ = 0;
    Task task_;
};

}  // namespace ccl
