#include "core/request.h"

#include "core/error.h"

namespace ccl {

void Request::complete(ccl_result_t code, std::string message) {
    {
        std::lock_guard<std::mutex> lock(mu_);
        code_ = code;
        message_ = std::move(message);
        done_.store(true, std::memory_order_release);
    }
    cv_.notify_all();
}

void Request::wait() {
    if (done()) return;
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return done(); });
}

void Request::rethrow() const {
    if (code_ != CCL_SUCCESS) throw Error(code_, message_);
}

}  // namespace ccl
