// The KVS server: one thread, poll() over a listening socket, an eventfd that asks it to stop and
// non-blocking client connections. Requests are handed to the Store; its replies are queued per
// connection and sent as the sockets allow. A connection that breaks the protocol is closed; so
// is one that leaves a frame half-sent, or a reply unread, for kStallTimeout.
//
// Strangers: a connection must first complete the handshake of kvs/protocol.h (hello, challenge,
// proof) within kHandshakeTimeout; until then the server reads at most the one message it expects
// next and answers nothing but the challenge, or one refusal before it closes. At most
// max_strangers connections may be in the handshake: beyond that the oldest is closed, so a flood
// cannot keep the job's ranks out.
//
// Members (connections that completed the handshake): at most max_members at once; every frame
// must carry this connection's MAC (protocol::FrameMac). Each member may hold kFreeBytes of input
// and output; a larger frame or reply draws its whole size from the max_buffered bytes shared by
// all connections, reserved when its header arrives, so the server's memory does not grow with
// the number of connections that hold large frames half-sent.
//
// Warnings about misbehaving connections go through a WarnLimiter: a burst in full, then one
// summary line per interval.
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

#include "base/error.h"
#include "base/log.h"
#include "kvs/kvs.h"
#include "kvs/net.h"
#include "kvs/protocol.h"
#include "kvs/store.h"
#include "kvs/warn_limit.h"

namespace ccl::kvs {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kStallTimeout = std::chrono::seconds(10);
constexpr auto kAcceptPause = std::chrono::milliseconds(100);  // after EMFILE and the like
constexpr size_t kReadChunk = 64 << 10;  // per connection and poll round: no one starves others
constexpr int kAcceptsPerRound = 64;
constexpr auto kHandshakeTimeout = std::chrono::seconds(5);
constexpr size_t kHelloFrame = protocol::kHeaderSize + protocol::kHelloBody;
constexpr size_t kProofFrame = protocol::kHeaderSize + protocol::kProofBody;
constexpr size_t kFreeBytes = 4 << 10;  // per member, not drawn from max_buffered
constexpr size_t kWarnBurst = 10;
constexpr auto kWarnInterval = std::chrono::seconds(10);

enum class Stage { hello, proof, member };

struct Conn {
    net::Fd fd;
    std::string peer;  // "a.b.c.d:port", for logs
    Stage stage = Stage::hello;
    std::string in;        // received bytes not yet handled
    size_t in_charge = 0;  // of max_buffered, held for the large frame at the front of `in`
    std::string out;       // reply bytes not yet sent
    size_t out_sent = 0;
    size_t out_charge = 0;              // of max_buffered, held by `out`
    Clock::time_point partial_since{};  // when `in` last started holding an incomplete frame
    bool partial = false;
    Clock::time_point out_since{};  // when `out` last made progress while it held unsent bytes
    bool closing = false;           // refused: close once `out` (the refusal) is sent
    Clock::time_point accepted_at{};
    Nonce client_nonce{}, server_nonce{};
    std::optional<protocol::FrameMac> from_peer, to_peer;  // once the challenge is sent

    bool unsent() const { return out_sent < out.size(); }
};

std::string mib(size_t bytes) { return std::to_string((bytes + (size_t{1} << 19)) >> 20) + " MiB"; }

}  // namespace

struct Server::Impl {
    net::Fd listen_fd;
    net::Fd wake_fd;
    std::string address;  // with the secret: what clients are given
    std::string shown;    // without it: for logs
    Secret secret{};
    ServerLimits limits;
    Store store;
    std::map<Store::ConnId, Conn> conns;
    Store::ConnId next_id = 1;
    size_t members = 0;
    size_t buffered = 0;  // the sum of every connection's in_charge and out_charge
    Clock::time_point accept_paused_until{};
    WarnLimiter warnings{kWarnBurst, kWarnInterval};
    std::thread thread;

    void run();
    void accept_all();
    void on_readable(Store::ConnId id, Conn& c);
    void handle_frames(Store::ConnId id);
    // Handles the frame at the front of c.in when it is complete and the connection is free;
    // returns whether it did and the connection is still open.
    bool handle_front(Store::ConnId id, Conn& c);
    bool check_hello(Store::ConnId id, Conn& c, size_t body, std::string_view got);
    bool on_hello(Store::ConnId id, Conn& c, std::string_view body);
    bool on_proof(Store::ConnId id, Conn& c, std::string_view body);
    bool on_request(Store::ConnId id, Conn& c, std::string_view body);
    bool charge_input(Store::ConnId id, Conn& c, size_t frame);
    bool charge_output(Store::ConnId id, Conn& c);
    void deliver(const Store::Delivery& d);
    void flush(Store::ConnId id, Conn& c);
    // Tells the peer why (sealed once the challenge is out), then closes.
    void refuse(Store::ConnId id, Conn& c, ccl_result_t code, const std::string& why);
    void close(Store::ConnId id, const std::string& why, bool hostile);
    // A warning about one connection ("closing the connection from ...: why"), rate-limited.
    void warn(const std::string& what);
    void summarize_warnings(std::optional<WarnLimiter::Summary> s);
    void evict_a_stranger();
    size_t read_cap(const Conn& c) const;
    int poll_timeout_ms() const;
};

