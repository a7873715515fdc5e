// Which launcher started this process, read from the environment alone (no I/O, so every rule is
// testable without a launcher): the rank, the size, where the rank sits on its node, and how the
// ranks find rank 0's KVS. docs/launching.md describes the rules for users.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "base/config.h"
#include "base/error.h"
#include "kvs/secret.h"

namespace ccl::kvs {

// How the ranks learn the address of the KVS that rank 0 serves.
enum class AddressVia {
    none,    // they do not: the application passes it (ccl_comm_create)
    alone,   // no launcher: a job of one rank (MPI's singleton), which serves the KVS to itself
    given,   // CCL_KVS_ADDRESS: cclrun serves the KVS and says where
    pmi,     // rank 0 publishes it with PMI-1 put / barrier / get over PMI_FD
    pmix,    // rank 0 publishes it with PMIx put / fence / get
    master,  // no exchange: rank 0 serves it at MASTER_ADDR and a known port
};

struct Launch {
    Launcher launcher = Launcher::none;
    int rank = 0;
    int size = 1;
    int local_rank = 0;  // among the ranks of this node
    int local_size = 1;
    AddressVia via = AddressVia::none;
    std::string address;  // given: the KVS address; master: MASTER_ADDR (host name or IPv4)
    int port = 0;         // master: the port rank 0 serves the KVS at
    // master: the job secret every rank computes alike (no channel carries one), and where it
    // came from: CCL_KVS_SECRET, TORCHELASTIC_RUN_ID, or nothing secret (`secret_weak`).
    Secret secret{};
    bool secret_weak = false;
    int pmi_fd = -1;  // pmi: the descriptor the launcher opened for us
    std::string why;  // which variables decided all this, for ccl_info and logs
};

struct LaunchSettings {
    std::optional<Launcher> forced;    // CCL_PROCESS_LAUNCHER; nullopt = auto
    int kvs_port = 0;                  // CCL_KVS_PORT; 0 = MASTER_PORT + 1
    std::optional<Secret> kvs_secret;  // CCL_KVS_SECRET: the job secret under torchrun-style starts
};

using Getenv = std::function<const char*(const char*)>;

// Decides from the variables that `getenv` returns; none of any launcher's make a job of one rank
// (AddressVia::alone). Throws ccl::Error:
//   CCL_ERROR_INVALID_USAGE     a launcher's variables only in part, a Slurm batch script,
//                               two launchers' variables disagreeing, a forced launcher whose
//                               variables are missing, a launcher with no way to share the address
//   CCL_ERROR_INVALID_ARGUMENT  a malformed value (not an integer, rank >= size, bad port)
// With `forced` = none it returns launcher none (local rank and size from LOCAL_RANK and
// LOCAL_WORLD_SIZE when set) and never throws for the absence of a launcher.
Launch detect_launch(const Getenv& getenv, const LaunchSettings& settings);

// This process's launch (detect_launch with cfg's settings), or why none could be told, and where
// it sits on its node: the launch's local rank and size, else (no launcher, or a confused one)
// LOCAL_RANK and LOCAL_WORLD_SIZE. A confused launcher is not an error until
// ccl_comm_create_from_env needs one.
struct ProcessLaunch {
    std::optional<Launch> launch;
    std::optional<Error> error;
    int local_rank = 0, local_size = 1;
};
ProcessLaunch detect_process_launch(const Getenv& getenv, const Config& cfg);
// The same from the environment and config(), once per process (never destroyed). Throws what
// config() throws.
const ProcessLaunch& process_launch();

// Slurm's compressed tasks-per-node list ("2(x3),1": nodes 0-2 run 2 tasks, node 3 runs 1): the
// count of node `node`, or nullopt when the list is malformed or too short.
std::optional<int> tasks_on_node(const std::string& list, int node);

}  // namespace ccl::kvs
