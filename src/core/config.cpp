#include "core/config.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <optional>

#include "core/error.h"

namespace ccl {

namespace {

[[noreturn]] void bad(const char* name, const char* value, const std::string& expected) {
    throw Error(CCL_ERROR_INVALID_ARGUMENT,
                std::string(name) + "='" + value + "' is malformed: expected " + expected);
}

double parse_seconds(const char* name, const char* value) {
    char* end = nullptr;
    errno = 0;
    double v = std::strtod(value, &end);
    if (end == value || *end != '\0' || errno != 0 || !std::isfinite(v) || v <= 0 || v > 1e7)
        bad(name, value, "a number of seconds > 0");
    return v;
}

// A byte count with an optional K, M or G suffix (powers of 1024).
size_t parse_bytes(const char* name, const char* value, size_t min, size_t max) {
    char* end = nullptr;
    errno = 0;
    unsigned long long v = std::strtoull(value, &end, 10);
    if (end == value || errno != 0 || value[0] == '-')
        bad(name, value, "a byte count like 65536 or 64K");
    unsigned long long mult = 1;
    switch (*end) {
        case 'k':
        case 'K':
            mult = 1ull << 10;
            ++end;
            break;
        case 'm':
        case 'M':
            mult = 1ull << 20;
            ++end;
            break;
        case 'g':
        case 'G':
            mult = 1ull << 30;
            ++end;
            break;
        default: break;
    }
    if (*end != '\0') bad(name, value, "a byte count like 65536 or 64K");
    if (v > max / mult || v * mult < min || v * mult > max)
        bad(name, value,
            "between " + std::to_string(min) + " and " + std::to_string(max) + " bytes");
    return size_t(v * mult);
}

}  // namespace

Config parse_config(const char* (*getenv_fn)(const char*)) {
    Config c;
    if (const char* v = getenv_fn("CCL_LOG_LEVEL")) {
        std::string s = v;
        if (s == "error")
            c.log_level = spdlog::level::err;
        else if (s == "warn")
            c.log_level = spdlog::level::warn;
        else if (s == "info")
            c.log_level = spdlog::level::info;
        else if (s == "debug")
            c.log_level = spdlog::level::debug;
        else if (s == "trace")
            c.log_level = spdlog::level::trace;
        else
            bad("CCL_LOG_LEVEL", v, "one of error, warn, info, debug, trace");
    }
    if (const char* v = getenv_fn("CCL_TIMEOUT")) c.timeout_s = parse_seconds("CCL_TIMEOUT", v);
    if (const char* v = getenv_fn("CCL_KVS_TIMEOUT"))
        c.kvs_timeout_s = parse_seconds("CCL_KVS_TIMEOUT", v);
    if (const char* v = getenv_fn("CCL_KVS_IFACE")) c.kvs_iface = v;
    if (const char* v = getenv_fn("CCL_SHM_BUFFER_SIZE"))
        c.shm_buffer_size = parse_bytes("CCL_SHM_BUFFER_SIZE", v, 4096, size_t(1) << 30);
    if (const char* v = getenv_fn("CCL_ALLREDUCE")) {
        std::string s = v;
        if (s != "auto" && s != "direct" && s != "rsag")
            bad("CCL_ALLREDUCE", v, "one of auto, direct, rsag");
        c.allreduce_algo = s;
    }
    if (const char* v = getenv_fn("CCL_ALLREDUCE_DIRECT_MAX"))
        c.allreduce_direct_max = parse_bytes("CCL_ALLREDUCE_DIRECT_MAX", v, 0, size_t(1) << 30);
    return c;
}

const Config& config() {
    static std::mutex mu;
    static std::optional<Config> parsed;
    std::lock_guard<std::mutex> lock(mu);
    if (!parsed) parsed = parse_config([](const char* n) -> const char* { return std::getenv(n); });
    return *parsed;
}

}  // namespace ccl
