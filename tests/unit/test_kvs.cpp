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
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.h"
#include "kvs/kvs.h"
#include "kvs/net.h"
#include "kvs/protocol.h"

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
    sockaddr_in addr = net::parse_address(address);
    net::Fd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    EXPECT_TRUE(fd.valid());
    EXPECT_EQ(connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    return fd;
}

void raw_send(int fd, const std::string& bytes) {
    ASSERT_EQ(send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), ssize_t(bytes.size()));
}

// True when the server closed `fd` within `timeout_ms` (EOF or reset).
bool closed_by_server(int fd, int timeout_ms) {
    auto start = Clock::now();
    while (seconds_since(start) * 1000 < timeout_ms) {
        pollfd p{fd, POLLIN, 0};
        if (poll(&p, 1, 50) > 0) {
            char buf[256];
            ssize_t r = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
            if (r == 0 || (r < 0 && errno != EAGAIN)) return true;
        }
    }
    return false;
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
    EXPECT_NE(std::string(e->what()).find(server.address()), std::string::npos) << e->what();
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
        address = net::format_address(a);
    }
    auto start = Clock::now();
    auto e = error_of([&] { Client c(address, 0.3); });
    ASSERT_TRUE(e);
    EXPECT_EQ(e->code(), CCL_ERROR_TIMEOUT);
    std::string what = e->what();
    EXPECT_NE(what.find("could not connect to the KVS at " + address + " within 0.3 s"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("refused"), std::string::npos) << what;
    double took = seconds_since(start);
    EXPECT_GE(took, 0.29);
    EXPECT_LT(took, 3.0);
}

TEST(KvsClient, MalformedAddress) {
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

TEST_F(Kvs, HostileInputClosesOnlyTheOffender) {
    auto frame = [](const std::string& body) { return be32(uint32_t(body.size())) + body; };
    std::vector<std::string> attacks = {
        be32(0xffffffffu),                               // oversized length
        be32(uint32_t(protocol::kMaxFrame + 1)) + "xx",  // just over the cap
        frame(""),                                       // empty body: no opcode
        frame("\x09"),                                   // unknown opcode
        frame(std::string("\x02") + be32(100) + "abc"),  // string longer than the frame
        frame(std::string("\x02") + be32(1) + "a" + "trailing"),
        frame(std::string("\x02") + be32(uint32_t(protocol::kMaxKey + 1)) +
              std::string(protocol::kMaxKey + 1, 'k')),        // key over 4 KiB
        frame(std::string("\x03") + be32(1) + "b" + be32(0)),  // barrier of 0 ranks
    };
    // A stalled half frame and a half-sent header stay open but must not block anybody.
    net::Fd stalled = raw_connect(server.address());
    raw_send(stalled.get(), be32(100) + "only part");
    net::Fd stalled_header = raw_connect(server.address());
    raw_send(stalled_header.get(), std::string("\0\0", 2));

    for (const auto& bytes : attacks) {
        net::Fd fd = raw_connect(server.address());
        raw_send(fd.get(), bytes);
        EXPECT_TRUE(closed_by_server(fd.get(), 1000)) << "attack of " << bytes.size() << " bytes";
        client.put("alive", "yes");
        EXPECT_EQ(client.get("alive", 1.0), "yes");
    }
    // A connection that vanishes while parked is forgotten; the key's later put still works.
    {
        net::Fd parked = raw_connect(server.address());
        raw_send(parked.get(), frame(std::string("\x02") + be32(6) + "parked"));
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
