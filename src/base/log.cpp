#include "base/log.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <type_traits>

#include "base/config.h"
#include "base/error.h"
#include "base/immortal.h"

namespace ccl {

namespace {

spdlog::level::level_enum to_spdlog(LogLevel level) {
    switch (level) {
        case LogLevel::trace: return spdlog::level::trace;
        case LogLevel::debug: return spdlog::level::debug;
        case LogLevel::info: return spdlog::level::info;
        case LogLevel::warn: return spdlog::level::warn;
        case LogLevel::error: return spdlog::level::err;
        case LogLevel::off: break;
    }
    return spdlog::level::off;
}

std::atomic<int> job_rank{-1};

spdlog::logger& sink() {
    // Never destroyed: communicators the application left open are destroyed by exit handlers,
    // possibly after this function's statics would be, and they may still log.
    static spdlog::logger* logger = [] {
        auto* l =
            &immortal<spdlog::logger>("ccl", std::make_shared<spdlog::sinks::stderr_sink_mt>());
        char host[256] = "?";
        gethostname(host, sizeof host - 1);
        std::string name;  // as a pattern: its % doubled
        for (const char* c = host; *c; ++c)
            name += *c == '%' ? std::string("%%") : std::string(1, *c);
        // emit() closes the bracket, with the rank where there is one.
        l->set_pattern("[ccl %L %P " + name + " %H:%M:%S.%e%v");
        l->set_level(spdlog::level::trace);  // Logger::enabled has already filtered
        return l;
    }();
    return *logger;
}

}  // namespace

const char* log_level_name(LogLevel level) {
    switch (level) {
        case LogLevel::trace: return "trace";
        case LogLevel::debug: return "debug";
        case LogLevel::info: return "info";
        case LogLevel::warn: return "warn";
        case LogLevel::error: return "error";
        case LogLevel::off: break;
    }
    return "off";
}

std::string Logger::number(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
}

void Logger::emit(LogLevel level, std::string_view format,
                  std::initializer_list<std::string> args) {
    std::string line;
    line.reserve(format.size() + 16 * args.size());
    auto arg = args.begin();
    for (size_t i = 0; i < format.size(); ++i) {
        if (format[i] == '{' && i + 1 < format.size() && format[i + 1] == '}' &&
            arg != args.end()) {
            line += *arg++;
            ++i;
        } else {
            line += format[i];
        }
    }
    const int rank = job_rank.load(std::memory_order_relaxed);
    sink().log(to_spdlog(level), "{}] {}", rank >= 0 ? " rank " + std::to_string(rank) : "", line);
}

void log_rank(int rank) {
    int unset = -1;
    job_rank.compare_exchange_strong(unset, rank, std::memory_order_relaxed);
}

// Trivially destructible, so never destroyed: calls made while the process exits log too.
static_assert(std::is_trivially_destructible_v<Logger>);

Logger& log() {
    static Logger logger = [] {
        // A malformed CCL_LOG_LEVEL is reported by whichever call parses the config; log at warn.
        try {
            return Logger(config().log_level);
        } catch (const Error&) {
            return Logger(LogLevel::warn);
        }
    }();
    return logger;
}

}  // namespace ccl
