// The objects behind ccl_kvs_t and ccl_comm_t, and their registries.
#pragma once

#include <memory>

#include "api.h"
#include "core/comm.h"
#include "core/request.h"
#include "kvs/kvs.h"

namespace ccl::capi {

struct Kvs {
    std::unique_ptr<kvs::Server> server;  // only in the process that created the main KVS
    std::unique_ptr<kvs::Client> client;
};

HandleTable<Kvs, 1>& kvs_table();
// Inline: comm_table() is on the path of every call.
inline HandleTable<Communicator, 2>& comm_table() {
    static HandleTable<Communicator, 2> table;
    return table;
}
HandleTable<Request, 3>& request_table();

}  // namespace ccl::capi
