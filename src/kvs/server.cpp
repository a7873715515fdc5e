// The KVS server: one thread, poll() over a listening socket, an eventfd that asks it to stop and
// non-blocking client connections. Requests are handed to the Store; its replies are queued per
// connection and sent as the sockets allow. A connection that breaks the protocol is closed; so
// is one that leaves a frame half-sent for kStallTimeout.
//
// Strangers: a connection must first prove the job secret (kvs/secret.h) with a hello, within
// kHelloTimeout; until then the server reads at most one hello's worth of bytes from it and
// answers nothing else. A wrong secret gets one refusal, then the connection is closed; so is a
// first message that is not a hello. At most kMaxStrangers connections may be waiting to
// authenticate: beyond that the oldest is closed, so a flood cannot keep the job's ranks out.
#include <arpa/inet.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "kvs/kvs.h"
#include "kvs/net.h"
#include "kvs/protocol.h"
#include "kvs/store.h"

namespace ccl::kvs {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kStallTimeout = std::chrono::seconds(10);
constexpr auto kAcceptPause = std::chrono::milliseconds(100);  // after EMFILE and the like
constexpr size_t kReadChunk = 64 << 10;  // per connection and poll round: no one starves others
constexpr size_t kInputCap = protocol::kHeaderSize + protocol::kMaxFrame;
constexpr int kAcceptsPerRound = 64;
constexpr auto kHelloTimeout = std::chrono::seconds(5);
constexpr size_t kMaxStrangers = 256;
constexpr size_t kHelloFrame = protocol::kHeaderSize + protocol::kHelloBody;

struct Conn {
    net::Fd fd;
    std::string peer;  // "a.b.c.d:port", for logs
    std::string in;    // received bytes not yet handled; at most kInputCap
    std::string out;   // reply bytes not yet sent
    size_t out_sent = 0;
    Clock::time_point partial_since{};  // when `in` last started holding an incomplete frame
    bool partial = false;
    bool authenticated = false;  // sent the job's secret
    bool closing = false;        // refused: close once `out` (the refusal) is sent
    Clock::time_point accepted_at{};
};

}  // namespace

struct Server::Impl {
    net::Fd listen_fd;
    net::Fd wake_fd;
    std::string address;  // with the secret: what clients are given
    std::string shown;    // without it: for logs
    Secret secret{};
    Store store;
    std::map<Store::ConnId, Conn> conns;
    Store::ConnId next_id = 1;
    Clock::time_point accept_paused_until{};
    std::thread thread;

    void run();
    void accept_all();
    void on_readable(Store::ConnId id, Conn& c);
    void handle_frames(Store::ConnId id);
    void deliver(const Store::Delivery& d);
    void flush(Store::ConnId id, Conn& c);
    void close(Store::ConnId id, const std::string& why, bool hostile);
    // Checks the first frame of a connection; false when it closed or refused the connection.
    bool authenticate(Store::ConnId id, Conn& c, std::string_view body);
    void evict_a_stranger();
    int poll_timeout_ms() const;
};

Server::Server(const std::string& iface, int port, const std::optional<Secret>& secret)
    : impl_(std::make_unique<Impl>()) {
    impl_->secret = secret ? *secret : random_secret();
    if (port < 0 || port > 65535)
        throw Error(CCL_ERROR_INVALID_ARGUMENT,
                    "KVS server: port " + std::to_string(port) + " is not in 0..65535");
    net::Endpoint ep = net::choose_endpoint(iface);
    net::Fd fd(socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd.valid()) throw_errno("KVS server: socket");
    int one = 1;
    setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr = ep.bind;
    addr.sin_port = htons(static_cast<uint16_t>(port));  // 0: the OS picks a free port
    if (bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
        if (errno == EADDRINUSE)
            throw Error(CCL_ERROR_SYSTEM, "KVS server: port " + std::to_string(port) +
                                              " is already in use on this host (bind to " +
                                              net::format_address(addr) + ")");
        throw_errno("KVS server: bind to " + net::format_address(addr));
    }
    if (listen(fd.get(), SOMAXCONN) != 0) throw_errno("KVS server: listen");
    socklen_t len = sizeof(addr);
    if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
        throw_errno("KVS server: getsockname");
    }
    sockaddr_in advertised = addr;
    advertised.sin_addr = ep.advertise;
    impl_->address = format_kvs_address(advertised, impl_->secret);
    impl_->shown = net::format_address(advertised);
    impl_->listen_fd = std::move(fd);
    impl_->wake_fd = net::Fd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    if (!impl_->wake_fd.valid()) throw_errno("KVS server: eventfd");
    impl_->thread = std::thread([impl = impl_.get()] {
        try {
            impl->run();
        } catch (const std::exception& e) {
            // Clients then time out with a message naming the KVS; say why here.
            log().error("KVS server at {} stopped: {}", impl->shown, e.what());
        }
    });
    log().debug("KVS server listening at {}", impl_->shown);
}

