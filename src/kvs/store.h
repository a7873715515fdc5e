// The KVS server's state, free of any I/O: values, GETs parked until their key is put, and
// barriers counting arrivals. The server feeds it requests per connection and delivers the
// replies it returns.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "kvs/protocol.h"

namespace ccl::kvs {

class Store {
public:
    using ConnId = uint64_t;
    struct Delivery {
        ConnId conn;
        protocol::Reply reply;
    };

    // Handles one request from `conn`. Returns the replies it releases: to `conn` itself and/or to
    // connections parked earlier. When none is for `conn`, its request is parked; a connection
    // has at most one request parked.
    std::vector<Delivery> handle(ConnId conn, const protocol::Request& req);

    // Forgets what `conn` is parked on (it disconnected); a barrier arrival is taken back, so a
    // client that timed out and reconnects can enter the barrier again.
    void drop(ConnId conn);

    bool parked(ConnId conn) const { return parked_.count(conn) != 0; }

private:
    struct Barrier {
        uint32_t nranks = 0;
        std::vector<ConnId> waiting;
        bool done = false;  // names are used once: later arrivals are refused
    };
    struct Parked {
        protocol::Op op;
        std::string key;
    };

    std::vector<Delivery> put(ConnId conn, const protocol::Request& req);
    std::vector<Delivery> get(ConnId conn, const protocol::Request& req);
    std::vector<Delivery> barrier(ConnId conn, const protocol::Request& req);

    std::unordered_map<std::string, std::string> values_;
    std::unordered_map<std::string, std::vector<ConnId>> waiting_gets_;
    std::unordered_map<std::string, Barrier> barriers_;
    std::unordered_map<ConnId, Parked> parked_;
};

}  // namespace ccl::kvs