Server::Server(const std::string& iface, int port, const std::optional<Secret>& secret,
               const ServerLimits& limits)
    : impl_(std::make_unique<Impl>()) {
    impl_->secret = secret ? *secret : random_secret();
    impl_->limits = limits;
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
    impl_->summarize_warnings(impl_->warnings.flush());  // the thread is gone: ours now
}

const std::string& Server::address() const { return impl_->address; }

size_t Server::Impl::read_cap(const Conn& c) const {
    switch (c.stage) {
        case Stage::hello: return kHelloFrame;
        case Stage::proof: return kProofFrame;
        case Stage::member: break;
    }
    return std::max(kFreeBytes, c.in_charge);
}

int Server::Impl::poll_timeout_ms() const {
    Clock::time_point next = Clock::time_point::max();
    if (accept_paused_until != Clock::time_point{}) next = accept_paused_until;
    if (auto w = warnings.next_due()) next = std::min(next, *w);
    for (const auto& [id, c] : conns) {
        if (c.partial) next = std::min(next, c.partial_since + kStallTimeout);
        if (c.unsent()) next = std::min(next, c.out_since + kStallTimeout);
        if (c.stage != Stage::member) next = std::min(next, c.accepted_at + kHandshakeTimeout);
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
        summarize_warnings(warnings.due(now));
        fds.clear();
        ids.clear();
        fds.push_back({wake_fd.get(), POLLIN, 0});
        fds.push_back({listen_fd.get(),
                       static_cast<short>(accept_paused_until == Clock::time_point{} ? POLLIN : 0),
                       0});
        for (auto& [id, c] : conns) {
            // POLLRDHUP notices a vanished peer even while we do not read from it.
            short ev = POLLRDHUP;
            if (c.in.size() < read_cap(c) && !c.closing) ev |= POLLIN;
            if (c.unsent()) ev |= POLLOUT;
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
            const auto stall = std::to_string(kStallTimeout.count()) + " s";
            if (c.partial && now - c.partial_since >= kStallTimeout) {
                close(ids[i], "a frame has been incomplete for " + stall, true);
            } else if (c.unsent() && now - c.out_since >= kStallTimeout) {
                close(ids[i], "it has not read its reply for " + stall, true);
            } else if (c.stage != Stage::member && now - c.accepted_at >= kHandshakeTimeout) {
                close(ids[i],
                      "no handshake proving the job secret within " +
                          std::to_string(kHandshakeTimeout.count()) + " s",
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
            warn(std::string("accept: ") + std::strerror(errno) + "; pausing new connections");
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
        if (it->second.stage == Stage::member) continue;
        ++strangers;
        // Ids grow with time: the first unauthenticated one is the oldest.
        if (oldest == conns.end()) oldest = it;
    }
    if (strangers >= limits.max_strangers && oldest != conns.end()) {
        close(oldest->first,
              std::to_string(strangers) + " connections are in the handshake (the limit is " +
                  std::to_string(limits.max_strangers) + "); the oldest goes",
              true);
    }
}

void Server::Impl::on_readable(Store::ConnId id, Conn& c) {
    char buf[kReadChunk];
    // A stranger gets no buffer beyond the handshake message it owes; a member no more than its
    // free bytes or the large frame it was granted.
    size_t cap = read_cap(c);
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
    for (;;) {
        auto it = conns.find(id);
        if (it == conns.end() || it->second.closing) return;
        if (!handle_front(id, it->second)) return;
    }
}

bool Server::Impl::handle_front(Store::ConnId id, Conn& c) {
    const size_t avail = c.in.size();
    auto waiting = [&](bool incomplete) {
        if (incomplete && !c.partial) c.partial_since = Clock::now();
        c.partial = incomplete;
        return false;
    };
    if (avail < protocol::kHeaderSize) return waiting(avail > 0);
    size_t body = 0;
    try {
        body = protocol::body_length(c.in.data());
    } catch (const protocol::ProtocolError& e) {
        close(id, e.what(), true);
        return false;
    }
    const size_t frame = protocol::kHeaderSize + body;
    std::string_view got(c.in.data() + protocol::kHeaderSize,
                         std::min(body, avail - protocol::kHeaderSize));
    switch (c.stage) {
        case Stage::hello:
            if (!check_hello(id, c, body, got)) return false;
            break;
        case Stage::proof:
            if (body != protocol::kProofBody) {
                close(id,
                      "a message of " + std::to_string(body) +
                          " bytes where the proof of the job secret was due",
                      true);
                return false;
            }
            break;
        case Stage::member:
            if (!charge_input(id, c, frame)) return false;
            break;
    }
    // One request at a time per connection: wait until the last one is answered and sent.
    const bool busy = store.parked(id) || c.unsent();
    if (avail < frame || busy) return waiting(avail < frame);

    std::string_view view(c.in.data() + protocol::kHeaderSize, body);
    bool open = false;
    switch (c.stage) {
        case Stage::hello: open = on_hello(id, c, view); break;
        case Stage::proof: open = on_proof(id, c, view); break;
        case Stage::member: open = on_request(id, c, view); break;
    }
    if (!open || !conns.count(id)) return false;
    c.in.erase(0, frame);
    buffered -= c.in_charge;
    c.in_charge = 0;
    // A large frame's buffer must not stay allocated per idle connection.
    if (c.in.capacity() > kFreeBytes && c.in.size() <= kFreeBytes) std::string(c.in).swap(c.in);
    c.partial = false;
    return !c.closing;
}

bool Server::Impl::check_hello(Store::ConnId id, Conn& c, size_t body, std::string_view got) {
    // The op and version come first in a hello of every version: a peer of another version is
    // told so, whatever the size of its hello.
    if (got.size() < 5 && got.size() < body) return true;  // wait for them
    std::optional<uint32_t> version = protocol::hello_version(got);
    if (!version) {
        close(id, "the first message is not a hello", true);
        return false;
    }
    if (*version != protocol::kVersion) {
        refuse(id, c, CCL_ERROR_INVALID_USAGE,
               "it speaks KVS protocol version " + std::to_string(*version) +
                   ", this server version " + std::to_string(protocol::kVersion) +
                   " (mixed ccl versions in one job?)");
        return false;
    }
    if (body != protocol::kHelloBody) {
        close(id, "a hello of " + std::to_string(body) + " bytes", true);
        return false;
    }
    return true;
}

bool Server::Impl::on_hello(Store::ConnId id, Conn& c, std::string_view body) {
    protocol::Request req;
    try {
        req = protocol::decode_request(body);
    } catch (const protocol::ProtocolError& e) {
        close(id, std::string("malformed hello: ") + e.what(), true);
        return false;
    }
    c.client_nonce = req.nonce;
    c.server_nonce = random_nonce();
    protocol::Challenge ch{c.server_nonce,
                           proof_of(Role::server, secret, c.client_nonce, c.server_nonce)};
    deliver({id, protocol::Reply{CCL_SUCCESS, protocol::challenge_payload(ch)}});
    if (!conns.count(id)) return false;
    c.from_peer.emplace(frame_key(Role::client, secret, c.client_nonce, c.server_nonce));
    c.to_peer.emplace(frame_key(Role::server, secret, c.client_nonce, c.server_nonce));
    c.stage = Stage::proof;
    return true;
}

bool Server::Impl::on_proof(Store::ConnId id, Conn& c, std::string_view body) {
    protocol::Request req;
    try {
        req = protocol::decode_request(body);
    } catch (const protocol::ProtocolError& e) {
        close(id, std::string("malformed proof: ") + e.what(), true);
        return false;
    }
    if (req.op != protocol::Op::proof) {
        close(id, "a message other than the proof of the job secret", true);
        return false;
    }
    // Compared in full whatever the first difference, so that timing says nothing about the MAC.
    Mac expected = proof_of(Role::client, secret, c.client_nonce, c.server_nonce);
    if (!equal_constant_time(req.proof.data(), expected.data(), expected.size())) {
        // A client that checked our proof knows the secret: this one replays an old exchange,
        // or has a bug.
        refuse(id, c, CCL_ERROR_INVALID_USAGE,
               "wrong proof of the job secret for this connection (a replayed exchange?)");
        return false;
    }
    if (members >= limits.max_members) {
        refuse(id, c, CCL_ERROR_OUT_OF_MEMORY,
               "the KVS server serves " + std::to_string(members) +
                   " connections already, its limit for this job");
        return false;
    }
    c.stage = Stage::member;
    ++members;
    deliver({id, protocol::Reply{}});
    return conns.count(id) != 0;
}

bool Server::Impl::on_request(Store::ConnId id, Conn& c, std::string_view body) {
    std::optional<std::string_view> message = c.from_peer->open(body);
    if (!message) {
        close(id, "a frame failed its authentication (forged, replayed or from another connection)",
              true);
        return false;
    }
    protocol::Request req;
    try {
        req = protocol::decode_request(*message);
    } catch (const protocol::ProtocolError& e) {
        close(id, e.what(), true);
        return false;
    }
    if (req.op == protocol::Op::hello || req.op == protocol::Op::proof) {
        close(id, "a handshake message after the handshake", true);
        return false;
    }
    for (const auto& d : store.handle(id, req)) deliver(d);
    return conns.count(id) != 0;
}

bool Server::Impl::charge_input(Store::ConnId id, Conn& c, size_t frame) {
    if (frame <= kFreeBytes || c.in_charge >= frame) return true;
    size_t more = frame - c.in_charge;
    if (buffered + more > limits.max_buffered) {
        close(id,
              "its frame of " + std::to_string(frame) + " bytes would take what the server " +
                  "buffers past its limit of " + mib(limits.max_buffered) + " (" + mib(buffered) +
                  " are in frames and replies of other connections)",
              true);
        return false;
    }
    buffered += more;
    c.in_charge = frame;
    c.in.reserve(frame);  // exactly: appending must not double it
    return true;
}

bool Server::Impl::charge_output(Store::ConnId id, Conn& c) {
    // What the kernel took at once is not ours to count; a reader keeps up, so mostly nothing is.
    size_t want = c.out.size() - c.out_sent > kFreeBytes ? c.out.size() : 0;
    if (want > c.out_charge && buffered + (want - c.out_charge) > limits.max_buffered) {
        close(id,
              "its unread reply of " + std::to_string(c.out.size() - c.out_sent) +
                  " bytes would take what the server buffers past its limit of " +
                  mib(limits.max_buffered),
              true);
        return false;
    }
    buffered = buffered - c.out_charge + want;
    c.out_charge = want;
    return true;
}

void Server::Impl::deliver(const Store::Delivery& d) {
    auto it = conns.find(d.conn);
    if (it == conns.end()) return;
    Conn& c = it->second;
    if (!c.unsent()) {
        c.out.clear();
        c.out_sent = 0;
        c.out_since = Clock::now();
    }
    std::string frame = protocol::encode(d.reply);
    c.out += c.to_peer ? c.to_peer->seal(frame) : frame;
    flush(d.conn, c);
    if (conns.count(d.conn) && c.unsent()) charge_output(d.conn, c);
}

void Server::Impl::flush(Store::ConnId id, Conn& c) {
    while (c.unsent()) {
        ssize_t r = send(c.fd.get(), c.out.data() + c.out_sent, c.out.size() - c.out_sent,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (r < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) return;
            if (errno == EINTR) continue;
            return close(id, std::string("send: ") + std::strerror(errno), false);
        }
        c.out_sent += static_cast<size_t>(r);
        c.out_since = Clock::now();
    }
    c.out.clear();
    c.out.shrink_to_fit();  // a large value must not stay allocated per idle connection
    c.out_sent = 0;
    buffered -= c.out_charge;
    c.out_charge = 0;
    if (c.closing) close(id, "refused, and told why", false);
}

void Server::Impl::refuse(Store::ConnId id, Conn& c, ccl_result_t code, const std::string& why) {
    warn("refusing the connection from " + c.peer + ": " + why);
    c.closing = true;
    c.in.clear();  // what it sent is not kept
    c.partial = false;
    deliver({id, protocol::Reply{code, why}});
}

void Server::Impl::close(Store::ConnId id, const std::string& why, bool hostile) {
    auto it = conns.find(id);
    if (it == conns.end()) return;
    Conn& c = it->second;
    if (hostile) {
        warn("closing the connection from " + c.peer + ": " + why);
    } else {
        log().debug("KVS server at {}: dropping the connection from {}: {}", shown, c.peer, why);
    }
    buffered -= c.in_charge + c.out_charge;
    if (c.stage == Stage::member) --members;
    store.drop(id);
    conns.erase(it);
}

void Server::Impl::warn(const std::string& what) {
    if (!log().enabled(LogLevel::warn)) return;
    if (warnings.admit(Clock::now(), what)) log().warn("KVS server at {}: {}", shown, what);
}

void Server::Impl::summarize_warnings(std::optional<WarnLimiter::Summary> s) {
    if (!s) return;
    log().warn(
        "KVS server at {}: {} more connections were closed or refused without a line each "
        "(at most {} lines per {} s); the last: {}",
        shown, s->count, kWarnBurst, kWarnInterval.count(), s->last);
}

}  // namespace ccl::kvs
