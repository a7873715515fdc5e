// Every CCL_* environment variable, declared once in the table of config.cpp (knobs()): config()
// parses from it, ccl_info lists it, and tests/scripts/check_env_doc.sh holds docs/env.md to it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "base/log.h"

namespace ccl {

// The launchers ccl knows (CCL_PROCESS_LAUNCHER; kvs/launcher.h tells which started a process).
enum class Launcher { none, cclrun, hydra, ompi, torchrun, slurm };
// "none", "cclrun", "hydra", "ompi", "torchrun", "slurm".
const char* launcher_name(Launcher l);
// "auto" gives nullopt; an unknown name throws CCL_ERROR_INVALID_ARGUMENT naming `var`.
std::optional<Launcher> parse_launcher(const char* var, const std::string& text);

// What the configuration knobs (below) set; each field's default is its knob's.
struct Config {
    LogLevel log_level = LogLevel::warn;                // CCL_LOG_LEVEL
    double timeout_s = 300;                             // CCL_TIMEOUT
    double kvs_timeout_s = 60;                          // CCL_KVS_TIMEOUT
    std::string kvs_iface;                              // CCL_KVS_IFACE
    int kvs_port = 0;                                   // CCL_KVS_PORT; 0 = MASTER_PORT + 1
    std::optional<std::array<uint8_t, 16>> kvs_secret;  // CCL_KVS_SECRET
    size_t shm_buffer_size = 1u << 20;                  // CCL_SHM_BUFFER_SIZE
    bool shm_buffer_size_set = false;                   // given: not scaled by the rank's team
    std::string allreduce_algo = "auto";                // CCL_ALLREDUCE
    size_t allreduce_direct_max = 64u << 10;            // CCL_ALLREDUCE_DIRECT_MAX
    bool allreduce_direct_max_set = false;     // given by the user: no scaling with the ranks
    size_t allreduce_cma_min = 256u << 10;     // CCL_ALLREDUCE_CMA_MIN
    bool allreduce_cma_min_set = false;        // given by the user: holds everywhere
    size_t allreduce_cma_max = 32u << 20;      // CCL_ALLREDUCE_CMA_MAX
    bool allreduce_cma_max_set = false;        // given by the user: holds with threaded copies
    int worker_count = 1;                      // CCL_WORKER_COUNT
    std::vector<int> worker_cpus;              // CCL_WORKER_AFFINITY; empty = auto
    size_t cache_size = 1024;                  // CCL_CACHE_SIZE
    bool single_copy = true;                   // CCL_SINGLE_COPY
    size_t cma_min = 0;                        // CCL_CMA_MIN; 0 = auto (probed)
    size_t allgather_cma_max = 0;              // CCL_ALLGATHER_CMA_MAX; 0 = auto
    size_t alltoall_cma_max = 0;               // CCL_ALLTOALL_CMA_MAX; 0 = auto
    int rank_threads = 0;                      // CCL_RANK_THREADS; 0 = auto
    size_t cma_slice = 2u << 20;               // CCL_CMA_SLICE
    bool bind = true;                          // CCL_BIND: auto (core/binding.h)
    long poll_time_us = 20000;                 // CCL_POLL_TIME_US (base/wait.h)
    std::string ze_library_path;               // CCL_ZE_LIBRARY_PATH; empty = libze_loader.so.1
    bool ze_enable = true;                     // CCL_ZE_ENABLE
    bool ze_ipc = false;                       // CCL_ZE_IPC
    size_t ze_pipeline_chunk = 4u << 20;       // CCL_ZE_PIPELINE_CHUNK
    std::string node_id;                       // CCL_NODE_ID; empty = host name and boot id
    size_t fabric_pipeline_chunk = 2u << 20;   // CCL_FABRIC_PIPELINE_CHUNK
    std::string transport = "auto";            // CCL_TRANSPORT
    std::string socket_ifname;                 // CCL_SOCKET_IFNAME; empty = auto
    int socket_streams = 2;                    // CCL_SOCKET_STREAMS
    std::optional<Launcher> process_launcher;  // CCL_PROCESS_LAUNCHER; nullopt = auto
    // oneCCL's values of ccl's knobs, taken as ccl's nearest: what warn_unknown_variables says
    // once ("CCL_ALLREDUCE=ring is oneCCL's choice: ...").
    std::vector<std::string> oneccl_values;
};

// One environment variable: its name, what it takes, its line of docs/env.md, and how config()
// reads it and ccl_info shows it.
struct Knob {
    const char* name;   // "CCL_TIMEOUT"
    const char* range;  // the values it takes, in words: "seconds > 0", "4K to 1G bytes"
    const char* doc;    // one line: what it does, its unset meaning
    // Reads `value` into `c`, throwing CCL_ERROR_INVALID_ARGUMENT naming `name` when malformed.
    // nullptr: read elsewhere, by what `doc` names (a launcher's variable, a script's): src/base
    // may not include the floors above it.
    void (*parse)(Config& c, const char* name, const char* value);
    // The value in effect, as one would set it ("64K", "auto", "(unset)"); `raw` is the
    // environment's text (nullptr when unset), which a knob read elsewhere shows.
    std::string (*show)(const Config& c, const char* raw);
    bool more;  // docs/tuning.md has a section on it, with the measurements behind its default
};

// Every CCL_* variable ccl, its tools and its builds read, in the order config() parses them.
std::span<const Knob> knobs();
// nullptr when `name` is no knob.
const Knob* find_knob(std::string_view name);
// What it shows unset: its Config field's default.
std::string knob_default(const Knob& k);
// Its row of docs/env.md: | `NAME` | default | range | doc |.
std::string knob_markdown(const Knob& k);

// A CCL_* variable that no knob declares (a typo, another library's), and the knob whose name is
// nearest when one is near enough to be what was meant.
struct UnknownVariable {
    std::string name;
    const Knob* nearest = nullptr;
    const char* oneccl = nullptr;  // oneCCL's variable: what ccl does instead
};
// Those of `env`, an environ-shaped list ("NAME=value" strings, then nullptr).
std::vector<UnknownVariable> unknown_variables(const char* const* env);
// "CCL_ALLREDUC is no ccl variable (did you mean CCL_ALLREDUCE?)", "CCL_ATL_TRANSPORT is oneCCL's
// variable: ccl chooses its transport itself (...)".
std::string unknown_text(const UnknownVariable& u);
// Logs those of this process's environment, and the oneCCL values config() took as ccl's nearest,
// at warn, once per process. Called where a communicator is created (bindings/c), so that whoever
// runs the job sees a typo; cclrun, which creates none, keeps quiet, and ccl_info lists them under
// "unknown:".
void warn_unknown_variables();

// The configuration, parsed on first use. Throws ccl::Error (CCL_ERROR_INVALID_ARGUMENT) naming the
// variable when one is malformed; the next call parses again.
const Config& config();

// Parses an environment the way config() does, from a lookup function: for tests.
Config parse_config(const char* (*getenv_fn)(const char*));

}  // namespace ccl
