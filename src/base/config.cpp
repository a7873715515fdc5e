#include "base/config.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

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

// Whether `text` is oneCCL's allreduce choice: its algorithms, each alone or with a size range,
// ';' between them ("ring", "direct:0-8192;ring:8193-max").
bool oneccl_allreduce_choice(std::string_view text) {
    static constexpr std::string_view kAlgos[] = {
        "direct",      "rabenseifner",       "nreduce", "ring", "ring_rma",
        "double_tree", "recursive_doubling", "2d",      "topo"};
    auto bound = [](std::string_view b) { return b == "max" || all_digits(b); };
    while (true) {
        const size_t semi = text.find(';');
        std::string_view entry = text.substr(0, semi);
        const size_t colon = entry.find(':');
        if (std::find(std::begin(kAlgos), std::end(kAlgos), entry.substr(0, colon)) ==
            std::end(kAlgos))
            return false;
        if (colon != std::string_view::npos) {
            const std::string_view range = entry.substr(colon + 1);
            const size_t dash = range.find('-');
            if (dash == std::string_view::npos || !bound(range.substr(0, dash)) ||
                !bound(range.substr(dash + 1)))
                return false;
        }
        if (semi == std::string_view::npos) return true;
        text.remove_prefix(semi + 1);
    }
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

// Text a value shows as, the way one would set it.
std::string number_text(long long v) { return std::to_string(v); }

std::string seconds_text(double v) {
    char buf[64];
    const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed);
    return ec == std::errc() ? std::string(buf, end) : "?";
}

// With the largest suffix that divides it: 65536 -> 64K, 1000 -> 1000.
std::string bytes_text(size_t v) {
    for (const auto& [shift, suffix] : {std::pair{30, "G"}, {20, "M"}, {10, "K"}})
        if (v && v % (size_t(1) << shift) == 0) return std::to_string(v >> shift) + suffix;
    return std::to_string(v);
}

std::string auto_or_bytes(size_t v) { return v ? bytes_text(v) : "auto"; }
std::string unset_or(const std::string& v) { return v.empty() ? "(unset)" : v; }
std::string flag_text(bool v) { return v ? "1" : "0"; }
// For a knob read elsewhere: the environment's text.
std::string raw_text(const Config&, const char* raw) { return raw ? raw : "(unset)"; }

// "0,2-3,8".
std::string cpu_list_text(const std::vector<int>& cpus) {
    if (cpus.empty()) return "auto";
    std::string s;
    for (size_t i = 0; i < cpus.size();) {
        size_t j = i;
        while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
        s += (s.empty() ? "" : ",") + std::to_string(cpus[i]);
        if (j > i) s += "-" + std::to_string(cpus[j]);
        i = j + 1;
    }
    return s;
}

constexpr size_t kTiB = size_t(1) << 40;

// Single-copy bounds: "auto" (0) or a byte count of at least 1.
size_t cma_bound(const char* name, const char* v) {
    return std::string(v) == "auto" ? 0 : parse_bytes(name, v, 1, kTiB);
}

