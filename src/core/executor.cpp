#include "core/executor.h"

#include "core/error.h"

namespace ccl {

void execute(const Schedule& schedule, const Buffers& bufs) {
    for (const Step& step : schedule.steps) step.start(bufs).run_blocking();
}

bool Execution::progress() {
    ccl_result_t code = CCL_SUCCESS;
    std::string message;
    try {
        while (step_ < schedule_->steps.size()) {
            if (!task_.valid()) task_ = schedule_->steps[step_].start(bufs_);
            if (Waiter* w = task_.waiting(); w && !w->ready()) return false;
            task_.resume();
            if (!task_.done()) return false;
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
    on_done_(code, message);  // once, outside the try: its own failure is not the step's
    return true;
}

}  // namespace ccl
