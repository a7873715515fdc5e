// Every CCL_* environment variable, parsed once, here and nowhere else. docs/env.md documents each.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
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

struct Config {
    LogLevel log_level = LogLevel::warn;  // CCL_LOG_LEVEL
    double timeout_s = 300;               // CCL_TIMEOUT: deadline of every collective wait
    double kvs_timeout_s = 60;            // CCL_KVS_TIMEOUT: KVS connects and bootstrap waits
    std::string kvs_iface;                // CCL_KVS_IFACE: interface the KVS server binds
    int kvs_port = 0;                     // CCL_KVS_PORT: torchrun-style; 0 = MASTER_PORT + 1
    std::optional<std::array<uint8_t, 16>> kvs_secret;  // CCL_KVS_SECRET: torchrun-style secret
    size_t shm_buffer_size = 1u << 20;        // CCL_SHM_BUFFER_SIZE: per rank and buffer, bytes
    std::string allreduce_algo = "auto";      // CCL_ALLREDUCE: auto | direct | rsag | cma
    size_t allreduce_direct_max = 64u << 10;  // CCL_ALLREDUCE_DIRECT_MAX: largest auto direct
    bool allreduce_direct_max_set = false;    // given by the user: no scaling with the ranks
    size_t allreduce_cma_min = 256u << 10;    // CCL_ALLREDUCE_CMA_MIN: smallest auto cma slice
    size_t allreduce_cma_max = 32u << 20;     // CCL_ALLREDUCE_CMA_MAX: auto cma below this
    bool allreduce_cma_max_set = false;       // given by the user: holds with threaded copies
    int worker_count = 1;                     // CCL_WORKER_COUNT: progress threads per process
    std::vector<int> worker_cpus;             // CCL_WORKER_AFFINITY: empty = auto (not pinned)
    size_t cache_size = 1024;                 // CCL_CACHE_SIZE: match_id schedules kept
    bool single_copy = true;                  // CCL_SINGLE_COPY: cross-memory attach if it works
    size_t cma_min = 0;                       // CCL_CMA_MIN: single-copy blocks; 0 = auto (probed)
    size_t allgather_cma_max = 0;             // CCL_ALLGATHER_CMA_MAX: 0 = auto (probed)
    size_t alltoall_cma_max = 0;              // CCL_ALLTOALL_CMA_MAX: 0 = auto (probed)
    int cma_threads = 0;                      // CCL_CMA_THREADS: per large transfer; 0 = auto
    size_t cma_slice = 2u << 20;              // CCL_CMA_SLICE: where large transfers are cut
    bool bind = true;                         // CCL_BIND: auto binds unbound ranks (core/binding.h)
    long poll_time_us = 20000;                // CCL_POLL_TIME_US: a waiting rank's polling (wait.h)
    // XPU (Level Zero, docs/xpu.md).
    std::string ze_library_path;          // CCL_ZE_LIBRARY_PATH: empty = libze_loader.so.1
    bool ze_enable = true;                // CCL_ZE_ENABLE: 0 = never load Level Zero
    bool ze_ipc = false;                  // CCL_ZE_IPC: device-to-device through IPC handles
    size_t ze_pipeline_chunk = 4u << 20;  // CCL_ZE_PIPELINE_CHUNK: chunks of staged allreduce/bcast
    // CCL_NODE_ID: which node this rank is on (ranks with the same id share memory); empty =
    // the host name and boot id (core/topology.h).
    std::string node_id;
    // CCL_FABRIC_PIPELINE_CHUNK: allreduce, reduce and broadcast across nodes, when a node has
    // several ranks, run in pieces of this many bytes, the node's part of one overlapping the
    // fabric's of another.
    size_t fabric_pipeline_chunk = 2u << 20;
    // CCL_PROCESS_LAUNCHER: the launcher to take the job from; nullopt = auto (detect it).
    std::optional<Launcher> process_launcher;
};

// The configuration, parsed on first use. Throws ccl::Error (CCL_ERROR_INVALID_ARGUMENT) naming the
// variable when one is malformed; the next call parses again.
const Config& config();

// Parses an environment the way config() does, from a lookup function: for tests.
Config parse_config(const char* (*getenv_fn)(const char*));

}  // namespace ccl
