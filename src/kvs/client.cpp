// The KVS client: one TCP connection, one request at a time under a mutex. Every wait is a poll()
// against the call's deadline. After a timeout or a broken connection the socket is closed, so a
// late reply can never be read as the answer to a later request; the next call reconnects.
// Every connection starts with the handshake of kvs/protocol.h over the job secret from the
// address: nothing but a fresh nonce is sent before the server proved it knows the secret, and
// every frame after it is sealed with this connection's keys.
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>

#include "base/error.h"
#include "base/log.h"
#include "kvs/kvs.h"
#include "kvs/net.h"
#include "kvs/protocol.h"

namespace ccl::kvs {
namespace {

std::string seconds_text(double s) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%g", s);
    return buf;
}

// Keys are chosen by the library, but keep a message readable whatever they hold.
std::string quoted(const std::string& key) {
    constexpr size_t kShown = 200;
    if (key.size() <= kShown) return "'" + key + "'";
    return "'" + key.substr(0, kShown) + "...' (" + std::to_string(key.size()) + " bytes)";
}

// Why a wait on the socket ended early.
enum class Wait { ready, timeout };

Wait wait_for(int fd, short events, const net::Deadline& deadline) {
    for (;;) {
        pollfd p{fd, events, 0};
        int n = poll(&p, 1, deadline.remaining_ms());
        if (n > 0) return Wait::ready;  // errors and hang-ups surface in the send/recv that follows
        if (n == 0) {
            if (deadline.expired()) return Wait::timeout;
            continue;  // woke a rounding step early
        }
        if (errno != EINTR) throw_errno("KVS client: poll");
    }
}

}  // namespace

struct Client::Impl {
    std::string address;  // with the secret
    std::string shown;    // without it
    sockaddr_in addr{};
    Secret secret{};
    double connect_timeout_s = 0;
    std::mutex mu;
    net::Fd fd;  // invalid after a failure: the next call reconnects
    std::optional<protocol::FrameMac> to_server, from_server;  // this connection's, once proven

    void connect(double timeout_s);
    // Proves the secret both ways on the fresh connection `fd`, before `deadline`.
    void handshake(const net::Deadline& deadline, double timeout_s);
    // Sends `req` and returns the reply. `what` names the call for error messages.
    protocol::Reply call(const protocol::Request& req, double timeout_s, const std::string& what);
    // One frame and its reply on the connected socket, before `deadline`: sealed and opened once
    // the handshake is done; a refusal is thrown.
    protocol::Reply exchange(const std::string& frame, const net::Deadline& deadline,
                             double timeout_s, const std::string& what);
    void disconnect() {
        fd.reset();
        to_server.reset();
        from_server.reset();
    }
};

