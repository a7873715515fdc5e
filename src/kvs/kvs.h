// The key-value store that bootstraps communicators: a TCP server thread in the process that
// creates it (rank 0 or a launcher) and a client per process. Addresses are
// "ipv4:port/<job secret in hex>" (kvs/secret.h): only clients that know the secret get in.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "kvs/secret.h"

namespace ccl::kvs {

class Server {
public:
    // Binds `port`, or an OS-chosen one when it is 0. `iface` names a network interface
    // (CCL_KVS_IFACE); empty picks the default: listen on every interface and advertise the first
    // up non-loopback IPv4 address, or 127.0.0.1 when there is none. Throws ccl::Error naming what
    // failed (a port in use: CCL_ERROR_SYSTEM, saying so). `secret` is the job secret clients
    // must prove; nullopt draws a random one (the usual case: it travels in address()).
    explicit Server(const std::string& iface = "", int port = 0,
                    const std::optional<Secret>& secret = std::nullopt);
    ~Server();  // stops the thread, closes every socket
    Server(const Server&) = delete;
    Server& operator=(const Server&) = delete;

    // "a.b.c.d:port/secret": give it only to the ranks of the job.
    const std::string& address() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

class Client {
public:
    // Connects, retrying until `connect_timeout_s` has passed; then throws CCL_ERROR_TIMEOUT naming
    // the address. A malformed address, or one without a job secret, throws
    // CCL_ERROR_INVALID_ARGUMENT; a server that refuses the secret, CCL_ERROR_INVALID_USAGE.
    // Every connection (and reconnection) starts with a hello proving the secret. Thread-safe.
    Client(const std::string& address, double connect_timeout_s);
    ~Client();
    Client(const Client&) = delete;
    Client& operator=(const Client&) = delete;

    const std::string& address() const;                          // as given, with the secret
    const std::string& shown_address() const;                    // without it, for messages
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
