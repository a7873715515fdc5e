#include "core/executor.h"

#include "core/error.h"

namespace ccl {

void execute(const Schedule& schedule, const Buffers& bufs) {
    for (const Step& step : schedule.steps) step.start(bufs).run_blocking();
}

bool Execution::progress() {
    try {
        while (step_ < schedule_->steps.size()) {
            if (!task_.valid()) task_ = schedule_->steps[step_].start(bufs_);
            if (Waiter* w = task_.waiting(); w && !w->ready()) return false;
            task_.resume();
            if (!task_.done()) return false;
            task_ = Task();
            ++step_;
        }
        on_done_(CCL_SUCCESS, {});
    } catch (const Error& e) {
        on_done_(e.code(), e.what());
    } catch (const std::exception& e) {
        on_done_(CCL_ERROR_INTERNAL, std::string("internal error: ") + e.what());
    }
    return true;
}

}  // namespace ccl