Server::~Server() {
    uint64_t one = 1;
    // An eventfd write only fails when the counter would overflow: it is then readable anyway.
    [[maybe_unused]] ssize_t n = write(impl_->wake_fd.get(), &one, sizeof(one));
    if (impl_->thread.joinable()) impl_->thread.join();
}

const std::string& Server::address() const { return impl_->address; }

int Server::Impl::poll_timeout_ms() const {
    Clock::time_point next = Clock::time_point::max();
    if (accept_paused_until != Clock::time_point{}) next = accept_paused_until;
    for (const auto& [id, c] : conns) {
        if (c.partial) next = std::min(next, c.partial_since + kStallTimeout);
        if (!c.authenticated) next = std::min(next, c.accepted_at + kHelloTimeout);
    }
    if (next == Clock::time_point::max()) return -1;  // only a socket or the eventfd can wake us
    auto ms = std::chrono::ceil<std::chrono::milliseconds>(next - Clock::now()).count();
    return static_cast<int>(std::clamp<decltype(ms)>(ms, 0, 60'000));
}

void Server::Impl::run() {
    std::vector<pollfd> fds;
    std::vector<Store::ConnId> ids;  // ids[i] belongs to fds[i + 2]
    for (;;) {
        auto now = Clock::now();
        if (accept_paused_until != Clock::time_point{} && now >= accept_paused_until) {
            accept_paused_until = {};
        }
        fds.clear();
        ids.clear();
        fds.push_back({wake_fd.get(), POLLIN, 0});
        fds.push_back({listen_fd.get(),
                       static_cast<short>(accept_paused_until == Clock::time_point{} ? POLLIN : 0),
                       0});
        for (auto& [id, c] : conns) {
            // POLLRDHUP notices a vanished peer even while we do not read from it.
            short ev = POLLRDHUP;
            if (c.in.size() < (c.authenticated ? kInputCap : kHelloFrame) && !c.closing)
                ev |= POLLIN;
            if (c.out_sent < c.out.size()) ev |= POLLOUT;
            fds.push_back({c.fd.get(), ev, 0});
            ids.push_back(id);
        }
        int n = poll(fds.data(), fds.size(), poll_timeout_ms());
        if (n < 0) {
            if (errno == EINTR) continue;
            throw_errno("KVS server: poll");
        }
        if (fds[0].revents) return;  // ~Server asked us to stop
        if (fds[1].revents & POLLIN) accept_all();

        now = Clock::now();
        for (size_t i = 0; i < ids.size(); ++i) {
            auto it = conns.find(ids[i]);
            if (it == conns.end()) continue;  // closed earlier in this round
            Conn& c = it->second;
            short re = fds[i + 2].revents;
            if (re & (POLLIN | POLLHUP | POLLERR | POLLRDHUP)) {
                on_readable(ids[i], c);
                if (!conns.count(ids[i])) continue;
            }
            if (re & POLLOUT) {
                flush(ids[i], c);
                if (!conns.count(ids[i])) continue;
            }
            if (c.partial && now - c.partial_since >= kStallTimeout) {
                close(ids[i],
                      "a frame has been incomplete for " + std::to_string(kStallTimeout.count()) +
                          " s",
                      true);
            } else if (!c.authenticated && now - c.accepted_at >= kHelloTimeout) {
                close(ids[i],
                      "no hello with the job secret within " +
                          std::to_string(kHelloTimeout.count()) + " s",
                      true);
            }
        }
        // Connections freed up this round (reply sent, parked request answered) may hold the
        // next request already.
        for (size_t i = 0; i < ids.size(); ++i) {
            if (conns.count(ids[i])) handle_frames(ids[i]);
        }
    }
}

void Server::Impl::accept_all() {
    for (int i = 0; i < kAcceptsPerRound; ++i) {
        sockaddr_in peer{};
        socklen_t len = sizeof(peer);
        net::Fd fd(accept4(listen_fd.get(), reinterpret_cast<sockaddr*>(&peer), &len,
                           SOCK_NONBLOCK | SOCK_CLOEXEC));
        if (!fd.valid()) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return;
            if (errno == ECONNABORTED || errno == EPROTO) continue;
            // Out of descriptors or memory: back off rather than spin on a readable socket.
            log().warn("KVS server at {}: accept: {}; pausing new connections", shown,
                       std::strerror(errno));
            accept_paused_until = Clock::now() + kAcceptPause;
            return;
        }
        net::set_nodelay(fd.get());
        Conn c;
        c.fd = std::move(fd);
        c.peer = net::format_address(peer);
        c.accepted_at = Clock::now();
        evict_a_stranger();
        conns.emplace(next_id++, std::move(c));
    }
}

void Server::Impl::evict_a_stranger() {
    size_t strangers = 0;
    auto oldest = conns.end();
    for (auto it = conns.begin(); it != conns.end(); ++it) {
        if (it->second.authenticated) continue;
        ++strangers;
        // Ids grow with time: the first unauthenticated one is the oldest.
        if (oldest == conns.end()) oldest = it;
    }
    if (strangers >= kMaxStrangers) {
        close(
            oldest->first,
            std::to_string(strangers) + " connections are waiting to authenticate; the oldest goes",
            true);
    }
}

bool Server::Impl::authenticate(Store::ConnId id, Conn& c, std::string_view body) {
    protocol::Request req;
    try {
        req = protocol::decode_request(body);
    } catch (const protocol::ProtocolError& e) {
        close(id, std::string("malformed hello: ") + e.what(), true);
        return false;
    }
    if (req.op != protocol::Op::hello) {
        close(id, "the first message is not a hello with the job secret", true);
        return false;
    }
    // Compared first and always in full, so that the reply's timing says nothing about the secret.
    bool match = equal_constant_time(req.secret.data(), secret.data(), secret.size());
    std::string refusal;
    if (req.version != protocol::kVersion) {
        refusal = "it speaks KVS protocol version " + std::to_string(req.version) +
                  ", this server version " + std::to_string(protocol::kVersion) +
                  " (mixed ccl versions in one job?)";
    } else if (!match) {
        refusal = "wrong job secret: this KVS serves another job (a stale or foreign address?)";
    }
    if (!refusal.empty()) {
        log().warn("KVS server at {}: refusing the connection from {}: {}", shown, c.peer, refusal);
        c.closing = true;
        deliver({id, protocol::Reply{CCL_ERROR_INVALID_USAGE, refusal}});
        return false;
    }
    c.authenticated = true;
    deliver({id, protocol::Reply{}});
    return conns.count(id) != 0;
}

void Server::Impl::on_readable(Store::ConnId id, Conn& c) {
    char buf[kReadChunk];
    // A stranger gets no buffer beyond its hello: whatever follows waits until it authenticated.
    size_t cap = c.authenticated ? kInputCap : kHelloFrame;
    size_t room = cap - std::min(c.in.size(), cap);
    if (room == 0) {
        // We only poll it for hang-ups while a request is pending and its buffer is full.
        return close(id, "peer hung up", false);
    }
    ssize_t r = recv(c.fd.get(), buf, std::min(room, sizeof(buf)), 0);
    if (r == 0) return close(id, "peer closed the connection", false);
    if (r < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return;
        return close(id, std::string("recv: ") + std::strerror(errno), false);
    }
    c.in.append(buf, static_cast<size_t>(r));
    handle_frames(id);
}

void Server::Impl::handle_frames(Store::ConnId id) {
    size_t pos = 0;
    for (;;) {
        auto it = conns.find(id);
        if (it == conns.end()) return;
        Conn& c = it->second;
        // One request at a time per connection: wait until the last one is answered and sent.
        bool busy = store.parked(id) || c.out_sent < c.out.size();
        size_t avail = c.in.size() - pos;
        bool complete = false;
        if (c.closing) return;  // refused: nothing more is read from it
        if (avail >= protocol::kHeaderSize) {
            size_t body = 0;
            try {
                body = protocol::body_length(c.in.data() + pos);
            } catch (const protocol::ProtocolError& e) {
                return close(id, e.what(), true);
            }
            if (!c.authenticated && body != protocol::kHelloBody) {
                return close(id,
                             "the first message (" + std::to_string(body) +
                                 " bytes) is not a hello with the job secret",
                             true);
            }
            complete = avail >= protocol::kHeaderSize + body;
            if (complete && !busy && !c.authenticated) {
                std::string_view view(c.in.data() + pos + protocol::kHeaderSize, body);
                if (!authenticate(id, c, view)) {
                    if (auto again = conns.find(id); again != conns.end()) {
                        again->second.in.clear();  // refused: what it sent is not kept
                        again->second.partial = false;
                    }
                    return;
                }
                pos += protocol::kHeaderSize + body;
                continue;
            }
            if (complete && !busy) {
                std::string_view view(c.in.data() + pos + protocol::kHeaderSize, body);
                protocol::Request req;
                try {
                    req = protocol::decode_request(view);
                } catch (const protocol::ProtocolError& e) {
                    return close(id, e.what(), true);
                }
                pos += protocol::kHeaderSize + body;
                if (req.op == protocol::Op::hello) {
                    close(id, "a second hello", true);
                    return;
                }
                for (const auto& d : store.handle(id, req)) deliver(d);
                continue;
            }
        }
        if (!conns.count(id)) return;
        c.in.erase(0, pos);
        bool partial = !c.in.empty() && !complete;
        if (partial && !c.partial) c.partial_since = Clock::now();
        c.partial = partial;
        return;
    }
}

void Server::Impl::deliver(const Store::Delivery& d) {
    auto it = conns.find(d.conn);
    if (it == conns.end()) return;
    Conn& c = it->second;
    if (c.out_sent == c.out.size()) {
        c.out.clear();
        c.out_sent = 0;
    }
    c.out += protocol::encode(d.reply);
    flush(d.conn, c);
}

void Server::Impl::flush(Store::ConnId id, Conn& c) {
    while (c.out_sent < c.out.size()) {
        ssize_t r = send(c.fd.get(), c.out.data() + c.out_sent, c.out.size() - c.out_sent,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (r < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) return;
            if (errno == EINTR) continue;
            return close(id, std::string("send: ") + std::strerror(errno), false);
        }
        c.out_sent += static_cast<size_t>(r);
    }
    c.out.clear();
    c.out.shrink_to_fit();  // a large value must not stay allocated per idle connection
    c.out_sent = 0;
    if (c.closing) close(id, "refused, and told why", false);
}

void Server::Impl::close(Store::ConnId id, const std::string& why, bool hostile) {
    auto it = conns.find(id);
    if (it == conns.end()) return;
    if (hostile) {
        log().warn("KVS server at {}: closing the connection from {}: {}", shown, it->second.peer,
                   why);
    } else {
        log().debug("KVS server at {}: dropping the connection from {}: {}", shown, it->second.peer,
                    why);
    }
    store.drop(id);
    conns.erase(it);
}

}  // namespace ccl::kvs
