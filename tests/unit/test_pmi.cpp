// The PMI-1 client against a fake launcher that answers the way MPICH's Hydra does, and the
// rendezvous of a launched job (rank 0 serves the KVS, the others find it) over that fake launcher
// and over MASTER_ADDR, with ranks as threads of this process.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "kvs/launcher.h"
#include "kvs/net.h"
#include "kvs/pmi.h"
#include "kvs/rendezvous.h"

namespace {

using ccl::kvs::net::Fd;
using Clock = std::chrono::steady_clock;

// A PMI-1 server for `n` ranks over socketpairs, on its own thread.
class FakePmi {
public:
    struct Options {
        bool answer_barrier = true;  // false: a rank that never arrives
        int vallen_max = 1024;
        bool garbage = false;  // answer every request with nonsense
        bool close_on_barrier = false;
    };
    FakePmi(int n, Options o) : o_(o), finalized_(size_t(n), false) {
        for (int i = 0; i < n; ++i) {
            int sv[2];
            EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
            server_.emplace_back(sv[0]);
            client_.emplace_back(sv[1]);
        }
        in_.resize(size_t(n));
        stop_ = Fd(eventfd(0, EFD_CLOEXEC));
        thread_ = std::thread([this] { run(); });
    }
    explicit FakePmi(int n) : FakePmi(n, Options{}) {}
    ~FakePmi() {
        uint64_t one = 1;
        EXPECT_EQ(write(stop_.get(), &one, sizeof one), ssize_t(sizeof one));
        thread_.join();
    }
    int fd(int rank) const { return client_[size_t(rank)].get(); }
    bool finalized(int rank) {
        std::lock_guard lock(mu_);
        return finalized_[size_t(rank)];
    }
    std::vector<std::string> requests() {
        std::lock_guard lock(mu_);
        return requests_;
    }

private:
    void reply(size_t rank, const std::string& line) {
        std::string s = line + "\n";
        ASSERT_EQ(write(server_[rank].get(), s.data(), s.size()), ssize_t(s.size()));
    }
    static std::string field(const std::string& line, const std::string& name) {
        size_t at = line.find(" " + name + "=");
        if (at == std::string::npos) return "";
        at += name.size() + 2;
        return line.substr(at, line.find(' ', at) - at);
    }
    void handle(size_t rank, const std::string& line) {
        {
            std::lock_guard lock(mu_);
            requests_.push_back(line);
        }
        if (o_.garbage) return reply(rank, "cmd=what rc=0");
        std::string cmd = line.substr(4, line.find(' ') - 4);
        if (cmd == "init") {
            reply(rank, "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0");
        } else if (cmd == "get_maxes") {
            reply(rank, "cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=" +
                            std::to_string(o_.vallen_max));
        } else if (cmd == "get_my_kvsname") {
            reply(rank, "cmd=my_kvsname kvsname=kvs_42_0 rc=0");
        } else if (cmd == "put") {
            EXPECT_EQ(field(line, "kvsname"), "kvs_42_0");
            kvs_[field(line, "key")] = field(line, "value");
            reply(rank, "cmd=put_result rc=0 msg=success");
        } else if (cmd == "get") {
            auto it = kvs_.find(field(line, "key"));
            if (it == kvs_.end())
                reply(rank, "cmd=get_result rc=-1 msg=key_" + field(line, "key") +
                                "_not_found value=unknown");
            else
                reply(rank, "cmd=get_result rc=0 msg=success value=" + it->second);
        } else if (cmd == "barrier_in") {
            if (o_.close_on_barrier) {
                server_[rank].reset();
                return;
            }
            if (++arrived_ == server_.size() && o_.answer_barrier) {
                arrived_ = 0;
                for (size_t r = 0; r < server_.size(); ++r) reply(r, "cmd=barrier_out");
            }
        } else if (cmd == "finalize") {
            {
                std::lock_guard lock(mu_);
                finalized_[rank] = true;
            }
            reply(rank, "cmd=finalize_ack");
        } else {
            reply(rank, "cmd=unknown_command rc=-1");
        }
    }
    void run() {
        for (;;) {
            std::vector<pollfd> fds{{stop_.get(), POLLIN, 0}};
            for (auto& s : server_) fds.push_back({s.get(), POLLIN, 0});
            if (poll(fds.data(), fds.size(), -1) < 0) continue;
            if (fds[0].revents) return;
            for (size_t r = 0; r < server_.size(); ++r) {
                if (!(fds[r + 1].revents & POLLIN) || !server_[r].valid()) continue;
                char buf[4096];
                ssize_t n = read(server_[r].get(), buf, sizeof buf);
                if (n <= 0) {
                    server_[r].reset();
                    continue;
                }
                in_[r].append(buf, size_t(n));
                for (size_t nl;
                     server_[r].valid() && (nl = in_[r].find('\n')) != std::string::npos;) {
                    std::string line = in_[r].substr(0, nl);
                    in_[r].erase(0, nl + 1);
                    handle(r, line);
                }
            }
        }
    }

