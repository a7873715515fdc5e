// The KVS server and client over real sockets on loopback: results, timeouts, reconnects and
// hostile peers (strangers, replays, squatters, floods). Timeouts are short so the whole file runs
// in a few seconds.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <future>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "base/error.h"
#include "base/hex.h"
#include "base/log.h"
#include "kvs/kvs.h"
#include "kvs/net.h"
#include "kvs/protocol.h"
#include "kvs/secret.h"
#include "kvs/store.h"
#include "kvs/warn_limit.h"

namespace ccl::kvs {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
}

// Runs `f` and returns the ccl::Error it throws (fails the test when it throws nothing).
template <typename F>
std::optional<Error> error_of(F&& f) {
    try {
        f();
    } catch (const Error& e) {
        return e;
    }
    ADD_FAILURE() << "expected a ccl::Error";
    return std::nullopt;
}

// A raw TCP connection to the server, for sending what a real client never would.
net::Fd raw_connect(const std::string& address) {
    sockaddr_in addr = parse_kvs_address(address).addr;
    net::Fd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    EXPECT_TRUE(fd.valid());
    EXPECT_EQ(connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    return fd;
}

void raw_send(int fd, const std::string& bytes) {
    ASSERT_EQ(send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), ssize_t(bytes.size()));
}

std::string be32(uint32_t v) { return {char(v >> 24), char(v >> 16), char(v >> 8), char(v)}; }

class Kvs : public ::testing::Test {
protected:
    Server server{"lo"};  // loopback: works in any container
    Client client{server.address(), 2.0};
};

TEST_F(Kvs, PutGet) {
    client.put("a", "1");
    client.put("empty", "");
    EXPECT_EQ(client.get("a", 1.0), "1");
    EXPECT_EQ(client.get("empty", 1.0), "");
    std::string binary("x\0y\xff", 4);
    client.put(binary, binary);
    EXPECT_EQ(client.get(binary, 1.0), binary);
}

TEST_F(Kvs, AddressIsLoopbackWithPort) {
    EXPECT_EQ(server.address().rfind("127.0.0.1:", 0), 0u) << server.address();
    EXPECT_EQ(client.address(), server.address());
    // host:port, then the job secret: 32 hex digits.
    size_t slash = server.address().find('/');
    ASSERT_NE(slash, std::string::npos) << server.address();
    EXPECT_TRUE(parse_secret_hex(server.address().substr(slash + 1))) << server.address();
    EXPECT_EQ(client.shown_address(), server.address().substr(0, slash));
    EXPECT_LE(server.address().size() + 1, size_t(CCL_KVS_ADDRESS_MAX));
    // Every server draws its own.
    Server other("lo");
    EXPECT_NE(other.address().substr(other.address().find('/')), server.address().substr(slash));
}

TEST_F(Kvs, GetBlocksUntilPut) {
    auto start = Clock::now();
    std::thread writer([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        Client other(server.address(), 2.0);
        other.put("late", "value");
    });
    EXPECT_EQ(client.get("late", 5.0), "value");
    EXPECT_GE(seconds_since(start), 0.09);
    writer.join();
}

TEST_F(Kvs, GetTimesOutThenClientStillWorks) {
    auto start = Clock::now();
    auto e = error_of([&] { client.get("never", 0.2); });
    ASSERT_TRUE(e);
    EXPECT_EQ(e->code(), CCL_ERROR_TIMEOUT);
    EXPECT_NE(std::string(e->what()).find("'never'"), std::string::npos) << e->what();
    EXPECT_NE(std::string(e->what()).find(shown_address(server.address())), std::string::npos)
        << e->what();
    // The secret never appears in messages (they end up in logs).
    EXPECT_EQ(std::string(e->what()).find(server.address().substr(server.address().find('/') + 1)),
              std::string::npos)
        << e->what();
    double took = seconds_since(start);
    EXPECT_GE(took, 0.19);
    EXPECT_LT(took, 3.0);  // generous: CI runs tests on busy cores
    // A put of the awaited key now must not be mistaken for the answer to the next request.
    client.put("never", "now");
    client.put("k", "v");
    EXPECT_EQ(client.get("k", 1.0), "v");
    EXPECT_EQ(client.get("never", 1.0), "now");
}

TEST_F(Kvs, Overwrite) {
    client.put("k", "first");
    client.put("k", "second");
    EXPECT_EQ(client.get("k", 1.0), "second");
}

TEST_F(Kvs, BarrierReleasesAllTogether) {
    constexpr int kRanks = 6;
    std::atomic<int> entered{0};
    std::vector<std::future<int>> done;
    for (int r = 0; r < kRanks; ++r) {
        done.push_back(std::async(std::launch::async, [&, r] {
            Client c(server.address(), 2.0);
            if (r == kRanks - 1) std::this_thread::sleep_for(std::chrono::milliseconds(100));
            entered++;
            c.barrier("b", kRanks, 5.0);
            return entered.load();  // everyone has entered by the time anyone leaves
        }));
    }
    for (auto& f : done) EXPECT_EQ(f.get(), kRanks);
    // Each name is used once: another arrival is refused, as is a wrong size.
    auto e = error_of([&] { client.barrier("b", kRanks, 1.0); });
    ASSERT_TRUE(e);
    EXPECT_EQ(e->code(), CCL_ERROR_INVALID_USAGE);
}

TEST_F(Kvs, BarrierSizeMismatchIsRefused) {
    std::thread first([&] {
        Client c(server.address(), 2.0);
        c.barrier("m", 2, 5.0);
    });
    // Let the first arrival fix the size at 2.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    auto e = error_of([&] { client.barrier("m", 3, 1.0); });
    ASSERT_TRUE(e);
    EXPECT_EQ(e->code(), CCL_ERROR_INVALID_USAGE);
    EXPECT_NE(std::string(e->what()).find("nranks 3"), std::string::npos) << e->what();
    client.barrier("m", 2, 5.0);
    first.join();
    EXPECT_EQ(error_of([&] { client.barrier("x", 0, 1.0); })->code(), CCL_ERROR_INVALID_ARGUMENT);
}

TEST_F(Kvs, BarrierTimeoutThenRetry) {
    auto e = error_of([&] { client.barrier("t", 2, 0.2); });
    ASSERT_TRUE(e);
    EXPECT_EQ(e->code(), CCL_ERROR_TIMEOUT);
    EXPECT_NE(std::string(e->what()).find("barrier 't'"), std::string::npos) << e->what();
    // The timed-out arrival was taken back when its connection closed: two fresh ones complete.
    std::thread other([&] {
        Client c(server.address(), 2.0);
        c.barrier("t", 2, 5.0);
    });
    client.barrier("t", 2, 5.0);
    other.join();
}

TEST_F(Kvs, ManyKeys) {
    constexpr int kKeys = 2000;
    for (int i = 0; i < kKeys; ++i) client.put("key" + std::to_string(i), std::to_string(i * 7));
    Client reader(server.address(), 2.0);
    for (int i = 0; i < kKeys; ++i) {
        ASSERT_EQ(reader.get("key" + std::to_string(i), 1.0), std::to_string(i * 7));
    }
}