// The knobs, in the order they are parsed. A doc is one line of docs/env.md; what it says in
// full, and the measurements behind a default, go in docs/tuning.md (`more`).
constexpr Knob kKnobs[] = {
    {"CCL_LOG_LEVEL", "error, warn, info, debug, trace",
     "At `info` each rank says which transport and algorithm it chose, once per communicator and "
     "algorithm. Failed calls are logged at `error` (argument errors at `debug`; a collective "
     "mismatch at `error`, with the values that differed). Lines start `[ccl L pid host "
     "hh:mm:ss.mmm rank R]`: level, process, host, time of day and the job rank of the "
     "process's first communicator.",
     [](Config& c, const char* name, const char* v) {
         const std::string s = v;
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
             bad(name, v, "one of error, warn, info, debug, trace");
     },
     [](const Config& c, const char*) -> std::string { return log_level_name(c.log_level); },
     false},
    {"CCL_TIMEOUT", "seconds > 0",
     "How long any wait inside a collective may last before the call fails with "
     "`CCL_ERROR_TIMEOUT`. A dead peer is noticed sooner (about 0.1 s) and reported as "
     "`CCL_ERROR_PEER_FAILURE`.",
     [](Config& c, const char* name, const char* v) { c.timeout_s = parse_seconds(name, v); },
     [](const Config& c, const char*) { return seconds_text(c.timeout_s); }, false},
    {"CCL_KVS_TIMEOUT", "seconds > 0",
     "How long connecting to the KVS, each bootstrap wait during communicator creation, and each "
     "wait on the launcher (PMI barrier, PMIx fence) may last.",
     [](Config& c, const char* name, const char* v) { c.kvs_timeout_s = parse_seconds(name, v); },
     [](const Config& c, const char*) { return seconds_text(c.kvs_timeout_s); }, false},
    {"CCL_KVS_IFACE", "an interface name",
     "The network interface the KVS server binds and advertises (e.g. `eth0`). Unset: it listens "
     "on every interface and advertises the first up non-loopback IPv4 address, or `127.0.0.1` on "
     "a host with only loopback.",
     [](Config& c, const char*, const char* v) { c.kvs_iface = v; },
     [](const Config& c, const char*) { return unset_or(c.kvs_iface); }, false},
    {"CCL_KVS_PORT", "1 to 65535",
     "The port rank 0 serves the KVS at under torchrun, or under srun with `MASTER_ADDR` and no "
     "PMI; the same on every rank. Unset: `MASTER_PORT + 1` (`docs/launching.md`).",
     [](Config& c, const char* name, const char* v) {
         c.kvs_port = int(parse_int(name, v, 1, 65535));
     },
     [](const Config& c, const char*) {
         return c.kvs_port ? number_text(c.kvs_port) : std::string("(unset)");
     },
     false},
    {"CCL_KVS_SECRET", "32 hex digits",
     "The job secret, the same on every rank, under torchrun or under srun with `MASTER_ADDR` and "
     "no PMI. Unset: derived from `TORCHELASTIC_RUN_ID`, else none (rank 0 warns). Never printed.",
     [](Config& c, const char* name, const char* v) {
         if (const std::optional<std::string> bytes = from_hex(v); bytes && bytes->size() == 16) {
             c.kvs_secret.emplace();
             std::memcpy(c.kvs_secret->data(), bytes->data(), 16);
             return;
         }
         // The value itself is never repeated: it is a secret.
         throw Error(CCL_ERROR_INVALID_ARGUMENT,
                     std::string(name) +
                         " is malformed: expected 32 hex digits (e.g. from "
                         "'od -An -tx1 -N16 /dev/urandom | tr -d \" \\n\"')");
     },
     [](const Config& c, const char*) -> std::string {
         return c.kvs_secret ? "(set, not shown)" : "(unset)";
     },
     true},
    {"CCL_PROCESS_LAUNCHER",
     "auto, cclrun, hydra, ompi, torchrun, slurm, none; oneCCL's pmix reads as auto",
     "Which launcher's variables `ccl_comm_create_from_env` reads: `auto` detects it "
     "(`docs/launching.md`); `hydra` is MPICH's mpiexec, `ompi` Open MPI's mpirun, `slurm` srun, "
     "`none` the application's own KVS and `ccl_comm_create`. A named launcher's variables must "
     "all be there; the others' are ignored.",
     [](Config& c, const char* name, const char* v) {
         if (std::string_view(v) == "pmix") {  // oneCCL's
             c.process_launcher = std::nullopt;
             c.oneccl_values.push_back(std::string(name) +
                                       "=pmix is oneCCL's: ccl finds a PMIx launcher (Open MPI's "
                                       "mpirun, srun --mpi=pmix) by itself (auto)");
             return;
         }
         c.process_launcher = parse_launcher(name, v);
     },
     [](const Config& c, const char*) -> std::string {
         return c.process_launcher ? launcher_name(*c.process_launcher) : "auto";
     },
     false},
    {"CCL_SHM_BUFFER_SIZE", "4K to 1G bytes",
     "Bytes of each rank's two shared-memory buffers; larger messages go in chunks. A "
     "communicator's arena takes 2 x ranks x this of `/dev/shm`; rank 0's value applies to all. "
     "Unset: 1M times the rank's team (`CCL_RANK_THREADS`), at most 4M.",
     [](Config& c, const char* name, const char* v) {
         c.shm_buffer_size = parse_bytes(name, v, 4096, size_t(1) << 30);
         c.shm_buffer_size_set = true;
     },
     [](const Config& c, const char*) { return bytes_text(c.shm_buffer_size); }, true},
    {"CCL_ALLREDUCE", "auto, direct, rsag, cma; oneCCL's algorithms read as auto",
     "The allreduce among co-located ranks (and reduce's beyond `CCL_ALLREDUCE_DIRECT_MAX`, and "
     "reduce_scatter's: single copy with `cma`, else through the arena): `direct` (every rank "
     "reduces all inputs), `rsag` (reduce-scatter, then all-gather, through the arena), `cma` "
     "(the same single-copy) or `auto` (by size).",
     [](Config& c, const char* name, const char* v) {
         const std::string s = v;
         if (s == "auto" || s == "direct" || s == "rsag" || s == "cma") {
             c.allreduce_algo = s;
         } else if (oneccl_allreduce_choice(s)) {
             c.allreduce_algo = "auto";
             c.oneccl_values.push_back(std::string(name) + "=" + s +
                                       " is oneCCL's choice: ccl chooses among direct, rsag and "
                                       "cma by size itself (auto); set one of those to force it");
         } else {
             bad(name, v,
                 "one of auto, direct, rsag, cma (or oneCCL's algorithms, as ring or "
                 "direct:0-8192;ring:8193-max)");
         }
     },
     [](const Config& c, const char*) { return c.allreduce_algo; }, true},
    {"CCL_ALLREDUCE_DIRECT_MAX", "0 to 1G bytes",
     "With `CCL_ALLREDUCE=auto`, the largest allreduce that uses `direct`, and the largest a group "
     "fuses with its neighbours. Unset, it shrinks with more than 2 co-located ranks and bounds "
     "reduce differently; set, it holds as given.",
     [](Config& c, const char* name, const char* v) {
         c.allreduce_direct_max = parse_bytes(name, v, 0, size_t(1) << 30);
         c.allreduce_direct_max_set = true;
     },
     [](const Config& c, const char*) { return bytes_text(c.allreduce_direct_max); }, true},
    {"CCL_ALLREDUCE_CMA_MIN", "0 to 1024G bytes",
     "With `auto`, single-copy allreduce, reduce and reduce_scatter start where each rank's slice "
     "(message bytes / ranks; a reduce_scatter's block) reaches this, where the probe allows "
     "them (unset: 16K for allreduces and reduce-scatters where a byte through the kernel pays "
     "but its fixed cost is dear).",
     [](Config& c, const char* name, const char* v) {
         c.allreduce_cma_min = parse_bytes(name, v, 0, kTiB);
         c.allreduce_cma_min_set = true;
     },
     [](const Config& c, const char*) { return bytes_text(c.allreduce_cma_min); }, false},
    {"CCL_ALLREDUCE_CMA_MAX", "0 to 1024G bytes",
     "With `auto`, allreduces of this size and more use `rsag`, whose copy-outs stream past the "
     "caches. Set, single copy runs below it (slices from `CCL_ALLREDUCE_CMA_MIN`) whatever the "
     "probe found, for reduce too.",
     [](Config& c, const char* name, const char* v) {
         c.allreduce_cma_max = parse_bytes(name, v, 0, kTiB);
         c.allreduce_cma_max_set = true;
     },
     [](const Config& c, const char*) { return bytes_text(c.allreduce_cma_max); }, true},
    {"CCL_CMA_MIN", "auto, or 1 to 1024G bytes",
     "Point-to-point messages and allgather and all-to-all blocks from this size go single-copy "
     "(broadcast between two ranks from twice this). `auto`: from a probe at creation, raised "
     "on crowded nodes and where the kernel's copies are dear; broadcasts between two ranks from "
     "32 KiB.",
     [](Config& c, const char* name, const char* v) { c.cma_min = cma_bound(name, v); },
     [](const Config& c, const char*) { return auto_or_bytes(c.cma_min); }, true},
    {"CCL_ALLGATHER_CMA_MAX", "auto, or 1 to 1024G bytes",
     "Allgather(v) messages (bytes received) below this go single-copy (blocks from "
     "`CCL_CMA_MIN`), larger ones through shared memory in pieces. `auto`: `32M` where the "
     "kernel's copies are cheap, from larger blocks with more than 4 ranks; else none.",
     [](Config& c, const char* name, const char* v) { c.allgather_cma_max = cma_bound(name, v); },
     [](const Config& c, const char*) { return auto_or_bytes(c.allgather_cma_max); }, true},
    {"CCL_ALLTOALL_CMA_MAX", "auto, or 1 to 1024G bytes",
     "All-to-all(v) blocks (judged by the call's largest, so all ranks agree) go single-copy from "
     "`CCL_CMA_MIN` up to below this, larger ones through shared memory in pieces. `auto`: from "
     "the probe and how crowded the node is.",
     [](Config& c, const char* name, const char* v) { c.alltoall_cma_max = cma_bound(name, v); },
     [](const Config& c, const char*) { return auto_or_bytes(c.alltoall_cma_max); }, true},
    {"CCL_RANK_THREADS", "auto, or 1 to 256",
     "Threads of a rank (the calling one included) that split a large collective's copies, "
     "reductions and single-copy transfers: the rank's team. `auto`: the cpus the rank may use, "
     "at most its share of the node's. `1`: off. Size it below the rank's cores where the "
     "application computes during collectives (docs/tuning.md, \"The rank's team\").",
     [](Config& c, const char* name, const char* v) {
         c.rank_threads = std::string(v) == "auto" ? 0 : int(parse_int(name, v, 1, 256));
     },
     [](const Config& c, const char*) {
         return c.rank_threads ? number_text(c.rank_threads) : std::string("auto");
     },
     true},
    {"CCL_CMA_SLICE", "a power of two, 4K to 1G bytes",
     "Where the rank's team (`CCL_RANK_THREADS`) cuts single-copy transfers of two slices or "
     "more (shorter ones of two parts of 1M, or of a slice if smaller, at pages). Smaller only "
     "for tests.",
     [](Config& c, const char* name, const char* v) {
         c.cma_slice = parse_bytes(name, v, 4096, size_t(1) << 30);
         if (c.cma_slice & (c.cma_slice - 1))
             bad(name, v, "a power of two from 4K to 1G (a page table's span: 2M)");
     },
     [](const Config& c, const char*) { return bytes_text(c.cma_slice); }, true},
    {"CCL_POLL_TIME_US", "0 to 10000000",
     "Microseconds a rank waiting for its peers polls, yielding its cpu between looks, before it "
     "sleeps on a futex, where every rank of the node has a cpu. Lower it where cpu time spent "
     "waiting matters more than latency.",
     [](Config& c, const char* name, const char* v) {
         c.poll_time_us = parse_int(name, v, 0, 10000000);
     },
     [](const Config& c, const char*) { return number_text(c.poll_time_us); }, true},
    {"CCL_WORKER_COUNT", "1 to 64",
     "Progress threads per process that run nonblocking collectives while the application "
     "computes. A communicator's work always goes to the same worker, in issue order.",
     [](Config& c, const char* name, const char* v) {
         c.worker_count = int(parse_int(name, v, 1, 64));
     },
     [](const Config& c, const char*) { return number_text(c.worker_count); }, true},
    {"CCL_WORKER_AFFINITY", "auto, or a cpu list (3; 0,2; 4-7)",
     "`auto`: the workers run where the OS puts them, within the rank's affinity. A list, shared "
     "by the ranks of a node: worker i of local rank r is pinned to entry r x `CCL_WORKER_COUNT` + "
     "i (cycling).",
     [](Config& c, const char* name, const char* v) { c.worker_cpus = parse_cpu_list(name, v); },
     [](const Config& c, const char*) { return cpu_list_text(c.worker_cpus); }, true},
    {"CCL_SINGLE_COPY", "0, 1",
     "`1`: mid-size allreduces and reduces, large allgathers and all-to-alls, and point-to-point "
     "messages copy straight from one process into another (cross-memory attach) where a probe at "
     "creation succeeds on every rank. `0`: always through shared memory.",
     [](Config& c, const char* name, const char* v) {
         c.single_copy = parse_int(name, v, 0, 1) != 0;
     },
     [](const Config& c, const char*) { return flag_text(c.single_copy); }, true},
    {"CCL_BIND", "auto, none",
     "`auto`: a rank nobody bound binds its threads to its equal share of the node's cores at its "
     "first communicator, as `cclrun --bind-to block` does (not with one rank per node, more ranks "
     "than cores, or ranks bound already: `docs/launching.md`). `none`: never.",
     [](Config& c, const char* name, const char* v) {
         const std::string s = v;
         if (s != "auto" && s != "none") bad(name, v, "auto or none");
         c.bind = s == "auto";
     },
     [](const Config& c, const char*) -> std::string { return c.bind ? "auto" : "none"; }, false},
    {"CCL_NODE_ID", "a name without whitespace, at most 200 characters",
     "Which node this rank is on: ranks with the same id share memory, the others are reached "
     "through the transport `CCL_TRANSPORT` picks (`docs/multinode.md`). Unset: the host name and "
     "boot id. Set, it splits a "
     "host into several nodes (tests, `tests/fabric/as_node.sh`).",
     [](Config& c, const char* name, const char* v) {
         const std::string s = v;
         // It travels in whitespace-separated bootstrap records.
         if (s.empty() || s.size() > 200 || s.find_first_of(" \t\n\r") != std::string::npos)
             bad(name, v, "a non-empty name without spaces, at most 200 characters");
         c.node_id = s;
     },
     [](const Config& c, const char*) { return unset_or(c.node_id); }, false},
    {"CCL_TRANSPORT", "auto, socket, ofi",
     "How ranks on different nodes talk: `socket` (TCP sockets: per peer several connections, "
     "each with a helper thread that sleeps in the kernel while it waits) or `ofi` (libfabric, "
     "with the provider `FI_PROVIDER` names, `tcp` unset). `auto`: `ofi` when `FI_PROVIDER` names "
     "a provider other than tcp (verbs, efa, cxi, psm3, opx...), else `socket` "
     "(`docs/multinode.md`).",
     [](Config& c, const char* name, const char* v) {
         const std::string s = v;
         if (s != "auto" && s != "socket" && s != "ofi") bad(name, v, "auto, socket or ofi");
         c.transport = s;
     },
     [](const Config& c, const char*) { return c.transport; }, false},
    {"CCL_SOCKET_IFNAME", "an interface name",
     "The network interface the socket transport listens on and tells its peers (`eth0`). Unset: "
     "the first interface that is up with an IPv4 address other than loopback, or loopback when "
     "there is none.",
     [](Config& c, const char* name, const char* v) {
         const std::string s = v;
         if (s.empty() || s.size() > 15) bad(name, v, "an interface name (1-15 characters)");
         c.socket_ifname = s;
     },
     [](const Config& c, const char*) { return unset_or(c.socket_ifname); }, false},
    {"CCL_SOCKET_STREAMS", "1 to 16",
     "TCP connections the socket transport sends over to each peer process, each with its own "
     "helper threads; a long message is striped over them (`docs/multinode.md`).",
     [](Config& c, const char* name, const char* v) {
         c.socket_streams = int(parse_int(name, v, 1, 16));
     },
     [](const Config& c, const char*) { return number_text((long long)c.socket_streams); }, false},
    {"CCL_CACHE_SIZE", "0 to 1000000",
     "Schedules kept by match_id caching (`attr.to_cache`), per process; the least recently used "
     "goes first. `0` turns the cache off (calls with `to_cache` then plan every time).",
     [](Config& c, const char* name, const char* v) {
         c.cache_size = size_t(parse_int(name, v, 0, 1000000));
     },
     [](const Config& c, const char*) { return number_text((long long)c.cache_size); }, false},
    {"CCL_ZE_LIBRARY_PATH", "a path, or a name the dynamic linker finds",
     "The Level Zero loader to load. Unset: `libze_loader.so.1`. If it cannot be loaded, or "
     "`zeInit` fails, XPU support is off and host buffers work as always.",
     [](Config& c, const char* name, const char* v) {
         if (!*v) bad(name, v, "the path of the Level Zero loader library");
         c.ze_library_path = v;
     },
     [](const Config& c, const char*) { return unset_or(c.ze_library_path); }, false},
    {"CCL_ZE_ENABLE", "0, 1",
     "`0`: never load Level Zero; device buffers are then refused where ccl can tell "
     "(`docs/xpu.md`).",
     [](Config& c, const char* name, const char* v) {
         c.ze_enable = parse_int(name, v, 0, 1) != 0;
     },
     [](const Config& c, const char*) { return flag_text(c.ze_enable); }, false},
    {"CCL_ZE_IPC", "0, 1",
     "`1`: broadcast, allgather(v) and out-of-place alltoall between co-located ranks copy device "
     "to device through Level Zero IPC handles when every rank's buffers are device memory (one "
     "small exchange per call, on every rank, finds out); else through host memory.",
     [](Config& c, const char* name, const char* v) { c.ze_ipc = parse_int(name, v, 0, 1) != 0; },
     [](const Config& c, const char*) { return flag_text(c.ze_ipc); }, false},
    {"CCL_FABRIC_PIPELINE_CHUNK", "64K to 1024G bytes",
     "Allreduce, reduce and broadcast across nodes with several ranks on a node run in pieces of "
     "about this size, the node's part of one overlapping the fabric's of another "
     "(`docs/multinode.md`).",
     [](Config& c, const char* name, const char* v) {
         c.fabric_pipeline_chunk = parse_bytes(name, v, 64u << 10, kTiB);
     },
     [](const Config& c, const char*) { return bytes_text(c.fabric_pipeline_chunk); }, true},
    {"CCL_ZE_PIPELINE_CHUNK", "4K to 1024G bytes",
     "Allreduce and broadcast messages larger than this run as collectives of this size, so that "
     "copies between device and host overlap the host collective. With Level Zero on, every such "
     "call is split, device buffers or not, so that all ranks split it alike.",
     [](Config& c, const char* name, const char* v) {
         c.ze_pipeline_chunk = parse_bytes(name, v, 4096, kTiB);
     },
     [](const Config& c, const char*) { return bytes_text(c.ze_pipeline_chunk); }, false},
    // Read by kvs/launcher.cpp (ccl_comm_create_from_env), where cclrun set them.
    {"CCL_RANK", "0 to CCL_SIZE - 1",
     "Set by cclrun: this process's rank, read by `ccl_comm_create_from_env` with `CCL_SIZE` and "
     "`CCL_KVS_ADDRESS` (`docs/launching.md`).",
     nullptr, raw_text, false},
    {"CCL_SIZE", "1 or more", "Set by cclrun: the number of ranks.", nullptr, raw_text, false},
    {"CCL_KVS_ADDRESS", "a.b.c.d:port/secret",
     "Set by cclrun: the address of the KVS it serves, with the job secret. `ccl_info` shows the "
     "address alone.",
     nullptr,
     [](const Config&, const char* raw) -> std::string {
         if (!raw) return "(unset)";
         const std::string s = raw;
         return s.substr(0, s.find('/')) + "/(secret not shown)";
     },
     false},
    // Read by the tools and builds around the library.
    {"CCL_LOCAL_RANK", "0 and up",
     "oneCCL's name for `LOCAL_RANK`: where no launcher says, where the rank sits on its node "
     "(it places the progress threads).",
     nullptr, raw_text, false},
    {"CCL_LOCAL_SIZE", "1 and up",
     "oneCCL's name for `LOCAL_WORLD_SIZE`: where no launcher says, the ranks on this node.",
     nullptr, raw_text, false},
    {"CCL_ROOT", "a folder",
     "Read by `bindings/torch/setup.py`: where ccl is installed (`include/ccl/ccl.h`, "
     "`lib/libccl.so`), for the torch backend's build. Unset: this tree's `include/` and `build/`.",
     nullptr, raw_text, false},
    {"CCL_INCLUDE_DIR", "a folder",
     "Read by `bindings/torch/setup.py`: the folder of `ccl/ccl.h`, instead of `CCL_ROOT/include`.",
     nullptr, raw_text, false},
    {"CCL_LIB_DIR", "a folder",
     "Read by `bindings/torch/setup.py`: the folder of `libccl.so`, instead of `CCL_ROOT/lib`.",
     nullptr, raw_text, false},
    {"CCL_BIN", "a folder",
     "Read by `tools/sweep.sh`: the folder of `cclrun` and `ccl_bench`. Unset: `build/`.", nullptr,
     raw_text, false},
};

