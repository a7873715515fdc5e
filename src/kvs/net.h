// Small socket helpers for the KVS: an owning fd, "a.b.c.d:port" addresses, interface lookup and
// deadlines. Linux only, IPv4 only.
#pragma once

#include <netinet/in.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>

namespace ccl::kvs::net {

// Owns a file descriptor; closes it on destruction. Move-only.
class Fd {
public:
    Fd() = default;
    explicit Fd(int fd) : fd_(fd) {}
    ~Fd() { reset(); }
    Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
    Fd& operator=(Fd&& other) noexcept {
        if (this != &other) {
            reset();
            fd_ = std::exchange(other.fd_, -1);
        }
        return *this;
    }
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;

    int get() const { return fd_; }
    bool valid() const { return fd_ >= 0; }
    void reset();

private:
    int fd_ = -1;
};

// Parses "a.b.c.d:port" (port 1..65535). Throws CCL_ERROR_INVALID_ARGUMENT naming the address.
sockaddr_in parse_address(const std::string& address);
std::string format_address(const sockaddr_in& addr);

// What a server binds and what it tells clients to connect to.
struct Endpoint {
    in_addr bind;       // INADDR_ANY or the interface's address
    in_addr advertise;  // the address put into "a.b.c.d:port"
};
// `iface` empty: bind INADDR_ANY, advertise the first up non-loopback IPv4 address, else loopback.
// Otherwise the named interface's IPv4 address; an unknown name throws CCL_ERROR_INVALID_ARGUMENT
// listing the interfaces that do have one.
Endpoint choose_endpoint(const std::string& iface);

// The IPv4 address of a host name or dotted quad ("node1", "10.0.0.1"). Throws
// CCL_ERROR_INVALID_ARGUMENT naming `what` (the variable it came from) when it does not resolve.
in_addr resolve_ipv4(const std::string& host, const std::string& what);

void set_nonblocking(int fd);
void set_nodelay(int fd);  // small request/response messages: no Nagle delay

// A point in time every wait is measured against.
class Deadline {
public:
    using Clock = std::chrono::steady_clock;
    explicit Deadline(double seconds);
    bool expired() const { return Clock::now() >= at_; }
    // Milliseconds left for poll(), rounded up so a wait never ends just before the deadline.
    int remaining_ms() const;

private:
    Clock::time_point at_;
};

}  // namespace ccl::kvs::net