    Options o_;
    std::vector<Fd> server_, client_;
    std::vector<std::string> in_;
    std::map<std::string, std::string> kvs_;
    size_t arrived_ = 0;
    Fd stop_;
    std::mutex mu_;
    std::vector<bool> finalized_;
    std::vector<std::string> requests_;
    std::thread thread_;
};

// Runs body(rank) on one thread per rank; returns what each threw (nullopt: nothing).
std::vector<std::optional<ccl::Error>> per_rank(int n, const std::function<void(int)>& body) {
    std::vector<std::optional<ccl::Error>> errors(static_cast<size_t>(n));
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r)
        threads.emplace_back([&, r] {
            try {
                body(r);
            } catch (const ccl::Error& e) {
                errors[size_t(r)] = e;
            }
        });
    for (auto& t : threads) t.join();
    return errors;
}

bool contains(const char* s, const char* part) {
    return std::string(s).find(part) != std::string::npos;
}

TEST(Pmi, PutBarrierGetFinalize) {
    FakePmi pmi(2);
    std::string got;
    auto errors = per_rank(2, [&](int r) {
        ccl::kvs::PmiClient c(pmi.fd(r), 10);
        EXPECT_EQ(c.kvsname(), "kvs_42_0");
        if (r == 0) c.put("addr", "10.1.2.3:4567");
        c.barrier();
        if (r == 1) got = c.get("addr");
        if (r == 1) c.finalize();  // rank 0 leaves it to the destructor
    });
    for (auto& e : errors) EXPECT_FALSE(e) << e->what();
    EXPECT_EQ(got, "10.1.2.3:4567");
    EXPECT_TRUE(pmi.finalized(0));
    EXPECT_TRUE(pmi.finalized(1));
    auto req = pmi.requests();
    ASSERT_FALSE(req.empty());
    EXPECT_EQ(req[0], "cmd=init pmi_version=1 pmi_subversion=1");
}

TEST(Pmi, UnknownKey) {
    FakePmi pmi(1);
    ccl::kvs::PmiClient c(pmi.fd(0), 10);
    try {
        c.get("nobody-put-this");
        ADD_FAILURE() << "got a value";
    } catch (const ccl::Error& e) {
        EXPECT_EQ(e.code(), CCL_ERROR_INVALID_USAGE);
        EXPECT_TRUE(contains(e.what(), "not_found")) << e.what();
    }
}

TEST(Pmi, BarrierHasADeadline) {
    FakePmi pmi(2, {.answer_barrier = false});
    ccl::kvs::PmiClient c(pmi.fd(0), 0.3);
    auto t0 = Clock::now();
    try {
        c.barrier();
        ADD_FAILURE() << "the barrier returned";
    } catch (const ccl::Error& e) {
        EXPECT_EQ(e.code(), CCL_ERROR_TIMEOUT);
        EXPECT_TRUE(contains(e.what(), "CCL_KVS_TIMEOUT")) << e.what();
    }
    EXPECT_LT(Clock::now() - t0, std::chrono::seconds(5));
}

TEST(Pmi, LauncherGone) {
    FakePmi pmi(1, {.close_on_barrier = true});
    ccl::kvs::PmiClient c(pmi.fd(0), 10);
    try {
        c.barrier();
        ADD_FAILURE() << "the barrier returned";
    } catch (const ccl::Error& e) {
        EXPECT_EQ(e.code(), CCL_ERROR_PEER_FAILURE);
        EXPECT_TRUE(contains(e.what(), "closed")) << e.what();
    }
}

