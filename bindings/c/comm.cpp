// The communicator part of the C ABI.
#include <cerrno>
#include <climits>
#include <cstdlib>

#include "core/config.h"
#include "core/schedule_cache.h"
#include "handles.h"

namespace ccl::capi {

HandleTable<Communicator, 2>& comm_table() {
    static HandleTable<Communicator, 2> table;
    return table;
}

namespace {

// A launcher variable that must hold an integer in [lo, hi].
int env_int(const char* name, int lo, int hi) {
    const char* v = std::getenv(name);
    if (!v || !*v)
        throw Error(CCL_ERROR_INVALID_USAGE, std::string(name) +
                                                 " is not set: start the program with cclrun, or "
                                                 "create the communicator with ccl_comm_create");
    char* end = nullptr;
    errno = 0;
    long x = std::strtol(v, &end, 10);
    if (*end != '\0' || errno != 0 || x < lo || x > hi)
        throw Error(CCL_ERROR_INVALID_ARGUMENT,
                    std::string(name) + "='" + v + "' is not an integer in [" + std::to_string(lo) +
                        ", " + std::to_string(hi) + "]");
    return int(x);
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
        int size = env_int("CCL_SIZE", 1, INT_MAX);
        int rank = env_int("CCL_RANK", 0, size - 1);
        const char* address = std::getenv("CCL_KVS_ADDRESS");
        if (!address || !*address)
            throw Error(CCL_ERROR_INVALID_USAGE,
                        "CCL_KVS_ADDRESS is not set: start the program with cclrun");
        kvs::Client client(address, config().kvs_timeout_s);
        *comm = create(size, rank, client);
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

ccl_result_t ccl_comm_split(ccl_comm_t comm, int color, int key, ccl_comm_t* newcomm) {
    return guarded(__func__, [&] {
        auto c = comm_table().get(comm, "communicator");
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
        auto c = comm_table().remove(comm, "communicator");
        c->wait_idle();                        // its queued work still uses it
        schedule_cache().erase_comm(c->id());  // cached plans refer to its arena
    });
}

}  // extern "C"