// oneCCL's variables that ccl has no knob of: a name, or a family's prefix ending in '*', and what
// ccl does instead (docs/env.md, "oneCCL's variables"). The first that matches says.
// What ccl does instead, where several of oneCCL's variables get the same answer.
constexpr const char* kOwnTransport =
    "ccl chooses its transport itself: shared memory within a node, libfabric across "
    "(FI_PROVIDER picks the provider; docs/multinode.md)";
constexpr const char* kOwnAlgorithms = "ccl chooses its algorithms itself (docs/tuning.md)";
constexpr const char* kOwnPieces =
    "ccl chooses its algorithms and their pieces itself (docs/tuning.md)";
constexpr const char* kOwnWaits = "waits spin for CCL_POLL_TIME_US, then sleep";
constexpr const char* kInOrder = "ccl runs calls in the order they are made";
constexpr const char* kOwnChunks =
    "ccl cuts messages by CCL_SHM_BUFFER_SIZE and CCL_FABRIC_PIPELINE_CHUNK";
constexpr const char* kLevelZero = "device buffers go through Level Zero (CCL_ZE_ENABLE)";
constexpr const char* kNoSycl =
    "no SYCL: device buffers go through Level Zero (CCL_ZE_ENABLE; docs/xpu.md)";
constexpr const char* kLogInfo = "no dumps or ITT hooks: CCL_LOG_LEVEL=info logs each choice";
constexpr const char* kTimeout = "CCL_TIMEOUT bounds every wait";
struct OnecclVariable {
    const char* name;
    const char* instead;
};
constexpr OnecclVariable kOneccl[] = {
    {"CCL_ATL_TRANSPORT", kOwnTransport},
    {"CCL_ATL_*", kOwnTransport},
    {"CCL_KVS_MODE", "ccl finds the launcher and its way to the KVS itself (docs/launching.md)"},
    {"CCL_KVS_MPI_ALLGATHER", "ccl's KVS needs no MPI"},
    {"CCL_KVS_USE_MPI_RANKS", "ccl takes the ranks from the launcher (docs/launching.md)"},
    {"CCL_KVS_CONNECTION_TIMEOUT", "CCL_KVS_TIMEOUT bounds connecting to the KVS"},
    {"CCL_MNIC*",
     "one endpoint per process: FI_PROVIDER and its interface variables choose the NIC"},
    {"CCL_MPI_LIBRARY_PATH", "ccl needs no MPI library"},
    {"CCL_OFI_LIBRARY_PATH", "ccl links the system's libfabric"},
    {"CCL_PMIX_LIBRARY_PATH", "ccl loads libpmix.so.2 from the loader's path"},
    {"CCL_WORKER_OFFLOAD",
     "the calling thread runs blocking calls; progress workers "
     "(CCL_WORKER_COUNT) run nonblocking ones"},
    {"CCL_WORKER_WAIT", kOwnWaits},
    {"CCL_WORKER_MEM_AFFINITY", "ccl's buffers are allocated where the rank runs"},
    {"CCL_YIELD", kOwnWaits},
    {"CCL_SPIN_COUNT", kOwnWaits},
    {"CCL_FUSION*", "ccl fuses allreduces within a group (ccl_group_start / ccl_group_end)"},
    {"CCL_PRIORITY", kInOrder},
    {"CCL_UNORDERED_COLL", kInOrder},
    {"CCL_ENABLE_AUTO_CACHE", "ccl caches a call's schedule under its match_id (to_cache)"},
    {"CCL_CACHE_*", "ccl caches a call's schedule under its match_id; CCL_CACHE_SIZE bounds them"},
    {"CCL_BUFFER_CACHE", "ccl keeps no user buffers"},
    {"CCL_ALGO_FALLBACK", kOwnAlgorithms},
    {"CCL_ALLGATHER*", kOwnAlgorithms},
    {"CCL_ALLTOALL*", kOwnAlgorithms},
    {"CCL_BARRIER*", kOwnAlgorithms},
    {"CCL_BCAST*", kOwnAlgorithms},
    {"CCL_BROADCAST*", kOwnAlgorithms},
    {"CCL_REDUCE*",
     "ccl chooses its algorithms itself (CCL_ALLREDUCE covers reduce; docs/tuning.md)"},
    {"CCL_RECV", kOwnAlgorithms},
    {"CCL_SEND", kOwnAlgorithms},
    {"CCL_ALLREDUCE_*", kOwnPieces},
    {"CCL_RS_*", kOwnPieces},
    {"CCL_DTREE_*", kOwnPieces},
    {"CCL_CHUNK_COUNT", kOwnChunks},
    {"CCL_MIN_CHUNK_SIZE", kOwnChunks},
    {"CCL_MAX_SHORT_SIZE", kOwnAlgorithms},
    {"CCL_TOPO_*", "ccl reads the node's topology itself"},
    {"CCL_SYCL_*", kNoSycl},
    {"CCL_ENABLE_SYCL_KERNELS", kNoSycl},
    {"CCL_KERNEL_*", "no SYCL kernels: device buffers go through Level Zero (CCL_ZE_ENABLE)"},
    {"CCL_ZE_*",
     "ccl's Level Zero path has no such setting (CCL_ZE_ENABLE, CCL_ZE_IPC, "
     "CCL_ZE_PIPELINE_CHUNK are its knobs)"},
    {"CCL_USE_HMEM", kLevelZero},
    {"CCL_STAGING_BUFFER", kLevelZero},
    {"CCL_DRMFD_*", "device buffers go through Level Zero's IPC (CCL_ZE_IPC)"},
    {"CCL_BF16", "bfloat16 reductions use the widest kernels the cpu has, chosen at run time"},
    {"CCL_FP16", "float16 reductions use the widest kernels the cpu has, chosen at run time"},
    {"CCL_ITT_LEVEL", kLogInfo},
    {"CCL_SCHED_*", kLogInfo},
    {"CCL_QUEUE_DUMP", kLogInfo},
    {"CCL_DEBUG_TIMESTAMPS_LEVEL", "ccl_bench times collectives"},
    {"CCL_ABORT_ON_THROW", "every failure is a return code and ccl_last_error's message"},
    {"CCL_CHECK_INPLACE_ALIASING", "ccl checks in-place calls itself"},
    {"CCL_ENTRY_MAX_UPDATE_TIME_SEC", kTimeout},
    {"CCL_OP_SYNC", kTimeout},
    {"CCL_STRICT_ORDER", kInOrder},
    {"CCL_FRAMEWORK", "ccl needs no hint of the framework"},
    {"CCL_BACKEND", "ccl has one backend"},
    {"CCL_CONFIGURATION", "one ccl library: no cpu / cpu_gpu_dpcpp configurations"},
    {"CCL_PLATFORM_INFO_HIDE", "ccl_info prints the platform"},
};