TEST(Pmi, SomethingElseOnTheDescriptor) {
    FakePmi pmi(1, {.garbage = true});
    try {
        ccl::kvs::PmiClient c(pmi.fd(0), 10);
        ADD_FAILURE() << "init succeeded";
    } catch (const ccl::Error& e) {
        EXPECT_EQ(e.code(), CCL_ERROR_PEER_FAILURE);
        EXPECT_TRUE(contains(e.what(), "response_to_init")) << e.what();
    }
    try {
        ccl::kvs::PmiClient c(-1, 10);
        ADD_FAILURE() << "accepted fd -1";
    } catch (const ccl::Error& e) {
        EXPECT_EQ(e.code(), CCL_ERROR_INVALID_ARGUMENT);
    }
}

TEST(Pmi, LimitsAndCharacters) {
    FakePmi pmi(1, {.vallen_max = 9});  // 8 characters and the NUL
    ccl::kvs::PmiClient c(pmi.fd(0), 10);
    c.put("k", "12345678");
    for (auto [key, value] :
         {std::pair{"k", "123456789"}, {"a key", "v"}, {"k", "a=b"}, {"", "v"}}) {
        try {
            c.put(key, value);
            ADD_FAILURE() << "put '" << key << "' '" << value << "'";
        } catch (const ccl::Error& e) {
            EXPECT_EQ(e.code(), CCL_ERROR_INVALID_ARGUMENT);
        }
    }
}

// The rendezvous of a launched job.

ccl::kvs::Launch launch_of(int rank, int size, ccl::kvs::AddressVia via) {
    ccl::kvs::Launch l;
    l.launcher = ccl::Launcher::hydra;
    l.rank = rank;
    l.size = size;
    l.via = via;
    return l;
}

// Every rank reads what rank 0 put: they all reached one KVS.
void expect_one_kvs(std::vector<std::unique_ptr<ccl::kvs::Rendezvous>>& ranks) {
    ranks[0]->client().put("hello", "from rank 0");
    for (auto& r : ranks) EXPECT_EQ(r->client().get("hello", 10), "from rank 0");
}

TEST(Rendezvous, OverPmi) {
    const int n = 3;
    FakePmi pmi(n);
    std::vector<std::unique_ptr<ccl::kvs::Rendezvous>> ranks(n);
    auto errors = per_rank(n, [&](int r) {
        auto l = launch_of(r, n, ccl::kvs::AddressVia::pmi);
        l.pmi_fd = pmi.fd(r);
        ranks[size_t(r)] = std::make_unique<ccl::kvs::Rendezvous>(l, "", 10);
    });
    for (auto& e : errors) ASSERT_FALSE(e) << e->what();
    expect_one_kvs(ranks);
    EXPECT_FALSE(pmi.finalized(1));  // only when the process (here: the rendezvous) ends
    ranks.clear();
    for (int r = 0; r < n; ++r) EXPECT_TRUE(pmi.finalized(r));
}

TEST(Rendezvous, Rank0FailureReachesTheOthersAtOnce) {
    FakePmi pmi(2);
    auto t0 = Clock::now();
    auto errors = per_rank(2, [&](int r) {
        auto l = launch_of(r, 2, ccl::kvs::AddressVia::pmi);
        l.pmi_fd = pmi.fd(r);
        ccl::kvs::Rendezvous rv(l, "no-such-interface0", 30);
    });
    EXPECT_LT(Clock::now() - t0, std::chrono::seconds(10));  // not the 30 s timeout
    ASSERT_TRUE(errors[0]);
    EXPECT_EQ(errors[0]->code(), CCL_ERROR_INVALID_ARGUMENT);
    EXPECT_TRUE(contains(errors[0]->what(), "no-such-interface0")) << errors[0]->what();
    ASSERT_TRUE(errors[1]);
    EXPECT_EQ(errors[1]->code(), CCL_ERROR_PEER_FAILURE);
    EXPECT_TRUE(contains(errors[1]->what(), "rank 0 could not start")) << errors[1]->what();
}

