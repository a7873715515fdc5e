// The KVS server and client over real sockets on loopback: results, timeouts, reconnects and
// hostile peers. Timeouts are short so the whole file runs in a few seconds.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.h"
#include "kvs/kvs.h"
#include "kvs/net.h"
#include "kvs/protocol.h"
#include "kvs/secret.h"
#include "kvs/store.h"

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

// Reads one whole reply frame from a blocking socket within `timeout_ms`; nullopt on EOF/timeout.
std::optional<protocol::Reply> read_reply(int fd, int timeout_ms) {
    std::string in;
    auto start = Clock::now();
    while (seconds_since(start) * 1000 < timeout_ms) {
        if (in.size() >= protocol::kHeaderSize) {
            size_t body = protocol::body_length(in.data());
            if (in.size() >= protocol::kHeaderSize + body)
                return protocol::decode_reply(
                    std::string_view(in).substr(protocol::kHeaderSize, body));
        }
        pollfd p{fd, POLLIN, 0};
        if (poll(&p, 1, 50) <= 0) continue;
        char buf[4096];
        ssize_t r = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (r == 0 || (r < 0 && errno != EAGAIN)) return std::nullopt;
        if (r > 0) in.append(buf, size_t(r));
    }
    return std::nullopt;
}

std::string hello_frame(const std::string& address) {
    return protocol::encode(protocol::hello_request(parse_kvs_address(address).secret));
}

// A raw connection that has proved the job secret.
net::Fd authed_connect(const std::string& address) {
    net::Fd fd = raw_connect(address);
    raw_send(fd.get(), hello_frame(address));
    auto reply = read_reply(fd.get(), 2000);
    EXPECT_TRUE(reply && reply->status == CCL_SUCCESS);
    return fd;
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

TEST_F(Kvs, HostileInputClosesOnlyTheOffender) {
    std::vector<std::string> attacks = {
        be32(0xffffffffu),                                  // oversized length
        be32(uint32_t(protocol::kMaxFrame + 1)) + "xx",     // just over the cap
        frame_of(""),                                       // empty body: no opcode
        frame_of("\x09"),                                   // unknown opcode
        frame_of(std::string("\x02") + be32(100) + "abc"),  // string longer than the frame
        frame_of(std::string("\x02") + be32(1) + "a" + "trailing"),
        frame_of(std::string("\x02") + be32(uint32_t(protocol::kMaxKey + 1)) +
                 std::string(protocol::kMaxKey + 1, 'k')),        // key over 4 KiB
        frame_of(std::string("\x03") + be32(1) + "b" + be32(0)),  // barrier of 0 ranks
        frame_of(std::string("\x04") + be32(1)),                  // truncated hello
        hello_frame(server.address()),                            // a second hello
    };
    // A stalled half frame and a half-sent header stay open but must not block anybody.
    net::Fd stalled = authed_connect(server.address());
    raw_send(stalled.get(), be32(100) + "only part");
    net::Fd stalled_header = authed_connect(server.address());
    raw_send(stalled_header.get(), std::string("\0\0", 2));

    for (bool authenticated : {false, true}) {
        for (const auto& bytes : attacks) {
            if (!authenticated && bytes == attacks.back()) continue;  // a first hello is fine
            net::Fd fd =
                authenticated ? authed_connect(server.address()) : raw_connect(server.address());
            raw_send(fd.get(), bytes);
            // Strangers get no answer at all; members get none to a malformed message.
            EXPECT_TRUE(closed_without_answer(fd.get(), 1000))
                << "attack of " << bytes.size() << " bytes, authenticated " << authenticated;
            client.put("alive", "yes");
            EXPECT_EQ(client.get("alive", 1.0), "yes");
        }
    }
    // A connection that vanishes while parked is forgotten; the key's later put still works.
    {
        net::Fd parked = authed_connect(server.address());
        raw_send(parked.get(), frame_of(std::string("\x02") + be32(6) + "parked"));
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
    auto e = error_of([&] { Client c(wrong_address, 2.0); });
    ASSERT_TRUE(e);
    EXPECT_EQ(e->code(), CCL_ERROR_INVALID_USAGE);
    std::string what = e->what();
    EXPECT_NE(what.find("wrong job secret"), std::string::npos) << what;
    EXPECT_NE(what.find(a.shown), std::string::npos) << what;
    EXPECT_EQ(what.find(secret_hex(a.secret)), std::string::npos) << what;  // never shown
    EXPECT_EQ(what.find(secret_hex(wrong)), std::string::npos) << what;
    // The same for a raw hello: one refusal, then the server closes.
    net::Fd fd = raw_connect(server.address());
    raw_send(fd.get(), protocol::encode(protocol::hello_request(wrong)) +
                           protocol::encode({protocol::Op::get, "alive", {}, 0}));
    auto reply = read_reply(fd.get(), 2000);
    ASSERT_TRUE(reply);
    EXPECT_EQ(reply->status, CCL_ERROR_INVALID_USAGE);
    EXPECT_TRUE(closed_without_answer(fd.get(), 2000));  // the get after it got nothing
    // A hello of another protocol version is refused saying so.
    auto other_version = protocol::hello_request(a.secret);
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

TEST_F(Kvs, TruncatedHelloIsClosedAfterTheDeadline) {
    std::string hello = hello_frame(server.address());
    net::Fd fd = raw_connect(server.address());
    raw_send(fd.get(), hello.substr(0, hello.size() - 3));
    auto start = Clock::now();
    // Meanwhile the job is served.
    client.put("k", "v");
    Client other(server.address(), 2.0);
    EXPECT_EQ(other.get("k", 1.0), "v");
    EXPECT_TRUE(closed_without_answer(fd.get(), 10'000));
    double took = seconds_since(start);
    EXPECT_GE(took, 4.0);  // the hello deadline is 5 s
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
    const std::string hello = hello_frame(server.address());
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

}  // namespace
}  // namespace ccl::kvs