void Client::Impl::connect(double timeout_s) {
    net::Deadline deadline(timeout_s);
    auto backoff = std::chrono::milliseconds(5);
    int last_err = ETIMEDOUT;
    for (;;) {
        net::Fd s(socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
        if (!s.valid()) throw_errno("KVS client: socket");
        int err = 0;
        if (::connect(s.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
            err = errno;
            if (err == EINPROGRESS || err == EINTR) {
                if (wait_for(s.get(), POLLOUT, deadline) == Wait::timeout) {
                    err = ETIMEDOUT;
                } else {
                    socklen_t len = sizeof(err);
                    if (getsockopt(s.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
                }
            }
        }
        if (err == 0) {
            net::set_nodelay(s.get());
            fd = std::move(s);
            // Within the same deadline: a server that never answers must not hold us longer.
            try {
                handshake(deadline, timeout_s);
            } catch (...) {
                disconnect();  // a refused connection is closed by the server too
                throw;
            }
            return;
        }
        last_err = err;
        if (deadline.expired()) break;
        // The server may not be listening yet: retry, backing off, until the deadline.
        auto left = std::chrono::milliseconds(deadline.remaining_ms());
        std::this_thread::sleep_for(std::min(backoff, left));
        backoff = std::min(backoff * 2, std::chrono::milliseconds(250));
    }
    throw Error(CCL_ERROR_TIMEOUT, "could not connect to the KVS at " + shown + " within " +
                                       seconds_text(timeout_s) + " s: " + std::strerror(last_err));
}

void Client::Impl::handshake(const net::Deadline& deadline, double timeout_s) {
    const Nonce mine = random_nonce();
    protocol::Reply reply = exchange(protocol::encode(protocol::hello_request(mine)), deadline,
                                     timeout_s, "proving the job secret");
    auto challenge = protocol::parse_challenge(reply.payload);
    // Checked before anything else is sent: a process holding the port that does not know the
    // secret has then seen our nonce only.
    Mac expected =
        challenge ? proof_of(Role::server, secret, mine, challenge->server_nonce) : Mac{};
    if (!challenge ||
        !equal_constant_time(challenge->server_proof.data(), expected.data(), expected.size())) {
        disconnect();
        throw Error(CCL_ERROR_INVALID_USAGE,
                    "the KVS at " + shown + (challenge ? " could not prove" : " did not prove") +
                        " that it knows this job's secret: wrong job secret (it serves another "
                        "job: a stale or foreign address, or ranks given different secrets), or "
                        "another process holds that port; nothing was sent to it");
    }
    const Mac proof = proof_of(Role::client, secret, mine, challenge->server_nonce);
    to_server.emplace(frame_key(Role::client, secret, mine, challenge->server_nonce));
    from_server.emplace(frame_key(Role::server, secret, mine, challenge->server_nonce));
    // The proof goes as it is (it is a MAC itself); the answer to it comes sealed.
    exchange(protocol::encode(protocol::proof_request(proof)), deadline, timeout_s,
             "proving the job secret");
}

protocol::Reply Client::Impl::call(const protocol::Request& req, double timeout_s,
                                   const std::string& what) {
    std::string frame = protocol::encode(req);  // size errors before touching the connection
    std::lock_guard lock(mu);
    net::Deadline deadline(timeout_s);
    if (!fd.valid()) connect(std::min(timeout_s, connect_timeout_s));
    return exchange(to_server->seal(frame), deadline, timeout_s, what);
}

protocol::Reply Client::Impl::exchange(const std::string& frame, const net::Deadline& deadline,
                                       double timeout_s, const std::string& what) {
    auto timed_out = [&] {
        disconnect();
        return Error(CCL_ERROR_TIMEOUT, "timed out after " + seconds_text(timeout_s) + " s " +
                                            what + " at the KVS at " + shown);
    };
    auto lost = [&](const std::string& why) {
        disconnect();
        return Error(CCL_ERROR_PEER_FAILURE,
                     "lost the connection to the KVS at " + shown + " " + what + ": " + why);
    };

    for (size_t sent = 0; sent < frame.size();) {
        ssize_t r = send(fd.get(), frame.data() + sent, frame.size() - sent, MSG_NOSIGNAL);
        if (r >= 0) {
            sent += static_cast<size_t>(r);
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            if (wait_for(fd.get(), POLLOUT, deadline) == Wait::timeout) throw timed_out();
        } else if (errno != EINTR) {
            throw lost(std::strerror(errno));
        }
    }

    auto recv_exact = [&](char* dst, size_t n) {
        for (size_t got = 0; got < n;) {
            ssize_t r = recv(fd.get(), dst + got, n - got, 0);
            if (r > 0) {
                got += static_cast<size_t>(r);
            } else if (r == 0) {
                throw lost("the server closed it");
            } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
                if (wait_for(fd.get(), POLLIN, deadline) == Wait::timeout) throw timed_out();
            } else if (errno != EINTR) {
                throw lost(std::strerror(errno));
            }
        }
    };
    char header[protocol::kHeaderSize];
    recv_exact(header, sizeof(header));
    protocol::Reply reply;
    try {
        std::string body(protocol::body_length(header), '\0');
        recv_exact(body.data(), body.size());
        std::string_view message = body;
        if (from_server) {
            auto opened = from_server->open(body);
            if (!opened) throw lost("a reply failed its authentication");
            message = *opened;
        }
        reply = protocol::decode_reply(message);
    } catch (const protocol::ProtocolError& e) {
        throw lost(std::string("malformed reply: ") + e.what());
    }
    if (reply.status != CCL_SUCCESS) {
        throw Error(reply.status,
                    "the KVS at " + shown + " refused " + what + ": " + reply.payload);
    }
    return reply;
}

Client::Client(const std::string& address, double connect_timeout_s)
    : impl_(std::make_unique<Impl>()) {
    KvsAddress parsed = parse_kvs_address(address);
    impl_->address = address;
    impl_->shown = parsed.shown;
    impl_->addr = parsed.addr;
    impl_->secret = parsed.secret;
    impl_->connect_timeout_s = connect_timeout_s;
    impl_->connect(connect_timeout_s);
}

Client::~Client() = default;

const std::string& Client::address() const { return impl_->address; }

const std::string& Client::shown_address() const { return impl_->shown; }

void Client::put(const std::string& key, const std::string& value) {
    // put has no timeout of its own: the server answers at once, so the connect timeout bounds it.
    impl_->call({protocol::Op::put, key, value, 0}, impl_->connect_timeout_s,
                "putting key " + quoted(key));
}

std::string Client::get(const std::string& key, double timeout_s) {
    return impl_->call({protocol::Op::get, key, {}, 0}, timeout_s, "waiting for key " + quoted(key))
        .payload;
}

void Client::barrier(const std::string& name, int nranks, double timeout_s) {
    if (nranks < 1) {
        throw Error(CCL_ERROR_INVALID_ARGUMENT, "KVS barrier " + quoted(name) +
                                                    ": nranks must be at least 1, not " +
                                                    std::to_string(nranks));
    }
    impl_->call({protocol::Op::barrier, name, {}, static_cast<uint32_t>(nranks)}, timeout_s,
                "in barrier " + quoted(name) + " of " + std::to_string(nranks) + " ranks");
}

}  // namespace ccl::kvs
