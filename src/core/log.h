// Logging through spdlog; the level comes from CCL_LOG_LEVEL (see config.h).
#pragma once

#include <spdlog/spdlog.h>

namespace ccl {

// The library's logger ("ccl"), created on first use at the configured level, writing to stderr.
spdlog::logger& log();

}  // namespace ccl
