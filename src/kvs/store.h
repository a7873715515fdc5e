// The KVS server's state, free of any I/O: values, GETs parked until their key is put, and
// barriers counting arrivals. The server feeds it requests per connection and delivers the
// replies it returns.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "kvs/protocol.h"

namespace ccl::kvs {

class Store {
public:
    using ConnId = uint64_t;
    // Bounds on what the clients of one job may make the server hold: a runaway (or buggy) rank
    // gets CCL_ERROR_OUT_OF_MEMORY instead of exhausting the memory of the process serving it.
    static constexpr size_t kMaxEntries = size_t{1} << 20;  // keys plus barrier names
    static constexpr size_t kMaxBytes = size_t{256} << 20;  // of keys, values and barrier names

    explicit Store(size_t max_entries = kMaxEntries, size_t max_bytes = kMaxBytes)
        : max_entries_(max_entries), max_bytes_(max_bytes) {}
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
    // A refusal when `more` entries and `bytes` more would pass the limits, else nullopt.
    std::optional<protocol::Reply> over_limit(size_t more, size_t bytes) const;

    std::unordered_map<std::string, std::string> values_;
    std::unordered_map<std::string, std::vector<ConnId>> waiting_gets_;
    std::unordered_map<std::string, Barrier> barriers_;
    std::unordered_map<ConnId, Parked> parked_;
    size_t max_entries_, max_bytes_;
    size_t bytes_ = 0;  // held in values_ and barriers_
};

}  // namespace ccl::kvs
