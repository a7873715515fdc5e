// The communicator part of the C ABI.
#include <algorithm>
#include <cstdlib>
#include <memory>
#include <mutex>

#include "base/config.h"
#include "base/log.h"
#include "base/team.h"
#include "core/schedule_cache.h"
#include "handles.h"
#include "kvs/rendezvous.h"

namespace ccl::capi {

constinit CommTable g_comm_table;

void release_comm(std::shared_ptr<Communicator> comm) noexcept {
    try {
        comm->wait_idle();                        // its queued work still uses it
        schedule_cache().erase_comm(comm->id());  // cached plans refer to its arena
    } catch (const std::exception& e) {           // nothing is left to report it to
        log().warn("releasing a destroyed communicator: {}", e.what());
    }
}

namespace {

// The KVS of the job that started this process, set up by the first ccl_comm_create_from_env
// (collectively, like every creation) and kept until the process exits: see kvs::Rendezvous.
kvs::Client& launched_kvs(const kvs::Launch& launch) {
    static std::mutex mu;
    static std::unique_ptr<kvs::Rendezvous> rendezvous;
    std::lock_guard lock(mu);
    if (!rendezvous) {
        rendezvous =
            std::make_unique<kvs::Rendezvous>(launch, config().kvs_iface, config().kvs_timeout_s);
        // Ended at exit by a handler registered now, so that it runs before the destructors of
        // the statics that the server thread and the finalize use (the logger, first used while
        // it was built); the static above, older, would be destroyed after them.
        std::atexit([] {
            std::lock_guard lock(mu);
            rendezvous.reset();
        });
    }
    return rendezvous->client();  // thread-safe, and never destroyed before exit
}

ccl_comm_t create(int size, int rank, kvs::Client& client) {
    if (size < 1)
        throw Error(CCL_ERROR_INVALID_ARGUMENT,
                    "size is " + std::to_string(size) + ", must be >= 1");
    if (rank < 0 || rank >= size)
        throw Error(
            CCL_ERROR_INVALID_ARGUMENT,
            "rank is " + std::to_string(rank) + ", must be in [0, " + std::to_string(size) + ")");
    config();  // a malformed CCL_* variable is reported here, before any rank waits on another
    warn_unknown_variables();
    return comm_table().add<ccl_comm_t>(std::make_shared<Communicator>(size, rank, client));
}

}  // namespace

}  // namespace ccl::capi

using namespace ccl;
using namespace ccl::capi;

extern "C" {

ccl_result_t ccl_comm_create(int size, int rank, ccl_kvs_t kvs, ccl_comm_t* comm) {
    return guarded(__func__, [&] {
        auto k = kvs_table().get(kvs, "kvs");
        require_out(comm, "comm");
        *comm = create(size, rank, *k->client);
    });
}

ccl_result_t ccl_comm_create_from_env(ccl_comm_t* comm) {
    return guarded(__func__, [&] {
        require_out(comm, "comm");
        const kvs::ProcessLaunch& found = kvs::process_launch();
        if (!found.launch) throw *found.error;
        const kvs::Launch& launch = *found.launch;
        if (launch.via == kvs::AddressVia::none)
            throw Error(CCL_ERROR_INVALID_USAGE,
                        "CCL_PROCESS_LAUNCHER=none: ccl_comm_create_from_env looks for no "
                        "launcher; create or connect to the KVS (ccl_kvs_create_main, "
                        "ccl_kvs_connect) and call ccl_comm_create");
        *comm = create(launch.size, launch.rank, launched_kvs(launch));
    });
}

ccl_result_t ccl_comm_rank(ccl_comm_t comm, int* rank) {
    return guarded(__func__, [&] {
        auto c = comm_table().get(comm, "communicator");
        require_out(rank, "rank");
        *rank = c->rank();
    });
}

ccl_result_t ccl_comm_size(ccl_comm_t comm, int* size) {
    return guarded(__func__, [&] {
        auto c = comm_table().get(comm, "communicator");
        require_out(size, "size");
        *size = c->size();
    });
}

ccl_result_t ccl_comm_shm_bytes(ccl_comm_t comm, size_t* bytes) {
    return guarded(__func__, [&] {
        auto c = comm_table().get(comm, "communicator");
        require_out(bytes, "bytes");
        *bytes = c->shm_bytes();
    });
}

ccl_result_t ccl_comm_nodes(ccl_comm_t comm, int* nodes, char* transports, size_t size) {
    return guarded(__func__, [&] {
        auto c = comm_table().get(comm, "communicator");
        require_out(nodes, "nodes");
        *nodes = c->topology().nnodes();
        if (transports && size) {
            std::string t = c->transports();
            size_t n = std::min(size - 1, t.size());
            t.copy(transports, n);
            transports[n] = '\0';
        }
    });
}

ccl_result_t ccl_comm_threads(ccl_comm_t comm, int* threads) {
    return guarded(__func__, [&] {
        comm_table().get(comm, "communicator");
        require_out(threads, "threads");
        *threads = team_size();
    });
}

ccl_result_t ccl_comm_split(ccl_comm_t comm, int color, int key, ccl_comm_t* newcomm) {
    return guarded(__func__, [&] {
        auto c = comm_table().enter(comm, "communicator");
        require_out(newcomm, "newcomm");
        *newcomm = nullptr;
        if (color < 0 && color != CCL_UNDEFINED)
            throw Error(CCL_ERROR_INVALID_ARGUMENT,
                        "color is " + std::to_string(color) + ": must be >= 0 or CCL_UNDEFINED");
        if (auto sub = c->split(color, key))
            *newcomm = comm_table().add<ccl_comm_t>(std::move(sub));
    });
}

ccl_result_t ccl_comm_destroy(ccl_comm_t comm) {
    return guarded(__func__, [&] {
        // With a call inside on another thread, that call releases it when it returns.
        if (auto c = comm_table().retire(comm, "communicator")) release_comm(std::move(c));
    });
}

ccl_result_t ccl_comm_abort(ccl_comm_t comm) {
    return guarded(__func__, [&] { comm_table().get(comm, "communicator")->abort(); });
}

ccl_result_t ccl_comm_get_async_error(ccl_comm_t comm, ccl_result_t* result) {
    return guarded(__func__, [&] {
        auto c = comm_table().get(comm, "communicator");
        require_out(result, "result");
        std::string message;
        *result = c->async_error(&message);
        if (*result != CCL_SUCCESS) set_last_error(__func__, message);
    });
}

}  // extern "C"
