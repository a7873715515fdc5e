#include "kvs/net.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <memory>
#include <set>

#include "base/error.h"

namespace ccl::kvs::net {

void Fd::reset() {
    if (fd_ >= 0) {
        // Linux releases the descriptor even when close() reports EINTR: never retry.
        ::close(fd_);
        fd_ = -1;
    }
}

sockaddr_in parse_address(const std::string& address) {
    auto bad = [&](const char* why) {
        return Error(CCL_ERROR_INVALID_ARGUMENT, "malformed KVS address '" + address + "' (" + why +
                                                     "; expected a.b.c.d:port)");
    };
    size_t colon = address.rfind(':');
    if (colon == std::string::npos) throw bad("no port");
    std::string host = address.substr(0, colon);
    std::string port_text = address.substr(colon + 1);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) throw bad("not an IPv4 address");
    unsigned port = 0;
    const char* end = port_text.data() + port_text.size();
    auto [ptr, ec] = std::from_chars(port_text.data(), end, port);
    if (port_text.empty() || ec != std::errc() || ptr != end || port < 1 || port > 65535) {
        throw bad("port is not a number in 1..65535");
    }
    addr.sin_port = htons(static_cast<uint16_t>(port));
    return addr;
}

std::string format_address(const sockaddr_in& addr) {
    char host[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &addr.sin_addr, host, sizeof(host));
    return std::string(host) + ":" + std::to_string(ntohs(addr.sin_port));
}

Endpoint choose_endpoint(const std::string& iface) {
    ifaddrs* raw = nullptr;
    if (getifaddrs(&raw) != 0) throw_errno("getifaddrs");
    std::unique_ptr<ifaddrs, decltype(&freeifaddrs)> list(raw, &freeifaddrs);

    Endpoint ep{};
    std::set<std::string> names;  // interfaces with an IPv4 address, for the error message
    for (ifaddrs* it = list.get(); it; it = it->ifa_next) {
        if (!it->ifa_addr || it->ifa_addr->sa_family != AF_INET) continue;
        in_addr a = reinterpret_cast<const sockaddr_in*>(it->ifa_addr)->sin_addr;
        names.insert(it->ifa_name);
        if (!iface.empty() && iface == it->ifa_name) {
            ep.bind = a;
            ep.advertise = a;
            return ep;
        }
    }
    if (!iface.empty()) {
        std::string known;
        for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
        throw Error(CCL_ERROR_INVALID_ARGUMENT,
                    "KVS interface '" + iface +
                        "' (CCL_KVS_IFACE) has no IPv4 address or does not "
                        "exist; interfaces with one: " +
                        (known.empty() ? "none" : known));
    }
    ep.bind.s_addr = htonl(INADDR_ANY);
    ep.advertise.s_addr = htonl(INADDR_LOOPBACK);
    for (ifaddrs* it = list.get(); it; it = it->ifa_next) {
        if (!it->ifa_addr || it->ifa_addr->sa_family != AF_INET) continue;
        if (!(it->ifa_flags & IFF_UP) || (it->ifa_flags & IFF_LOOPBACK)) continue;
        ep.advertise = reinterpret_cast<const sockaddr_in*>(it->ifa_addr)->sin_addr;
        break;
    }
    return ep;
}

in_addr resolve_ipv4(const std::string& host, const std::string& what) {
    in_addr a{};
    if (inet_pton(AF_INET, host.c_str(), &a) == 1) return a;  // no lookup for a dotted quad
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* raw = nullptr;
    int rc = getaddrinfo(host.c_str(), nullptr, &hints, &raw);
    if (rc != 0 || !raw)
        throw Error(CCL_ERROR_INVALID_ARGUMENT,
                    what + "='" + host + "' does not resolve to an IPv4 address: " +
                        (rc == EAI_SYSTEM ? std::strerror(errno) : gai_strerror(rc)));
    std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> list(raw, &freeaddrinfo);
    return reinterpret_cast<const sockaddr_in*>(list->ai_addr)->sin_addr;
}

void set_nonblocking(int fd) {
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) throw_errno("fcntl(O_NONBLOCK)");
}

void set_nodelay(int fd) {
    int one = 1;
    // Best effort: only latency suffers without it.
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

Deadline::Deadline(double seconds) {
    // Clamp nonsense (negative, NaN, centuries) to something a steady_clock can add.
    if (!(seconds > 0)) seconds = 0;
    seconds = std::min(seconds, 1e9);
    at_ = Clock::now() +
          std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

int Deadline::remaining_ms() const {
    auto left = at_ - Clock::now();
    if (left <= Clock::duration::zero()) return 0;
    auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
    return static_cast<int>(std::min<decltype(ms)>(ms, 1 << 30));
}

}  // namespace ccl::kvs::net