// A port nobody listens on now.
int free_port() {
    Fd s(socket(AF_INET, SOCK_STREAM, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    socklen_t len = sizeof a;
    EXPECT_EQ(getsockname(s.get(), reinterpret_cast<sockaddr*>(&a), &len), 0);
    return ntohs(a.sin_port);
}

TEST(Rendezvous, AtMasterAddress) {
    const int n = 3;
    int port = free_port();
    std::vector<std::unique_ptr<ccl::kvs::Rendezvous>> ranks(n);
    auto errors = per_rank(n, [&](int r) {
        auto l = launch_of(r, n, ccl::kvs::AddressVia::master);
        l.address = r == 1 ? "localhost" : "127.0.0.1";  // a host name resolves too
        l.port = port;
        // The others start first: they retry until rank 0 listens.
        if (r == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
        ranks[size_t(r)] = std::make_unique<ccl::kvs::Rendezvous>(l, "", 10);
    });
    for (auto& e : errors) ASSERT_FALSE(e) << e->what();
    expect_one_kvs(ranks);
}

// A rank whose secret differs (say CCL_KVS_SECRET set differently, or a stale script) is refused
// by rank 0's KVS at once, saying so, while the ranks that agree meet.
TEST(Rendezvous, AtMasterAddressWrongSecret) {
    int port = free_port();
    auto l0 = launch_of(0, 2, ccl::kvs::AddressVia::master);
    l0.address = "127.0.0.1";
    l0.port = port;
    l0.secret = ccl::kvs::random_secret();
    ccl::kvs::Rendezvous rank0(l0, "", 10);
    auto l1 = l0;
    l1.rank = 1;
    l1.secret = ccl::kvs::random_secret();
    auto t0 = Clock::now();
    try {
        ccl::kvs::Rendezvous rv(l1, "", 10);
        ADD_FAILURE() << "joined with another job's secret";
    } catch (const ccl::Error& e) {
        EXPECT_EQ(e.code(), CCL_ERROR_INVALID_USAGE) << e.what();
        EXPECT_TRUE(contains(e.what(), "wrong job secret")) << e.what();
    }
    EXPECT_LT(Clock::now() - t0, std::chrono::seconds(5));  // not at the timeout
    l1.secret = l0.secret;
    ccl::kvs::Rendezvous good(l1, "", 10);
    good.client().put("k", "v");
    EXPECT_EQ(rank0.client().get("k", 5), "v");
}

TEST(Rendezvous, MasterPortInUse) {
    Fd held(socket(AF_INET, SOCK_STREAM, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    ASSERT_EQ(bind(held.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    ASSERT_EQ(listen(held.get(), 1), 0);
    socklen_t len = sizeof a;
    ASSERT_EQ(getsockname(held.get(), reinterpret_cast<sockaddr*>(&a), &len), 0);
    auto l = launch_of(0, 2, ccl::kvs::AddressVia::master);
    l.address = "127.0.0.1";
    l.port = ntohs(a.sin_port);
    try {
        ccl::kvs::Rendezvous rv(l, "", 10);
        ADD_FAILURE() << "served the KVS on a port in use";
    } catch (const ccl::Error& e) {
        EXPECT_EQ(e.code(), CCL_ERROR_SYSTEM);
        EXPECT_TRUE(contains(e.what(), "in use")) << e.what();
        EXPECT_TRUE(contains(e.what(), "CCL_KVS_PORT")) << e.what();
    }
}

TEST(Rendezvous, MasterNeverComes) {
    auto l = launch_of(1, 2, ccl::kvs::AddressVia::master);
    l.address = "127.0.0.1";
    l.port = free_port();
    auto t0 = Clock::now();
    try {
        ccl::kvs::Rendezvous rv(l, "", 0.3);
        ADD_FAILURE() << "connected to nobody";
    } catch (const ccl::Error& e) {
        EXPECT_EQ(e.code(), CCL_ERROR_TIMEOUT);
        EXPECT_TRUE(contains(e.what(), "MASTER_ADDR")) << e.what();
    }
    EXPECT_LT(Clock::now() - t0, std::chrono::seconds(5));
}

}  // namespace
