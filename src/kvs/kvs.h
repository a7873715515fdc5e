// The key-value store that bootstraps communicators: a TCP server thread in the process that
// creates it (rank 0 or a launcher) and a client per process. Addresses are
// "ipv4:port/<job secret in hex>" (kvs/secret.h): only clients that know the secret get in, and
// clients talk only to a server that knows it.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "kvs/secret.h"

namespace ccl::kvs {

// What one server lets connections make it hold, so that neither strangers nor a runaway member
// can exhaust the process serving the job (docs/reliability.md). Past a limit the connection that
// would pass it is refused or closed, with a warning.
struct ServerLimits {
    // Connections that completed the handshake, at once: a newcomer past it is refused with
    // CCL_ERROR_OUT_OF_MEMORY.
    size_t max_members = 4096;
    // Connections still in the handshake (which has a deadline of 5 s): past it the oldest goes.
    size_t max_strangers = 256;
    // Bytes of requests being received and replies not yet sent, beyond the first 4 KiB of each
    // member (which every request of ccl's own fits in): a frame that would pass it closes its
    // connection.
    size_t max_buffered = size_t{64} << 20;

    // For a job of `nranks` ranks (0: not known, the defaults above): a few connections per rank.
    static ServerLimits for_job(int nranks) {
        ServerLimits l;
        if (nranks > 0) l.max_members = 64 + 4 * size_t(nranks);
        return l;
    }
};

class Server {
public:
    // Binds `port`, or an OS-chosen one when it is 0. `iface` names a network interface
    // (CCL_KVS_IFACE); empty picks the default: listen on every interface and advertise the first
    // up non-loopback IPv4 address, or 127.0.0.1 when there is none. Throws ccl::Error naming what
    // failed (a port in use: CCL_ERROR_SYSTEM, saying so). `secret` is the job secret clients
    // must prove; nullopt draws a random one (the usual case: it travels in address()).
    explicit Server(const std::string& iface = "", int port = 0,
                    const std::optional<Secret>& secret = std::nullopt,
                    const ServerLimits& limits = ServerLimits::for_job(0));
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
    // CCL_ERROR_INVALID_ARGUMENT; a server that cannot prove the secret (another job's, or an
    // impostor holding the port) or refuses ours, CCL_ERROR_INVALID_USAGE; one that is full,
    // CCL_ERROR_OUT_OF_MEMORY. Every connection (and reconnection) starts with the handshake of
    // kvs/protocol.h; nothing is sent before the server proved the secret. Thread-safe.
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