// What ccl does instead of oneCCL's `name`: by its exact name, or (`families`) by a prefix.
const char* oneccl_instead(std::string_view name, bool families) {
    for (const OnecclVariable& v : kOneccl) {
        const std::string_view n = v.name;
        const bool family = n.back() == '*';
        if (family ? families && name.substr(0, n.size() - 1) == n.substr(0, n.size() - 1)
                   : name == n)
            return v.instead;
    }
    return nullptr;
}

// Levenshtein distance, ignoring case: how far a typo is from a name.
size_t distance(std::string_view a, std::string_view b) {
    std::vector<size_t> row(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
        size_t diagonal = row[0];
        row[0] = i;
        for (size_t j = 1; j <= b.size(); ++j) {
            const size_t up = row[j];
            const bool same =
                std::toupper((unsigned char)a[i - 1]) == std::toupper((unsigned char)b[j - 1]);
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (same ? 0 : 1)});
            diagonal = up;
        }
    }
    return row[b.size()];
}

}  // namespace

std::span<const Knob> knobs() { return kKnobs; }

const Knob* find_knob(std::string_view name) {
    for (const Knob& k : kKnobs)
        if (name == k.name) return &k;
    return nullptr;
}

std::string knob_default(const Knob& k) { return k.show(Config{}, nullptr); }