TEST_F(Kvs, LargeValue) {
    std::string big(512 << 10, '\0');
    for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 131 + 7);
    client.put("big", big);
    Client reader(server.address(), 2.0);
    EXPECT_EQ(reader.get("big", 2.0), big);
    // Over the frame limit: refused locally, before anything is sent.
    std::string huge(protocol::kMaxFrame, 'x');
    EXPECT_EQ(error_of([&] { client.put("huge", huge); })->code(), CCL_ERROR_INVALID_ARGUMENT);
    std::string long_key(protocol::kMaxKey + 1, 'k');
    EXPECT_EQ(error_of([&] { client.put(long_key, "v"); })->code(), CCL_ERROR_INVALID_ARGUMENT);
    client.put("after", "ok");
    EXPECT_EQ(client.get("after", 1.0), "ok");
}

TEST(KvsClient, ConnectTimeoutToClosedPort) {
    // Reserve a port, then close it: nothing listens there.
    std::string address;
    {
        net::Fd s(socket(AF_INET, SOCK_STREAM, 0));
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        ASSERT_EQ(bind(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
        socklen_t len = sizeof(a);
        ASSERT_EQ(getsockname(s.get(), reinterpret_cast<sockaddr*>(&a), &len), 0);
        address = format_kvs_address(a, random_secret());
    }
    auto start = Clock::now();
    auto e = error_of([&] { Client c(address, 0.3); });
    ASSERT_TRUE(e);
    EXPECT_EQ(e->code(), CCL_ERROR_TIMEOUT);
    std::string what = e->what();
    EXPECT_NE(
        what.find("could not connect to the KVS at " + shown_address(address) + " within 0.3 s"),
        std::string::npos)
        << what;
    EXPECT_NE(what.find("refused"), std::string::npos) << what;
    double took = seconds_since(start);
    EXPECT_GE(took, 0.29);
    EXPECT_LT(took, 3.0);
}

TEST(KvsClient, MalformedAddress) {
    // Host and port are checked before the secret: these fail for those.
    for (const char* bad : {"", "127.0.0.1", "127.0.0.1:", "127.0.0.1:0", "127.0.0.1:65536",
                            "localhost:80", "1.2.3:80", "127.0.0.1:80x", ":80", "127.0.0.1:-1"}) {
        auto e = error_of([&] { Client c(bad, 0.1); });
        ASSERT_TRUE(e) << bad;
        EXPECT_EQ(e->code(), CCL_ERROR_INVALID_ARGUMENT) << bad;
        EXPECT_NE(std::string(e->what()).find("'" + std::string(bad) + "'"), std::string::npos)
            << e->what();
    }
}

TEST(KvsServer, UnknownInterface) {
    auto e = error_of([&] { Server s("no-such-if0"); });
    ASSERT_TRUE(e);
    EXPECT_EQ(e->code(), CCL_ERROR_INVALID_ARGUMENT);
    std::string what = e->what();
    EXPECT_NE(what.find("'no-such-if0'"), std::string::npos) << what;
    EXPECT_NE(what.find("lo"), std::string::npos) << what;  // the available ones are listed
}

TEST(KvsServer, DefaultInterfaceIsReachable) {
    Server s;
    Client c(s.address(), 2.0);
    c.put("k", "v");
    EXPECT_EQ(c.get("k", 1.0), "v");
}

std::string frame_of(const std::string& body) { return be32(uint32_t(body.size())) + body; }

// Reads exactly n bytes from a socket within `timeout_ms`; false on EOF, error or timeout.
bool read_exact(int fd, char* dst, size_t n, int timeout_ms) {
    auto start = Clock::now();
    for (size_t got = 0; got < n;) {
        int left = timeout_ms - int(seconds_since(start) * 1000);
        if (left <= 0) return false;
        pollfd p{fd, POLLIN, 0};
        if (poll(&p, 1, std::min(left, 50)) <= 0) continue;
        ssize_t r = recv(fd, dst + got, n - got, MSG_DONTWAIT);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) return false;
        if (r > 0) got += size_t(r);
    }
    return true;
}

// One whole frame's body from a socket within `timeout_ms`; nullopt on EOF or timeout.
std::optional<std::string> read_body(int fd, int timeout_ms) {
    char header[protocol::kHeaderSize];
    if (!read_exact(fd, header, sizeof(header), timeout_ms)) return std::nullopt;
    std::string body(protocol::body_length(header), '\0');
    if (!read_exact(fd, body.data(), body.size(), timeout_ms)) return std::nullopt;
    return body;
}

// One plain (unsealed) reply: what a stranger can be sent.
std::optional<protocol::Reply> read_reply(int fd, int timeout_ms) {
    auto body = read_body(fd, timeout_ms);
    if (!body) return std::nullopt;
    return protocol::decode_reply(*body);
}

constexpr size_t kHelloFrame() { return protocol::kHeaderSize + protocol::kHelloBody; }

std::string hello_frame() { return protocol::encode(protocol::hello_request(random_nonce())); }

// A connection that completed the handshake by hand, to send what a real client never would.
struct RawMember {
    net::Fd fd;
    std::optional<protocol::FrameMac> to_server, from_server;

    std::string seal(const std::string& frame) { return to_server->seal(frame); }
    void send(const protocol::Request& req) { raw_send(fd.get(), seal(protocol::encode(req))); }
    std::optional<protocol::Reply> reply(int timeout_ms) {
        auto body = read_body(fd.get(), timeout_ms);
        if (!body) return std::nullopt;
        auto message = from_server->open(*body);
        EXPECT_TRUE(message) << "a reply that fails its MAC";
        if (!message) return std::nullopt;
        return protocol::decode_reply(*message);
    }
};

// The handshake of kvs/protocol.h by hand; `proof` replaces the right proof when given.
RawMember raw_member(const std::string& address) {
    KvsAddress a = parse_kvs_address(address);
    RawMember m;
    m.fd = raw_connect(address);
    Nonce mine = random_nonce();
    raw_send(m.fd.get(), protocol::encode(protocol::hello_request(mine)));
    auto challenge_reply = read_reply(m.fd.get(), 5000);
    EXPECT_TRUE(challenge_reply && challenge_reply->status == CCL_SUCCESS);
    if (!challenge_reply) return m;
    auto ch = protocol::parse_challenge(challenge_reply->payload);
    EXPECT_TRUE(ch);
    if (!ch) return m;
    EXPECT_EQ(ch->server_proof, proof_of(Role::server, a.secret, mine, ch->server_nonce));
    raw_send(m.fd.get(), protocol::encode(protocol::proof_request(
                             proof_of(Role::client, a.secret, mine, ch->server_nonce))));
    m.to_server.emplace(frame_key(Role::client, a.secret, mine, ch->server_nonce));
    m.from_server.emplace(frame_key(Role::server, a.secret, mine, ch->server_nonce));
    auto ok = m.reply(5000);
    EXPECT_TRUE(ok && ok->status == CCL_SUCCESS) << (ok ? ok->payload : "no answer");
    return m;
}

// True when the server closed `fd` within `timeout_ms` without sending a single byte.
bool closed_without_answer(int fd, int timeout_ms) {
    auto start = Clock::now();
    while (seconds_since(start) * 1000 < timeout_ms) {
        pollfd p{fd, POLLIN, 0};
        if (poll(&p, 1, 50) > 0) {
            char c;
            ssize_t r = recv(fd, &c, 1, MSG_DONTWAIT);
            if (r > 0) return false;  // it answered something
            if (r == 0 || errno != EAGAIN) return true;
        }
    }
    return false;
}

// True when the server closed `fd` within `timeout_ms`, whatever it sent before.
bool closed_within(int fd, int timeout_ms) {
    auto start = Clock::now();
    while (seconds_since(start) * 1000 < timeout_ms) {
        pollfd p{fd, POLLIN, 0};
        if (poll(&p, 1, 50) > 0) {
            char buf[4096];
            ssize_t r = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
            if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) return true;
        }
    }
    return false;
}

