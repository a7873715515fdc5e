// The key-value store that bootstraps communicators: a TCP server thread in the process that
// creates it (rank 0 or a launcher) and a client per process. Addresses are "ipv4:port".
#pragma once

#include <memory>
#include <string>

namespace ccl::kvs {

class Server {
public:
    // Binds `port`, or an OS-chosen one when it is 0. `iface` names a network interface
    // (CCL_KVS_IFACE); empty picks the default: listen on every interface and advertise the first
    // up non-loopback IPv4 address, or 127.0.0.1 when there is none. Throws ccl::Error naming what
    // failed (a port in use: CCL_ERROR_SYSTEM, saying so).
    explicit Server(const std::string& iface = "", int port = 0);
    ~Server();  // stops the thread, closes every socket
    Server(const Server&) = delete;
    Server& operator=(const Server&) = delete;

    const std::string& address() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

class Client {
public:
    // Connects, retrying until `connect_timeout_s` has passed; then throws CCL_ERROR_TIMEOUT naming
    // the address. A malformed address throws CCL_ERROR_INVALID_ARGUMENT. Thread-safe.
    Client(const std::string& address, double connect_timeout_s);
    ~Client();
    Client(const Client&) = delete;
    Client& operator=(const Client&) = delete;

    const std::string& address() const;
    void put(const std::string& key, const std::string& value);  // last write wins
    // Blocks until `key` exists; CCL_ERROR_TIMEOUT after `timeout_s`.
    std::string get(const std::string& key, double timeout_s);
    // Returns once `nranks` clients have entered barrier `name` (each name is used once);
    // CCL_ERROR_TIMEOUT after `timeout_s`.
    void barrier(const std::string& name, int nranks, double timeout_s);

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace ccl::kvs
