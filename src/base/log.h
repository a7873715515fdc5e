// Logging: the level comes from CCL_LOG_LEVEL (see config.h); lines go to stderr through spdlog.
// This header is deliberately light (spdlog and fmt cost about 10 s of compile per file that
// includes them): messages use "{}" placeholders only, filled with each argument's plain text,
// and nothing is formatted unless the level is on.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>

namespace ccl {

enum class LogLevel { trace, debug, info, warn, error, off };

// The name CCL_LOG_LEVEL takes for a level ("warn", "debug", ...).
const char* log_level_name(LogLevel level);

class Logger {
public:
    bool enabled(LogLevel level) const { return level >= level_; }

    template <class... A>
    void trace(std::string_view format, const A&... args) {
        write(LogLevel::trace, format, args...);
    }
    template <class... A>
    void debug(std::string_view format, const A&... args) {
        write(LogLevel::debug, format, args...);
    }
    template <class... A>
    void info(std::string_view format, const A&... args) {
        write(LogLevel::info, format, args...);
    }
    template <class... A>
    void warn(std::string_view format, const A&... args) {
        write(LogLevel::warn, format, args...);
    }
    template <class... A>
    void error(std::string_view format, const A&... args) {
        write(LogLevel::error, format, args...);
    }

    explicit Logger(LogLevel level) : level_(level) {}

private:
    template <class... A>
    void write(LogLevel level, std::string_view format, const A&... args) {
        if (enabled(level)) emit(level, format, {text(args)...});
    }

    template <class T>
    static std::string text(const T& v) {
        if constexpr (std::is_same_v<T, char*> || std::is_same_v<T, const char*>)
            return v ? std::string(v) : std::string("(null)");
        else if constexpr (std::is_convertible_v<const T&, std::string_view>)
            return std::string(std::string_view(v));
        else if constexpr (std::is_same_v<T, bool>)
            return v ? "true" : "false";
        else if constexpr (std::is_enum_v<T>)
            return std::to_string(static_cast<std::underlying_type_t<T>>(v));
        else if constexpr (std::is_floating_point_v<T>)
            return number(double(v));
        else
            return std::to_string(v);
    }
    static std::string number(double v);  // "%g"

    // Replaces each "{}" of format with the next argument's text and writes the line.
    void emit(LogLevel level, std::string_view format, std::initializer_list<std::string> args);

    LogLevel level_;
};

// The library's logger, created on first use at the configured level. Its lines start with
// "[ccl L pid host hh:mm:ss.mmm rank R]": the level's letter, where and when, and the job rank of
// the process's first communicator (absent before there is one).
Logger& log();
// Sets the rank the lines name, once: later calls keep the first (a process's first communicator
// is its job's, and groups made later have ranks of their own).
void log_rank(int rank);

}  // namespace ccl