bool contains(const std::string& haystack, const Secret& s) {
    return haystack.find(std::string(reinterpret_cast<const char*>(s.data()), s.size())) !=
               std::string::npos ||
           haystack.find(secret_hex(s)) != std::string::npos;
}

TEST_F(Kvs, HostileInputClosesOnlyTheOffender) {
    // Frames, which a member sends sealed (its decoder is then what refuses them), and bare
    // headers, which fail before any MAC is looked at.
    struct Attack {
        std::string bytes;
        bool frame;
    };
    std::vector<Attack> attacks = {
        {be32(0xffffffffu), false},                                 // oversized length
        {be32(uint32_t(protocol::kMaxFrame + 1)) + "xx", false},    // just over the cap
        {frame_of(""), true},                                       // empty body: no opcode
        {frame_of("\x09"), true},                                   // unknown opcode
        {frame_of(std::string("\x02") + be32(100) + "abc"), true},  // string past the frame
        {frame_of(std::string("\x02") + be32(1) + "a" + "trailing"), true},
        {frame_of(std::string("\x02") + be32(uint32_t(protocol::kMaxKey + 1)) +
                  std::string(protocol::kMaxKey + 1, 'k')),
         true},                                                            // key over 4 KiB
        {frame_of(std::string("\x03") + be32(1) + "b" + be32(0)), true},   // barrier of 0 ranks
        {frame_of(std::string("\x04") + be32(protocol::kVersion)), true},  // truncated hello
        {frame_of(std::string("\x05") + "short"), true},                   // truncated proof
        {hello_frame(), true},  // a hello: for a member, a second one
    };
    // A stalled half frame and a half-sent header stay open but must not block anybody.
    RawMember stalled = raw_member(server.address());
    raw_send(stalled.fd.get(), be32(100) + "only part");
    RawMember stalled_header = raw_member(server.address());
    raw_send(stalled_header.fd.get(), std::string("\0\0", 2));

    for (bool member : {false, true}) {
        for (const auto& attack : attacks) {
            if (!member && attack.bytes == attacks.back().bytes) continue;  // a first hello is fine
            RawMember m;
            if (member) {
                m = raw_member(server.address());
            } else {
                m.fd = raw_connect(server.address());
            }
            raw_send(m.fd.get(), member && attack.frame ? m.seal(attack.bytes) : attack.bytes);
            // Strangers get no answer at all; members get none to a malformed message.
            EXPECT_TRUE(closed_without_answer(m.fd.get(), 1000))
                << "attack of " << attack.bytes.size() << " bytes, member " << member;
            client.put("alive", "yes");
            EXPECT_EQ(client.get("alive", 1.0), "yes");
        }
    }
    // A member's unsealed request, or one with a flipped bit, is not taken either.
    for (bool flip : {false, true}) {
        RawMember m = raw_member(server.address());
        std::string put = protocol::encode({protocol::Op::put, "alive", "forged", 0});
        std::string bytes = flip ? m.seal(put) : put;
        if (flip) bytes[6] ^= 0x20;
        raw_send(m.fd.get(), bytes);
        EXPECT_TRUE(closed_without_answer(m.fd.get(), 1000)) << "flip " << flip;
        EXPECT_EQ(client.get("alive", 1.0), "yes");
    }
    // A connection that vanishes while parked is forgotten; the key's later put still works.
    {
        RawMember parked = raw_member(server.address());
        parked.send({protocol::Op::get, "parked", {}, 0});
    }
    client.put("parked", "p");
    EXPECT_EQ(client.get("parked", 1.0), "p");
    // Garbage from many connections at once.
    std::vector<net::Fd> many;
    for (int i = 0; i < 20; ++i) {
        many.push_back(raw_connect(server.address()));
        raw_send(many.back().get(), std::string(64, char(i * 37)));
    }
    EXPECT_EQ(client.get("alive", 1.0), "yes");
}

// A stranger's valid request (no hello first) is not answered: it cannot read or write keys.
TEST_F(Kvs, StrangerGetsNoAnswer) {
    client.put("private", "value");
    for (const auto& req : {protocol::encode({protocol::Op::get, "private", {}, 0}),
                            protocol::encode({protocol::Op::put, "private", "evil", 0}),
                            protocol::encode({protocol::Op::barrier, "b", {}, 1})}) {
        net::Fd fd = raw_connect(server.address());
        raw_send(fd.get(), req);
        EXPECT_TRUE(closed_without_answer(fd.get(), 2000));
    }
    EXPECT_EQ(client.get("private", 1.0), "value");
}

