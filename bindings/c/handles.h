// The objects behind ccl_kvs_t and ccl_comm_t, and their registries.
#pragma once

#include <memory>
#include <type_traits>

#include "api.h"
#include "core/comm.h"
#include "core/request.h"
#include "kvs/kvs.h"

namespace ccl::capi {

struct Kvs {
    std::unique_ptr<kvs::Server> server;  // only in the process that created the main KVS
    std::unique_ptr<kvs::Client> client;
};

// What ccl_comm_destroy does once no call is inside the communicator: lets its queued work
// finish and forgets its cached plans. Then the last reference goes.
void release_comm(std::shared_ptr<Communicator> comm) noexcept;

using KvsTable = HandleTable<Kvs, 1>;
using CommTable = HandleTable<Communicator, 2, release_comm>;
using RequestTable = HandleTable<Request, 3>;
static_assert(std::is_trivially_destructible_v<CommTable>, "handle tables are never destroyed");

extern constinit KvsTable g_kvs_table;
extern constinit CommTable g_comm_table;
extern constinit RequestTable g_request_table;

inline KvsTable& kvs_table() { return g_kvs_table; }
inline CommTable& comm_table() { return g_comm_table; }  // on the path of every call
inline RequestTable& request_table() { return g_request_table; }

}  // namespace ccl::capi
