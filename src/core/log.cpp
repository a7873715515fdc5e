#include "core/log.h"

#include <spdlog/sinks/stdout_sinks.h>

#include "core/config.h"
#include "core/error.h"

namespace ccl {

spdlog::logger& log() {
    static std::shared_ptr<spdlog::logger> logger = [] {
        auto l = std::make_shared<spdlog::logger>(
            "ccl", std::make_shared<spdlog::sinks::stderr_sink_mt>());
        l->set_pattern("[ccl %L %P] %v");
        // A malformed CCL_LOG_LEVEL is reported by whichever call parses the config; log at warn.
        try {
            l->set_level(config().log_level);
        } catch (const Error&) {
            l->set_level(spdlog::level::warn);
        }
        return l;
    }();
    return *logger;
}

}  // namespace ccl
