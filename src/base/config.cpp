#include "base/config.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <string_view>

#include "base/error.h"
#include "base/hex.h"
#include "base/immortal.h"
#include "base/number.h"

namespace ccl {

namespace {

[[noreturn]] void bad(const char* name, const char* value, const std::string& expected) {
    throw Error(CCL_ERROR_INVALID_ARGUMENT,
                std::string(name) + "='" + value + "' is malformed: expected " + expected);
}

// Every number goes through base/number.h: digits only (and a decimal point for seconds), so that
// a value that reads as something else ("0x10", " 5", "+3", "-0", "1e3") is refused, not guessed.
double parse_seconds(const char* name, const char* value) {
    const std::optional<double> v = parse_decimal_fraction(value);
    if (!v || !std::isfinite(*v) || *v <= 0 || *v > 1e7)
        bad(name, value, "a number of seconds > 0 (digits, optionally with a decimal point)");
    return *v;
}

// A byte count with an optional K, M or G suffix (powers of 1024).
size_t parse_bytes(const char* name, const char* value, size_t min, size_t max) {
    std::string_view text = value;
    unsigned long long mult = 1;
    if (!text.empty()) switch (text.back()) {
            case 'k':
            case 'K': mult = 1ull << 10; break;
            case 'm':
            case 'M': mult = 1ull << 20; break;
            case 'g':
            case 'G': mult = 1ull << 30; break;
            default: break;
        }
    if (mult != 1) text.remove_suffix(1);
    const std::optional<uint64_t> parsed = parse_decimal(text);
    if (!parsed) bad(name, value, "a byte count like 65536 or 64K");
    const uint64_t v = *parsed;
    if (v > max / mult || v * mult < min || v * mult > max)
        bad(name, value,
            "between " + std::to_string(min) + " and " + std::to_string(max) + " bytes");
    return size_t(v * mult);
}

// A whole number in [min, max] (min >= 0: no setting takes a negative one).
long parse_int(const char* name, const char* value, long min, long max) {
    const std::optional<uint64_t> v = parse_decimal(value);
    if (!v || *v < uint64_t(min) || *v > uint64_t(max))
        bad(name, value,
            "an integer in [" + std::to_string(min) + ", " + std::to_string(max) +
                "] (digits only)");
    return long(*v);
}

// "auto", or a list of cpu numbers and ranges: "3", "0,2", "4-7,12".
std::vector<int> parse_cpu_list(const char* name, const char* value) {
    std::vector<int> cpus;
    std::string s = value;
    if (s == "auto") return cpus;
    const std::string expected = "auto, or a cpu list like 3 or 0,2 or 4-7";
    size_t pos = 0;
    while (pos <= s.size()) {
        size_t comma = s.find(',', pos);
        std::string item =
            s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        size_t dash = item.find('-');
        const std::optional<uint64_t> lo = parse_decimal(std::string_view(item).substr(0, dash));
        const std::optional<uint64_t> hi =
            dash == std::string::npos ? lo : parse_decimal(std::string_view(item).substr(dash + 1));
        if (!lo || !hi || *hi < *lo || *hi > 65535) bad(name, value, expected);
        for (uint64_t c = *lo; c <= *hi; ++c) cpus.push_back(int(c));
        if (comma == std::string::npos) break;
        pos = comma + 1;
    }
    return cpus;
}

}  // namespace

Config parse_config(const char* (*getenv_fn)(const char*)) {
    Config c;
    if (const char* v = getenv_fn("CCL_LOG_LEVEL")) {
        std::string s = v;
        if (s == "error")
            c.log_level = LogLevel::error;
        else if (s == "warn")
            c.log_level = LogLevel::warn;
        else if (s == "info")
            c.log_level = LogLevel::info;
        else if (s == "debug")
            c.log_level = LogLevel::debug;
        else if (s == "trace")
            c.log_level = LogLevel::trace;
        else
            bad("CCL_LOG_LEVEL", v, "one of error, warn, info, debug, trace");
    }
    if (const char* v = getenv_fn("CCL_TIMEOUT")) c.timeout_s = parse_seconds("CCL_TIMEOUT", v);
    if (const char* v = getenv_fn("CCL_KVS_TIMEOUT"))
        c.kvs_timeout_s = parse_seconds("CCL_KVS_TIMEOUT", v);
    if (const char* v = getenv_fn("CCL_KVS_IFACE")) c.kvs_iface = v;
    if (const char* v = getenv_fn("CCL_KVS_PORT"))
        c.kvs_port = int(parse_int("CCL_KVS_PORT", v, 1, 65535));
    if (const char* v = getenv_fn("CCL_KVS_SECRET")) {
        if (const std::optional<std::string> bytes = from_hex(v); bytes && bytes->size() == 16) {
            c.kvs_secret.emplace();
            std::memcpy(c.kvs_secret->data(), bytes->data(), 16);
        }
        // The value itself is never repeated: it is a secret.
        if (!c.kvs_secret)
            throw Error(CCL_ERROR_INVALID_ARGUMENT,
                        "CCL_KVS_SECRET is malformed: expected 32 hex digits (e.g. from "
                        "'od -An -tx1 -N16 /dev/urandom | tr -d \" \\n\"')");
    }
    if (const char* v = getenv_fn("CCL_PROCESS_LAUNCHER"))
        c.process_launcher = parse_launcher("CCL_PROCESS_LAUNCHER", v);
    if (const char* v = getenv_fn("CCL_SHM_BUFFER_SIZE"))
        c.shm_buffer_size = parse_bytes("CCL_SHM_BUFFER_SIZE", v, 4096, size_t(1) << 30);
    if (const char* v = getenv_fn("CCL_ALLREDUCE")) {
        std::string s = v;
        if (s != "auto" && s != "direct" && s != "rsag" && s != "cma")
            bad("CCL_ALLREDUCE", v, "one of auto, direct, rsag, cma");
        c.allreduce_algo = s;
    }
    if (const char* v = getenv_fn("CCL_ALLREDUCE_DIRECT_MAX")) {
        c.allreduce_direct_max = parse_bytes("CCL_ALLREDUCE_DIRECT_MAX", v, 0, size_t(1) << 30);
        c.allreduce_direct_max_set = true;
    }
    if (const char* v = getenv_fn("CCL_ALLREDUCE_CMA_MIN"))
        c.allreduce_cma_min = parse_bytes("CCL_ALLREDUCE_CMA_MIN", v, 0, size_t(1) << 40);
    if (const char* v = getenv_fn("CCL_ALLREDUCE_CMA_MAX")) {
        c.allreduce_cma_max = parse_bytes("CCL_ALLREDUCE_CMA_MAX", v, 0, size_t(1) << 40);
        c.allreduce_cma_max_set = true;
    }
    // Single-copy bounds: "auto" (0) or a byte count of at least 1.
    auto cma_bound = [](const char* name, const char* v) {
        return std::string(v) == "auto" ? 0 : parse_bytes(name, v, 1, size_t(1) << 40);
    };
    if (const char* v = getenv_fn("CCL_CMA_MIN")) c.cma_min = cma_bound("CCL_CMA_MIN", v);
    if (const char* v = getenv_fn("CCL_ALLGATHER_CMA_MAX"))
        c.allgather_cma_max = cma_bound("CCL_ALLGATHER_CMA_MAX", v);
    if (const char* v = getenv_fn("CCL_ALLTOALL_CMA_MAX"))
        c.alltoall_cma_max = cma_bound("CCL_ALLTOALL_CMA_MAX", v);
    if (const char* v = getenv_fn("CCL_CMA_THREADS"))
        c.cma_threads = std::string(v) == "auto" ? 0 : int(parse_int("CCL_CMA_THREADS", v, 1, 64));
    if (const char* v = getenv_fn("CCL_CMA_SLICE")) {
        c.cma_slice = parse_bytes("CCL_CMA_SLICE", v, 4096, size_t(1) << 30);
        if (c.cma_slice & (c.cma_slice - 1))
            bad("CCL_CMA_SLICE", v, "a power of two from 4K to 1G (a page table's span: 2M)");
    }
    if (const char* v = getenv_fn("CCL_POLL_TIME_US"))
        c.poll_time_us = parse_int("CCL_POLL_TIME_US", v, 0, 10000000);
    if (const char* v = getenv_fn("CCL_WORKER_COUNT"))
        c.worker_count = int(parse_int("CCL_WORKER_COUNT", v, 1, 64));
    if (const char* v = getenv_fn("CCL_WORKER_AFFINITY"))
        c.worker_cpus = parse_cpu_list("CCL_WORKER_AFFINITY", v);
    if (const char* v = getenv_fn("CCL_SINGLE_COPY"))
        c.single_copy = parse_int("CCL_SINGLE_COPY", v, 0, 1) != 0;
    if (const char* v = getenv_fn("CCL_BIND")) {
        const std::string s = v;
        if (s != "auto" && s != "none") bad("CCL_BIND", v, "auto or none");
        c.bind = s == "auto";
    }
    if (const char* v = getenv_fn("CCL_NODE_ID")) {
        std::string s = v;
        // It travels in whitespace-separated bootstrap records.
        if (s.empty() || s.size() > 200 || s.find_first_of(" \t\n\r") != std::string::npos)
            bad("CCL_NODE_ID", v, "a non-empty name without spaces, at most 200 characters");
        c.node_id = s;
    }
    if (const char* v = getenv_fn("CCL_CACHE_SIZE"))
        c.cache_size = size_t(parse_int("CCL_CACHE_SIZE", v, 0, 1000000));
    // XPU (Level Zero).
    if (const char* v = getenv_fn("CCL_ZE_LIBRARY_PATH")) {
        if (!*v) bad("CCL_ZE_LIBRARY_PATH", v, "the path of the Level Zero loader library");
        c.ze_library_path = v;
    }
    if (const char* v = getenv_fn("CCL_ZE_ENABLE"))
        c.ze_enable = parse_int("CCL_ZE_ENABLE", v, 0, 1) != 0;
    if (const char* v = getenv_fn("CCL_ZE_IPC")) c.ze_ipc = parse_int("CCL_ZE_IPC", v, 0, 1) != 0;
    if (const char* v = getenv_fn("CCL_FABRIC_PIPELINE_CHUNK"))
        c.fabric_pipeline_chunk =
            parse_bytes("CCL_FABRIC_PIPELINE_CHUNK", v, 64u << 10, size_t(1) << 40);
    if (const char* v = getenv_fn("CCL_ZE_PIPELINE_CHUNK"))
        c.ze_pipeline_chunk = parse_bytes("CCL_ZE_PIPELINE_CHUNK", v, 4096, size_t(1) << 40);
    return c;
}

const char* launcher_name(Launcher l) {
    switch (l) {
        case Launcher::none: return "none";
        case Launcher::cclrun: return "cclrun";
        case Launcher::hydra: return "hydra";
        case Launcher::ompi: return "ompi";
        case Launcher::torchrun: return "torchrun";
        case Launcher::slurm: return "slurm";
    }
    return "?";
}

std::optional<Launcher> parse_launcher(const char* var, const std::string& text) {
    if (text == "auto") return std::nullopt;
    for (Launcher l : {Launcher::none, Launcher::cclrun, Launcher::hydra, Launcher::ompi,
                       Launcher::torchrun, Launcher::slurm})
        if (text == launcher_name(l)) return l;
    throw Error(CCL_ERROR_INVALID_ARGUMENT,
                std::string(var) + "='" + text +
                    "' is malformed: expected one of auto, cclrun, hydra, ompi, torchrun, slurm, "
                    "none");
}

const Config& config() {
    static std::mutex mu;
    // Never destroyed: calls made while the process exits read it too.
    static std::optional<Config>& parsed = immortal<std::optional<Config>>();
    std::lock_guard<std::mutex> lock(mu);
    if (!parsed) parsed = parse_config([](const char* n) -> const char* { return std::getenv(n); });
    return *parsed;
}

}  // namespace ccl