std::string knob_markdown(const Knob& k) {
    const std::string d = knob_default(k);
    std::string doc;
    for (const char* p = k.doc; *p; ++p) doc += *p == '|' ? std::string("\\|") : std::string(1, *p);
    if (k.more) {
        std::string anchor = k.name;
        for (char& ch : anchor) ch = char(std::tolower((unsigned char)ch));
        doc += std::string(" [More](tuning.md#") + anchor + ").";
    }
    return std::string("| `") + k.name + "` | " + (d[0] == '(' ? d : "`" + d + "`") + " | " +
           k.range + " | " + doc + " |";
}

std::vector<UnknownVariable> unknown_variables(const char* const* env) {
    std::vector<UnknownVariable> unknown;
    for (; env && *env; ++env) {
        const std::string_view kv = *env;
        const std::string_view name = kv.substr(0, kv.find('='));
        if (name.substr(0, 4) != "CCL_" || find_knob(name)) continue;
        // oneCCL's by name; else a typo of a knob; else one of oneCCL's families.
        UnknownVariable u{std::string(name), nullptr, oneccl_instead(name, false)};
        if (u.oneccl) {
            unknown.push_back(std::move(u));
            continue;
        }
        // Near enough to be a typo: an edit per 4 characters after CCL_, rounded (TIMOUT, ALLREDUC,
        // TIMEUOT), not ROOT for FOO.
        size_t best = std::max<size_t>(1, (name.size() - 4 + 2) / 4) + 1;
        for (const Knob& k : kKnobs)
            if (const size_t d = distance(name, k.name); d < best) {
                best = d;
                u.nearest = &k;
            }
        if (!u.nearest) u.oneccl = oneccl_instead(name, true);
        unknown.push_back(std::move(u));
    }
    return unknown;
}

std::string unknown_text(const UnknownVariable& u) {
    if (u.oneccl) return u.name + " is oneCCL's variable: " + u.oneccl;
    return u.name + " is no ccl variable" +
           (u.nearest ? std::string(" (did you mean ") + u.nearest->name + "?)" : std::string());
}

void warn_unknown_variables() {
    static std::once_flag once;
    std::call_once(once, [] {
        for (const UnknownVariable& u : unknown_variables(environ))
            log().warn("{}: ignored (ccl_info lists every variable)", unknown_text(u));
        for (const std::string& note : config().oneccl_values) log().warn("{}", note);
    });
}

Config parse_config(const char* (*getenv_fn)(const char*)) {
    Config c;
    for (const Knob& k : kKnobs)
        if (k.parse)
            if (const char* v = getenv_fn(k.name)) k.parse(c, k.name, v);
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