TEST_F(Kvs, WrongSecretIsRefused) {
    KvsAddress a = parse_kvs_address(server.address());
    Secret wrong = a.secret;
    wrong[15] ^= 0x01;  // differs in the last bit only
    std::string wrong_address = format_kvs_address(a.addr, wrong);
    // The client finds out first: the server's proof does not check out under its secret.
    auto e = error_of([&] { Client c(wrong_address, 2.0); });
    ASSERT_TRUE(e);
    EXPECT_EQ(e->code(), CCL_ERROR_INVALID_USAGE);
    std::string what = e->what();
    EXPECT_NE(what.find("wrong job secret"), std::string::npos) << what;
    EXPECT_NE(what.find(a.shown), std::string::npos) << what;
    EXPECT_EQ(what.find(secret_hex(a.secret)), std::string::npos) << what;  // never shown
    EXPECT_EQ(what.find(secret_hex(wrong)), std::string::npos) << what;
    // A proof made with another secret gets one refusal (sealed: the connection's keys are the
    // server's), and the request after it nothing.
    RawMember m;
    m.fd = raw_connect(server.address());
    Nonce mine = random_nonce();
    raw_send(m.fd.get(), protocol::encode(protocol::hello_request(mine)));
    auto reply = read_reply(m.fd.get(), 2000);
    ASSERT_TRUE(reply);
    auto ch = protocol::parse_challenge(reply->payload);
    ASSERT_TRUE(ch);
    EXPECT_NE(ch->server_proof, proof_of(Role::server, wrong, mine, ch->server_nonce));
    raw_send(m.fd.get(), protocol::encode(protocol::proof_request(
                             proof_of(Role::client, wrong, mine, ch->server_nonce))) +
                             protocol::encode({protocol::Op::get, "alive", {}, 0}));
    m.from_server.emplace(frame_key(Role::server, a.secret, mine, ch->server_nonce));
    reply = m.reply(2000);
    ASSERT_TRUE(reply);
    EXPECT_EQ(reply->status, CCL_ERROR_INVALID_USAGE);
    EXPECT_NE(reply->payload.find("wrong proof"), std::string::npos) << reply->payload;
    EXPECT_TRUE(closed_without_answer(m.fd.get(), 2000));  // the get after it got nothing
    // A hello of another protocol version is refused saying so.
    auto other_version = protocol::hello_request(random_nonce());
    other_version.version = protocol::kVersion + 1;
    net::Fd fd2 = raw_connect(server.address());
    raw_send(fd2.get(), protocol::encode(other_version));
    reply = read_reply(fd2.get(), 2000);
    ASSERT_TRUE(reply);
    EXPECT_EQ(reply->status, CCL_ERROR_INVALID_USAGE);
    EXPECT_NE(reply->payload.find("version"), std::string::npos) << reply->payload;
    // The job's own clients go on.
    client.put("still", "served");
    Client another(server.address(), 2.0);
    EXPECT_EQ(another.get("still", 1.0), "served");
}

// A peer of protocol version 1 sent its secret in its hello: u8 4, u32 1, the 16 secret bytes.
// It is told which versions meet, and nothing it sends is taken.
TEST_F(Kvs, OldProtocolHelloIsRefusedSayingSo) {
    KvsAddress a = parse_kvs_address(server.address());
    std::string v1_hello =
        frame_of(std::string("\x04") + be32(1) +
                 std::string(reinterpret_cast<const char*>(a.secret.data()), a.secret.size()));
    client.put("k", "kept");
    net::Fd fd = raw_connect(server.address());
    raw_send(fd.get(), v1_hello + frame_of(std::string("\x01") + be32(1) + "k" + be32(4) + "lost"));
    auto reply = read_reply(fd.get(), 2000);
    ASSERT_TRUE(reply);
    EXPECT_EQ(reply->status, CCL_ERROR_INVALID_USAGE);
    EXPECT_NE(reply->payload.find("version 1, this server version 2"), std::string::npos)
        << reply->payload;
    EXPECT_TRUE(closed_without_answer(fd.get(), 2000));
    EXPECT_EQ(client.get("k", 1.0), "kept");
}

TEST_F(Kvs, AddressWithoutSecretIsRefused) {
    std::string shown = shown_address(server.address());
    for (const std::string& bad :
         {shown, shown + "/", shown + "/1234", shown + "/" + std::string(32, 'g'),
          shown + "/" + std::string(33, 'a')}) {
        auto e = error_of([&] { Client c(bad, 0.5); });
        ASSERT_TRUE(e) << bad;
        EXPECT_EQ(e->code(), CCL_ERROR_INVALID_ARGUMENT) << bad;
        EXPECT_NE(std::string(e->what()).find("secret"), std::string::npos) << e->what();
    }
}

TEST_F(Kvs, UnfinishedHandshakeIsClosedAfterTheDeadline) {
    // A hello cut short, and a whole hello never followed by the proof.
    std::string hello = hello_frame();
    net::Fd cut = raw_connect(server.address());
    raw_send(cut.get(), hello.substr(0, hello.size() - 3));
    net::Fd no_proof = raw_connect(server.address());
    raw_send(no_proof.get(), hello);
    auto start = Clock::now();
    auto challenge = read_reply(no_proof.get(), 2000);
    ASSERT_TRUE(challenge);
    EXPECT_TRUE(protocol::parse_challenge(challenge->payload));
    // Meanwhile the job is served.
    client.put("k", "v");
    Client other(server.address(), 2.0);
    EXPECT_EQ(other.get("k", 1.0), "v");
    EXPECT_TRUE(closed_without_answer(cut.get(), 10'000));
    EXPECT_TRUE(closed_without_answer(no_proof.get(), 10'000));
    double took = seconds_since(start);
    EXPECT_GE(took, 4.0);  // the handshake deadline is 5 s
    EXPECT_LT(took, 9.0);
    // Sending the rest now is too late: the connection is gone.
}

TEST_F(Kvs, StrangerFloodDoesNotLockOutTheJob) {
    // More idle strangers than the server keeps waiting: the oldest are closed, and a rank of the
    // job connecting afterwards still gets in at once.
    std::vector<net::Fd> strangers;
    for (int i = 0; i < 300; ++i) strangers.push_back(raw_connect(server.address()));
    auto start = Clock::now();
    Client late(server.address(), 3.0);
    late.put("late", "in");
    EXPECT_EQ(client.get("late", 1.0), "in");
    EXPECT_LT(seconds_since(start), 2.0);
    EXPECT_TRUE(closed_without_answer(strangers.front().get(), 2000));
}

// Random bytes at a live server: many connections, random lengths and content, valid prefixes
// followed by garbage, mutated valid messages. The server must neither crash nor hang, and the
// job's client must be served after every round with its data intact.
TEST(KvsServer, RandomBytesFromManyConnections) {
    Server server("lo");
    Client client(server.address(), 5.0);
    client.put("before", "kept");
    uint64_t seed = std::random_device{}();
    SCOPED_TRACE("seed " + std::to_string(seed));  // to replay a failure
    std::mt19937_64 rng(seed);
    auto below = [&](size_t n) { return n ? size_t(rng() % n) : 0; };
    auto random_bytes = [&](size_t n) {
        std::string b(n, '\0');
        for (auto& c : b) c = char(rng());
        return b;
    };
    auto random_length = [&] { return below(2) ? below(64) : below(size_t(1) << (4 + below(14))); };
    const std::string hello = hello_frame();
    const std::string valid = hello + protocol::encode({protocol::Op::put, "k", "v", 0}) +
                              protocol::encode({protocol::Op::get, "before", {}, 0}) +
                              protocol::encode({protocol::Op::barrier, "b", {}, 3});
    constexpr int kRounds = 10, kPerRound = 40;
    for (int round = 0; round < kRounds; ++round) {
        std::vector<net::Fd> fds;
        for (int i = 0; i < kPerRound; ++i) {
            std::string bytes;
            switch (below(6)) {
                case 0: bytes = random_bytes(random_length()); break;
                case 1: bytes = hello + random_bytes(random_length()); break;
                case 2:
                    bytes = valid.substr(0, below(valid.size())) + random_bytes(random_length());
                    break;
                case 3:  // a plausible header, then a random body of any length
                    bytes = be32(uint32_t(below(2) ? below(64) : rng())) +
                            random_bytes(random_length());
                    break;
                case 4: bytes = valid.substr(0, below(valid.size() + 1)); break;
                default:  // valid messages with a few bytes flipped
                    bytes = valid;
                    for (size_t f = 0, n = 1 + below(4); f < n; ++f)
                        bytes[below(bytes.size())] ^= char(1 + below(255));
            }
            net::Fd fd = raw_connect(server.address());
            // The server may close early: send what it takes, never block, ignore errors.
            for (size_t sent = 0; sent < bytes.size();) {
                ssize_t r = send(fd.get(), bytes.data() + sent, bytes.size() - sent,
                                 MSG_NOSIGNAL | MSG_DONTWAIT);
                if (r <= 0) break;
                sent += size_t(r);
            }
            if (below(3) == 0) shutdown(fd.get(), SHUT_WR);
            if (below(2)) fds.push_back(std::move(fd));  // else closed at once
        }
        auto start = Clock::now();
        client.put("round", std::to_string(round));
        Client fresh(server.address(), 5.0);
        EXPECT_EQ(fresh.get("round", 2.0), std::to_string(round));
        EXPECT_EQ(fresh.get("before", 2.0), "kept");
        EXPECT_LT(seconds_since(start), 3.0) << "round " << round;
    }
}

TEST(KvsSecret, ConstantTimeCompare) {
    Secret a = random_secret(), b = a;
    EXPECT_TRUE(equal_constant_time(a.data(), b.data(), a.size()));
    EXPECT_TRUE(equal_constant_time(a.data(), b.data(), 0));
    for (size_t i = 0; i < a.size(); ++i) {
        for (uint8_t bit = 1; bit; bit = uint8_t(bit << 1)) {
            b = a;
            b[i] ^= bit;
            EXPECT_FALSE(equal_constant_time(a.data(), b.data(), a.size())) << i << " " << int(bit);
            // Only the first n bytes count.
            EXPECT_EQ(equal_constant_time(a.data(), b.data(), i), true);
        }
    }
}

TEST(KvsSecret, HexAndDerive) {
    Secret s = random_secret();
    EXPECT_NE(s, random_secret());
    auto back = parse_secret_hex(secret_hex(s));
    ASSERT_TRUE(back);
    EXPECT_EQ(*back, s);
    EXPECT_EQ(secret_hex(*parse_secret_hex("00112233445566778899AABBCCDDEEFF")),
              "00112233445566778899aabbccddeeff");
    for (const char* bad : {"", "0011", "00112233445566778899aabbccddeeffaa",
                            "00112233445566778899aabbccddeefg", "00112233445566778899aabbccddee f"})
        EXPECT_FALSE(parse_secret_hex(bad)) << bad;
    EXPECT_EQ(derive_secret("run-1"), derive_secret("run-1"));
    EXPECT_NE(derive_secret("run-1"), derive_secret("run-2"));
    EXPECT_EQ(shown_address("1.2.3.4:5/abc"), "1.2.3.4:5");
}

TEST(KvsStore, LimitsRefuseWhatWouldPassThem) {
    Store store(3, 100);
    auto put = [&](const std::string& k, const std::string& v) {
        auto out = store.handle(1, {protocol::Op::put, k, v, 0});
        return out.at(0).reply.status;
    };
    EXPECT_EQ(put("a", "1"), CCL_SUCCESS);
    EXPECT_EQ(put("b", "2"), CCL_SUCCESS);
    EXPECT_EQ(put("a", std::string(50, 'x')), CCL_SUCCESS);              // overwrite: no new entry
    EXPECT_EQ(put("c", std::string(60, 'x')), CCL_ERROR_OUT_OF_MEMORY);  // bytes
    EXPECT_EQ(put("c", "3"), CCL_SUCCESS);
    EXPECT_EQ(put("d", "4"), CCL_ERROR_OUT_OF_MEMORY);  // entries
    auto barrier = store.handle(2, {protocol::Op::barrier, "bar", {}, 2});
    ASSERT_EQ(barrier.size(), 1u);
    EXPECT_EQ(barrier[0].reply.status, CCL_ERROR_OUT_OF_MEMORY);
    EXPECT_NE(barrier[0].reply.payload.find("KVS is full"), std::string::npos);
    EXPECT_EQ(put("a", "short"), CCL_SUCCESS);  // shrinking frees bytes
    EXPECT_EQ(put("b", std::string(40, 'y')), CCL_SUCCESS);
}

TEST(KvsServer, DestroyedWhileClientWaits) {
    auto server = std::make_unique<Server>("lo");
    Client client(server->address(), 2.0);
    auto start = Clock::now();
    auto waiting =
        std::async(std::launch::async, [&] { return error_of([&] { client.get("k", 10.0); }); });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    server.reset();
    auto e = waiting.get();
    EXPECT_LT(seconds_since(start), 4.0);
    ASSERT_TRUE(e);
    EXPECT_EQ(e->code(), CCL_ERROR_PEER_FAILURE);
    EXPECT_NE(std::string(e->what()).find("lost the connection to the KVS at"), std::string::npos)
        << e->what();
    // The server is gone for good: a later call fails quickly with a timeout, no hang.
    auto again = error_of([&] { client.get("k", 0.2); });
    ASSERT_TRUE(again);
    EXPECT_EQ(again->code(), CCL_ERROR_TIMEOUT);
}

TEST(KvsProtocol, RoundTrip) {
    protocol::Request req{protocol::Op::barrier, "name", {}, 7};
    std::string f = protocol::encode(req);
    ASSERT_EQ(protocol::body_length(f.data()), f.size() - protocol::kHeaderSize);
    auto back = protocol::decode_request(std::string_view(f).substr(protocol::kHeaderSize));
    EXPECT_EQ(back.op, protocol::Op::barrier);
    EXPECT_EQ(back.key, "name");
    EXPECT_EQ(back.nranks, 7u);
    protocol::Reply reply{CCL_ERROR_INVALID_USAGE, "why"};
    f = protocol::encode(reply);
    auto r = protocol::decode_reply(std::string_view(f).substr(protocol::kHeaderSize));
    EXPECT_EQ(r.status, CCL_ERROR_INVALID_USAGE);
    EXPECT_EQ(r.payload, "why");
    // Every truncation of a valid message is rejected, never read past its end.
    std::string body = protocol::encode({protocol::Op::put, "key", "value", 0}).substr(4);
    for (size_t n = 0; n < body.size(); ++n) {
        EXPECT_THROW(protocol::decode_request(std::string_view(body).substr(0, n)),
                     protocol::ProtocolError);
    }
}

TEST(KvsProtocol, HandshakeMessages) {
    Nonce n = random_nonce();
    std::string f = protocol::encode(protocol::hello_request(n));
    ASSERT_EQ(f.size(), protocol::kHeaderSize + protocol::kHelloBody);
    auto hello = protocol::decode_request(std::string_view(f).substr(protocol::kHeaderSize));
    EXPECT_EQ(hello.op, protocol::Op::hello);
    EXPECT_EQ(hello.version, protocol::kVersion);
    EXPECT_EQ(hello.nonce, n);
    EXPECT_EQ(protocol::hello_version(std::string_view(f).substr(protocol::kHeaderSize)),
              protocol::kVersion);
    EXPECT_EQ(protocol::hello_version(std::string("\x04\0\0\0\x07", 5)), 7u);  // any length
    EXPECT_FALSE(protocol::hello_version(std::string("\x04\0\0\0", 4)));
    EXPECT_FALSE(protocol::hello_version(std::string("\x01\0\0\0\x02", 5)));
    Mac m{};
    m[0] = 1;
    m[31] = 2;
    f = protocol::encode(protocol::proof_request(m));
    ASSERT_EQ(f.size(), protocol::kHeaderSize + protocol::kProofBody);
    auto proof = protocol::decode_request(std::string_view(f).substr(protocol::kHeaderSize));
    EXPECT_EQ(proof.op, protocol::Op::proof);
    EXPECT_EQ(proof.proof, m);
    protocol::Challenge c{random_nonce(), m};
    auto back = protocol::parse_challenge(protocol::challenge_payload(c));
    ASSERT_TRUE(back);
    EXPECT_EQ(back->server_nonce, c.server_nonce);
    EXPECT_EQ(back->server_proof, c.server_proof);
    EXPECT_FALSE(protocol::parse_challenge(""));
    EXPECT_FALSE(protocol::parse_challenge(protocol::challenge_payload(c) + "x"));
}

// Frames sealed by one side open on the other in order, once each; a changed bit, a repeat, a
// reordering or another connection's key fails.
TEST(KvsProtocol, FrameMacBindsFramesToConnectionAndOrder) {
    Secret secret = random_secret();
    Nonce client = random_nonce(), server = random_nonce();
    protocol::FrameMac sender(frame_key(Role::client, secret, client, server));
    protocol::FrameMac receiver(frame_key(Role::client, secret, client, server));
    std::string a = sender.seal(protocol::encode({protocol::Op::put, "k", "v", 0}));
    std::string b = sender.seal(protocol::encode({protocol::Op::get, "k", {}, 0}));
    auto body = [](const std::string& frame) {
        EXPECT_EQ(protocol::body_length(frame.data()), frame.size() - protocol::kHeaderSize);
        return std::string_view(frame).substr(protocol::kHeaderSize);
    };
    {  // out of order
        protocol::FrameMac r(frame_key(Role::client, secret, client, server));
        EXPECT_FALSE(r.open(body(b)));
    }
    {  // another connection: other nonces, or the other direction's key
        protocol::FrameMac r(frame_key(Role::client, secret, client, random_nonce()));
        EXPECT_FALSE(r.open(body(a)));
        protocol::FrameMac s(frame_key(Role::server, secret, client, server));
        EXPECT_FALSE(s.open(body(a)));
    }
    {  // one bit anywhere
        for (size_t i = 0; i < body(a).size(); ++i) {
            protocol::FrameMac r(frame_key(Role::client, secret, client, server));
            std::string flipped(body(a));
            flipped[i] ^= 0x01;
            EXPECT_FALSE(r.open(flipped)) << i;
        }
        protocol::FrameMac r(frame_key(Role::client, secret, client, server));
        EXPECT_FALSE(r.open(body(a).substr(0, kMacBytes - 1)));  // shorter than a MAC
    }
    auto opened = receiver.open(body(a));
    ASSERT_TRUE(opened);
    auto req = protocol::decode_request(*opened);
    EXPECT_EQ(req.op, protocol::Op::put);
    EXPECT_EQ(req.value, "v");
    EXPECT_FALSE(receiver.open(body(a)));  // a repeat
    ASSERT_TRUE(receiver.open(body(b)));
}

TEST(KvsSecret, HmacAndProofs) {
    // RFC 4231, test case 2.
    const std::string key = "Jefe";
    Mac mac = hmac_sha256(reinterpret_cast<const uint8_t*>(key.data()), key.size(),
                          {"what do ya want ", "for nothing?"});
    EXPECT_EQ(to_hex(mac.data(), mac.size()),
              "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    // A proof changes with everything it covers, and no proof is a key or the other's proof.
    Secret s = random_secret(), other = s;
    other[0] ^= 0x80;
    Nonce c = random_nonce(), v = random_nonce();
    Mac p = proof_of(Role::client, s, c, v);
    EXPECT_EQ(p, proof_of(Role::client, s, c, v));
    EXPECT_NE(p, proof_of(Role::server, s, c, v));
    EXPECT_NE(p, proof_of(Role::client, other, c, v));
    EXPECT_NE(p, proof_of(Role::client, s, v, c));
    EXPECT_NE(p, frame_key(Role::client, s, c, v));
    EXPECT_NE(frame_key(Role::client, s, c, v), frame_key(Role::server, s, c, v));
    EXPECT_NE(random_nonce(), random_nonce());
}

// Forwards one connection to the server, keeping what the client sent: what an eavesdropper on
// the network captures.
class RecordingProxy {
public:
    explicit RecordingProxy(const std::string& target) : target_(parse_kvs_address(target)) {
        listen_ = net::Fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        EXPECT_EQ(bind(listen_.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
        EXPECT_EQ(listen(listen_.get(), 1), 0);
        socklen_t len = sizeof(a);
        getsockname(listen_.get(), reinterpret_cast<sockaddr*>(&a), &len);
        address_ = format_kvs_address(a, target_.secret);
        thread_ = std::thread([this] { pump(); });
    }
    ~RecordingProxy() {
        if (thread_.joinable()) thread_.join();
    }
    const std::string& address() const { return address_; }
    // What the client sent, once it closed its connection.
    std::string captured() {
        if (thread_.joinable()) thread_.join();
        return captured_;
    }

private:
    void pump() {
        pollfd lp{listen_.get(), POLLIN, 0};
        if (poll(&lp, 1, 5000) <= 0) return;
        net::Fd from(accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC));
        net::Fd to(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
        if (connect(to.get(), reinterpret_cast<const sockaddr*>(&target_.addr),
                    sizeof(target_.addr)) != 0)
            return;
        auto start = Clock::now();
        while (seconds_since(start) < 10) {
            pollfd p[2] = {{from.get(), POLLIN, 0}, {to.get(), POLLIN, 0}};
            if (poll(p, 2, 100) <= 0) continue;
            char buf[64 << 10];
            for (int i = 0; i < 2; ++i) {
                if (!p[i].revents) continue;
                ssize_t r = recv(p[i].fd, buf, sizeof(buf), 0);
                if (r <= 0) return;  // either side closed: done
                if (i == 0) captured_.append(buf, size_t(r));
                send(p[1 - i].fd, buf, size_t(r), MSG_NOSIGNAL);
            }
        }
    }

    KvsAddress target_;
    net::Fd listen_;
    std::string address_;
    std::string captured_;
    std::thread thread_;
};

// An eavesdropper captured a whole legitimate session (handshake and a put) and replays it, at
// once or message by message waiting for each answer: the server's new nonce makes the old proof
// wrong, so nothing after it is taken and the key keeps its current value.
TEST_F(Kvs, ReplayedExchangeIsRefused) {
    std::string captured;
    {
        RecordingProxy proxy(server.address());
        {
            Client victim(proxy.address(), 2.0);
            victim.put("account", "captured");
            EXPECT_EQ(victim.get("account", 1.0), "captured");
        }
        captured = proxy.captured();
    }
    ASSERT_GT(captured.size(), kHelloFrame());
    EXPECT_FALSE(contains(captured, parse_kvs_address(server.address()).secret));
    client.put("account", "current");
    for (bool stepwise : {false, true}) {
        net::Fd fd = raw_connect(server.address());
        if (!stepwise) {
            raw_send(fd.get(), captured);
        } else {
            // The hello, the proof, then the requests, each after the server's answer.
            raw_send(fd.get(), captured.substr(0, kHelloFrame()));
            auto challenge = read_reply(fd.get(), 2000);
            ASSERT_TRUE(challenge);
            raw_send(fd.get(), captured.substr(kHelloFrame()));
        }
        EXPECT_TRUE(closed_within(fd.get(), 3000)) << "stepwise " << stepwise;
        EXPECT_EQ(client.get("account", 1.0), "current") << "stepwise " << stepwise;
    }
    // The sealed put alone, spliced into a connection of its own: its MAC is another's.
    RawMember m = raw_member(server.address());
    raw_send(m.fd.get(),
             captured.substr(kHelloFrame() + protocol::kHeaderSize + protocol::kProofBody));
    EXPECT_TRUE(closed_without_answer(m.fd.get(), 2000));
    EXPECT_EQ(client.get("account", 1.0), "current");
}

// Within one connection a sealed frame counts: sent again, it is refused and closes it.
TEST_F(Kvs, RepeatedFrameIsRefused) {
    RawMember m = raw_member(server.address());
    std::string put = m.seal(protocol::encode({protocol::Op::put, "n", "1", 0}));
    raw_send(m.fd.get(), put);
    auto ok = m.reply(2000);
    ASSERT_TRUE(ok);
    EXPECT_EQ(ok->status, CCL_SUCCESS);
    client.put("n", "2");
    raw_send(m.fd.get(), put);
    EXPECT_TRUE(closed_without_answer(m.fd.get(), 2000));
    EXPECT_EQ(client.get("n", 1.0), "2");
}

// A process that holds the KVS port before the job's server (say MASTER_PORT + 1 under torchrun)
// and plays server gets the client's hello, a random nonce, and nothing else: the client checks
// the server's proof before it sends anything more, and the secret never crosses the wire.
TEST(KvsClient, SquatterLearnsNothing) {
    const Secret secret = random_secret();
    net::Fd squat(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(bind(squat.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    ASSERT_EQ(listen(squat.get(), 4), 0);
    socklen_t len = sizeof(a);
    ASSERT_EQ(getsockname(squat.get(), reinterpret_cast<sockaddr*>(&a), &len), 0);
    const std::string address = format_kvs_address(a, secret);

    // How the squatter answers the first frame: a made-up challenge, a bare "ok" (as a server of
    // version 1 did), or nothing.
    enum class Play { challenge, ok, silent };
    for (Play play : {Play::challenge, Play::ok, Play::silent}) {
        SCOPED_TRACE("play " + std::to_string(int(play)));
        std::string got;
        std::thread squatter([&] {
            pollfd lp{squat.get(), POLLIN, 0};
            if (poll(&lp, 1, 5000) <= 0) return;
            net::Fd fd(accept4(squat.get(), nullptr, nullptr, SOCK_CLOEXEC));
            bool answered = false;
            auto start = Clock::now();
            while (seconds_since(start) < 5) {
                pollfd p{fd.get(), POLLIN, 0};
                if (poll(&p, 1, 50) <= 0) continue;
                char buf[4096];
                ssize_t r = recv(fd.get(), buf, sizeof(buf), 0);
                if (r <= 0) return;  // the client gave up
                got.append(buf, size_t(r));
                if (answered || got.size() < kHelloFrame()) continue;
                answered = true;
                Mac made_up{};
                for (auto& b : made_up) b = uint8_t(rand());
                if (play == Play::challenge)
                    raw_send(
                        fd.get(),
                        protocol::encode(protocol::Reply{
                            CCL_SUCCESS, protocol::challenge_payload({random_nonce(), made_up})}));
                if (play == Play::ok) raw_send(fd.get(), protocol::encode(protocol::Reply{}));
            }
        });
        auto e = error_of([&] { Client c(address, play == Play::silent ? 0.5 : 2.0); });
        squatter.join();
        ASSERT_TRUE(e);
        EXPECT_EQ(e->code(), play == Play::silent ? CCL_ERROR_TIMEOUT : CCL_ERROR_INVALID_USAGE)
            << e->what();
        if (play != Play::silent) {
            EXPECT_NE(std::string(e->what()).find("another process holds that port"),
                      std::string::npos)
                << e->what();
        }
        // One hello, of this version, with a nonce that is not the secret; nothing after it.
        ASSERT_EQ(got.size(), kHelloFrame());
        EXPECT_FALSE(contains(got, secret));
        auto hello = protocol::decode_request(std::string_view(got).substr(protocol::kHeaderSize));
        EXPECT_EQ(hello.op, protocol::Op::hello);
        EXPECT_EQ(hello.version, protocol::kVersion);
    }
}

TEST(KvsServer, LimitsScaleWithTheJob) {
    EXPECT_EQ(ServerLimits::for_job(0).max_members, ServerLimits{}.max_members);
    EXPECT_EQ(ServerLimits::for_job(8).max_members, 96u);
    EXPECT_GE(ServerLimits::for_job(4096).max_members, 4096u);
}

// Past max_members a newcomer that completed the handshake is refused saying so; the members go
// on, and once some leave a newcomer gets in.
TEST(KvsServer, MemberLimitRefusesNewcomers) {
    ServerLimits limits;
    limits.max_members = 3;
    Server server("lo", 0, std::nullopt, limits);
    Client client(server.address(), 2.0);
    std::vector<RawMember> others;
    others.push_back(raw_member(server.address()));
    others.push_back(raw_member(server.address()));
    auto e = error_of([&] { Client late(server.address(), 2.0); });
    ASSERT_TRUE(e);
    EXPECT_EQ(e->code(), CCL_ERROR_OUT_OF_MEMORY);
    EXPECT_NE(std::string(e->what()).find("serves 3 connections already"), std::string::npos)
        << e->what();
    client.put("k", "v");
    EXPECT_EQ(client.get("k", 1.0), "v");
    others.clear();
    // The server notices them leave in its next round.
    std::optional<std::string> value;
    for (auto start = Clock::now(); !value && seconds_since(start) < 5;) {
        try {
            Client late(server.address(), 2.0);
            value = late.get("k", 1.0);
        } catch (const Error& err) {
            EXPECT_EQ(err.code(), CCL_ERROR_OUT_OF_MEMORY) << err.what();
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    }
    EXPECT_EQ(value, "v");
}

// Members that each start a large frame and stop half-way: the bytes they may make the server
// buffer are shared and bounded, so past max_buffered each further one is closed, and the job's
// small requests are still served. Once they are gone a large request fits again.
TEST(KvsServer, LargeHalfSentFramesShareABoundedBuffer) {
    ServerLimits limits;
    limits.max_buffered = size_t{4} << 20;
    Server server("lo", 0, std::nullopt, limits);
    Client client(server.address(), 5.0);
    constexpr size_t kBody = size_t{1} << 20;
    constexpr int kHostile = 12;
    const size_t fit = limits.max_buffered / (protocol::kHeaderSize + kBody);  // 3
    std::vector<RawMember> hostile;
    const std::string part = be32(uint32_t(kBody)) + std::string(64 << 10, 'x');
    for (int i = 0; i < kHostile; ++i) {
        hostile.push_back(raw_member(server.address()));
        send(hostile.back().fd.get(), part.data(), part.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    // Each that does not fit is closed at once; those that fit stay (until the stall timeout).
    size_t closed = 0;
    std::vector<bool> gone(kHostile, false);
    for (auto start = Clock::now(); closed < kHostile - fit && seconds_since(start) < 5;) {
        for (int i = 0; i < kHostile; ++i) {
            if (gone[i]) continue;
            pollfd p{hostile[i].fd.get(), POLLIN, 0};
            if (poll(&p, 1, 0) > 0) {
                char c;
                if (recv(hostile[i].fd.get(), &c, 1, MSG_DONTWAIT) <= 0) {
                    gone[i] = true;
                    ++closed;
                }
            }
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_EQ(closed, kHostile - fit);
    client.put("small", "served");
    Client fresh(server.address(), 5.0);
    EXPECT_EQ(fresh.get("small", 1.0), "served");
    hostile.clear();
    // The server releases their share in its next round: then a large put fits (the client
    // reconnects after a refusal).
    const std::string big(512 << 10, 'b');
    bool done = false;
    for (auto start = Clock::now(); !done && seconds_since(start) < 5;) {
        try {
            client.put("big", big);
            done = true;
        } catch (const Error&) {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    }
    EXPECT_TRUE(done);
    EXPECT_EQ(fresh.get("big", 2.0), big);
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

size_t rss_bytes() {
    std::ifstream statm("/proc/self/statm");
    size_t pages = 0, resident = 0;
    statm >> pages >> resident;
    return resident * size_t(sysconf(_SC_PAGESIZE));
}

// With the default limits, many members each holding most of a 1 MiB frame: the server's memory
// grows by about max_buffered at most, not with the number of connections.
TEST(KvsServer, MemoryDoesNotGrowWithHostileConnections) {
    if (kSanitized) GTEST_SKIP() << "sanitizers' shadow memory and quarantine blur RSS";
    Server server("lo");
    Client client(server.address(), 5.0);
    client.put("k", "v");
    constexpr int kHostile = 160;
    constexpr size_t kBody = size_t{1} << 20;
    const std::string part = be32(uint32_t(kBody)) + std::string(kBody * 3 / 4, 'x');
    std::vector<RawMember> hostile;
    for (int i = 0; i < kHostile; ++i) hostile.push_back(raw_member(server.address()));
    const size_t before = rss_bytes();
    for (auto& m : hostile) send(m.fd.get(), part.data(), part.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    // The server reads at most 64 KiB per connection and round: give it rounds, keep the peak.
    size_t peak = before;
    for (auto start = Clock::now(); seconds_since(start) < 3;) {
        EXPECT_EQ(client.get("k", 2.0), "v");
        peak = std::max(peak, rss_bytes());
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    const size_t growth = peak > before ? peak - before : 0;
    EXPECT_LT(growth, ServerLimits{}.max_buffered + (size_t{24} << 20))
        << "RSS " << (before >> 20) << " -> " << (peak >> 20) << " MiB";
}

TEST(KvsWarnLimiter, BurstThenOneSummaryPerInterval) {
    using namespace std::chrono_literals;
    WarnLimiter w(3, 10s);
    const auto t0 = WarnLimiter::Clock::time_point{} + 1h;
    EXPECT_FALSE(w.next_due());
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(w.admit(t0 + 1s * i, "w" + std::to_string(i)));
    for (int i = 3; i < 50; ++i) EXPECT_FALSE(w.admit(t0 + 5s, "w" + std::to_string(i)));
    EXPECT_EQ(w.next_due(), t0 + 10s);
    EXPECT_FALSE(w.due(t0 + 9s));
    auto s = w.due(t0 + 10s);
    ASSERT_TRUE(s);
    EXPECT_EQ(s->count, 47u);
    EXPECT_EQ(s->last, "w49");
    EXPECT_FALSE(w.due(t0 + 11s));  // said once
    EXPECT_FALSE(w.next_due());
    // A new interval starts with the next warning, with a fresh burst.
    EXPECT_TRUE(w.admit(t0 + 30s, "x"));
    EXPECT_FALSE(w.due(t0 + 41s));  // nothing held back: no summary
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(w.admit(t0 + 50s, "y"));
    EXPECT_FALSE(w.admit(t0 + 51s, "z"));
    // Asked at shutdown, whether or not the interval is over.
    s = w.flush();
    ASSERT_TRUE(s);
    EXPECT_EQ(s->count, 1u);
    EXPECT_FALSE(w.flush());
}

// Many hostile connections do not give a line each: a burst, then summaries that count the rest
// (the last at the server's end). Every connection is accounted for.
TEST(KvsServer, HostileConnectionWarningsAreRateLimited) {
    if (!log().enabled(LogLevel::warn)) GTEST_SKIP() << "CCL_LOG_LEVEL hides warnings";
    constexpr int kHostile = 60;
    testing::internal::CaptureStderr();
    {
        Server server("lo");
        for (int i = 0; i < kHostile; ++i) {
            net::Fd fd = raw_connect(server.address());
            raw_send(fd.get(), be32(0xffffffffu));
            EXPECT_TRUE(closed_without_answer(fd.get(), 2000));
        }
    }
    std::string err = testing::internal::GetCapturedStderr();
    size_t lines = 0, summaries = 0, summarized = 0;
    for (size_t pos = 0; pos < err.size();) {
        size_t nl = err.find('\n', pos);
        std::string line = err.substr(pos, nl == std::string::npos ? nl : nl - pos);
        pos = nl == std::string::npos ? err.size() : nl + 1;
        if (line.find("closing the connection from") != std::string::npos &&
            line.find("more connections") == std::string::npos) {
            ++lines;
        } else if (size_t at = line.find(" more connections were closed or refused");
                   at != std::string::npos) {
            ++summaries;
            size_t digits = line.rfind(' ', at - 1) + 1;
            summarized += std::stoul(line.substr(digits, at - digits));
        }
    }
    EXPECT_EQ(lines + summarized, size_t(kHostile)) << err;
    EXPECT_GE(summaries, 1u) << err;
    EXPECT_LE(lines, 10 * (summaries + 1)) << err;
}

}  // namespace
}  // namespace ccl::kvs
