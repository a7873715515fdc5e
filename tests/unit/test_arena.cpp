// The shared-memory arena and algorithms with ranks as threads, each with its own mapping of the
// segment (as separate processes would have), plus a forked peer that dies.
#include <gtest/gtest.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "shm/collectives.h"

namespace {

using ccl::shm::Arena;
using ccl::shm::Segment;
using Sig = ccl::shm::Signature;

const ccl::shm::JobId kJob{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

std::string unique_name() {
    static std::atomic<int> n{0};
    return "/ccl-" + std::to_string(getpid()) + "-unittest-" + std::to_string(n++);
}

// n arenas over one segment (rank 0 created it), already unlinked.
std::vector<std::unique_ptr<Arena>> make_arenas(int n, size_t buffer, double timeout_s) {
    std::string name = unique_name();
    size_t bytes = Arena::bytes_needed(n, buffer);
    std::vector<std::unique_ptr<Arena>> arenas;
    const ccl::shm::WaitPolicy policy = ccl::shm::wait_policy(n);
    arenas.push_back(std::make_unique<Arena>(Segment::create(name, bytes, kJob), n, 0, buffer,
                                             timeout_s, true, policy));
    for (int r = 1; r < n; ++r)
        arenas.push_back(std::make_unique<Arena>(Segment::open(name, bytes, kJob), n, r, buffer,
                                                 timeout_s, false, policy));
    arenas[0]->segment().unlink();
    return arenas;
}

template <class F>
void on_every_rank(int n, F f) {
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r) threads.emplace_back(f, r);
    for (auto& t : threads) t.join();
}

TEST(Arena, AllreduceAndBroadcastLoops) {
    for (int n : {2, 3, 4}) {
        auto arenas = make_arenas(n, 4096, 30);
        std::atomic<int> wrong{0};
        on_every_rank(n, [&](int r) {
            Arena& a = *arenas[size_t(r)];
            for (int it = 0; it < 200; ++it) {
                size_t count = size_t(1 + (it * 37) % 3000);  // up to 3 chunks of 4 KiB
                std::vector<int32_t> in(count), out(count);
                for (size_t i = 0; i < count; ++i) in[i] = int32_t(r * 1000 + it + int(i));
                if (it % 2)
                    ccl::shm::allreduce_direct(a, Sig(1), in.data(), out.data(), count, CCL_INT32,
                                               CCL_SUM)
                        .run_blocking();
                else
                    ccl::shm::allreduce_rsag(a, Sig(2), in.data(), out.data(), count, CCL_INT32,
                                             CCL_SUM)
                        .run_blocking();
                for (size_t i = 0; i < count; ++i)
                    if (out[i] != n * (it + int(i)) + 1000 * n * (n - 1) / 2) ++wrong;
                int root = it % n;
                std::vector<int32_t> buf(count, r == root ? it : -1);
                ccl::shm::broadcast(a, Sig(3), buf.data(), count * 4, root).run_blocking();
                for (int32_t v : buf)
                    if (v != it) ++wrong;
                if (it % 10 == 0) ccl::shm::barrier(a, Sig(4)).run_blocking();
            }
        });
        EXPECT_EQ(wrong.load(), 0) << n << " ranks";
    }
}

// Small rounds use lanes: a broadcast's root runs kLanes calls ahead of readers that have not
// started, no further; every reader still gets each call's own data, also with a large broadcast
// (buffer halves) and a reduce between them.
TEST(Arena, SmallRoundsRunAheadByTheirLanes) {
    const int n = 3, ahead = Arena::kLanes;
    auto arenas = make_arenas(n, 4096, 30);
    std::atomic<bool> root_ahead{false}, readers_go{false}, root_blocked_done{false};
    std::atomic<int> wrong{0};
    // Sizes from 4 bytes (eager) to lanes, each in one round (the buffers hold 4096 bytes).
    auto count_of = [](int it) { return size_t(1 + it * 1000 / ahead); };
    on_every_rank(n, [&](int r) {
        Arena& a = *arenas[size_t(r)];
        auto bcast = [&](int it, size_t count) {
            std::vector<int32_t> buf(count, r == 0 ? it * 7 : -1);
            ccl::shm::broadcast(a, Sig(3), buf.data(), count * 4, 0).run_blocking();
            for (int32_t v : buf)
                if (v != it * 7) ++wrong;
        };
        if (r == 0) {
            for (int it = 0; it < ahead; ++it) bcast(it, count_of(it));
            root_ahead = true;
            // One more needs the readers to be done with the first.
            std::thread late([&] {
                bcast(ahead, 3);
                root_blocked_done = true;
            });
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
            if (root_blocked_done) ++wrong;
            readers_go = true;
            late.join();
        } else {
            while (!readers_go) std::this_thread::yield();
            for (int it = 0; it <= ahead; ++it) bcast(it, it == ahead ? 3 : count_of(it));
        }
        // Lanes and halves mixed, and a reduce whose non-roots run ahead.
        for (int it = 0; it < 40; ++it) {
            bcast(100 + it, it % 5 == 0 ? 3000 : 5);
            int32_t x = r + it, sum = -1;
            ccl::shm::reduce_direct(a, Sig(5), &x, &sum, 1, CCL_INT32, CCL_SUM, 1).run_blocking();
            if (r == 1 && sum != n * it + n * (n - 1) / 2) ++wrong;
        }
    });
    EXPECT_TRUE(root_ahead.load());
    EXPECT_EQ(wrong.load(), 0);
}

TEST(Arena, TimeoutWhenAPeerNeverComes) {
    auto arenas = make_arenas(2, 4096, 0.2);
    try {
        ccl::shm::barrier(*arenas[0], Sig(4)).run_blocking();
        FAIL() << "barrier returned without its peer";
    } catch (const ccl::Error& e) {
        EXPECT_EQ(e.code(), CCL_ERROR_TIMEOUT);
        EXPECT_NE(std::string(e.what()).find("rank 1"), std::string::npos) << e.what();
    }
    EXPECT_TRUE(arenas[0]->failed());
    // The peer that comes late learns that rank 0 failed instead of waiting out its own timeout.
    try {
        ccl::shm::barrier(*arenas[1], Sig(4)).run_blocking();
        FAIL() << "barrier returned although rank 0 failed";
    } catch (const ccl::Error& e) {
        EXPECT_EQ(e.code(), CCL_ERROR_TIMEOUT);
        EXPECT_NE(std::string(e.what()).find("rank 0"), std::string::npos) << e.what();
    }
}

TEST(Arena, LongPollingStillEndsAtTheDeadline) {
    // A wait that polls 10 s before it sleeps (CCL_POLL_TIME_US) still fails at its 0.2 s deadline.
    const std::string name = unique_name();
    const size_t bytes = Arena::bytes_needed(2, 4096);
    const ccl::shm::WaitPolicy policy{4000, 200, std::chrono::seconds(10), true};
    Arena a(Segment::create(name, bytes, kJob), 2, 0, 4096, 0.2, true, policy);
    Arena peer(Segment::open(name, bytes, kJob), 2, 1, 4096, 0.2, false, policy);
    a.segment().unlink();
    const auto start = std::chrono::steady_clock::now();
    try {
        ccl::shm::barrier(a, Sig(4)).run_blocking();
        FAIL() << "barrier returned without its peer";
    } catch (const ccl::Error& e) {
        EXPECT_EQ(e.code(), CCL_ERROR_TIMEOUT) << e.what();
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
}

TEST(Arena, MismatchedCollectivesAreRefused) {
    auto arenas = make_arenas(2, 4096, 10);
    std::atomic<int> usage_errors{0};
    on_every_rank(2, [&](int r) {
        try {
            int32_t x = 1;
            if (r == 0)
                ccl::shm::barrier(*arenas[0], Sig(4)).run_blocking();
            else
                ccl::shm::allreduce_direct(*arenas[1], Sig(1), &x, &x, 1, CCL_INT32, CCL_SUM)
                    .run_blocking();
        } catch (const ccl::Error& e) {
            if (e.code() == CCL_ERROR_INVALID_USAGE) ++usage_errors;
        }
    });
    EXPECT_EQ(usage_errors.load(), 2);
}

TEST(Signature, TagsAreExactWhereTheyFit) {
    // Within the tag's fields, the tag is the signature itself: equal tags, equal signatures.
    const uint64_t whats[] = {0, 1, (uint64_t(1) << Sig::kWhatBits) - 1};
    const uint64_t counts[] = {0, 1, 17206, 2245492, (uint64_t(1) << Sig::kCountBits) - 1};
    std::vector<Sig> all;
    for (uint64_t w : whats)
        for (uint64_t c : counts) all.push_back(Sig(w, c));
    for (const Sig& a : all) {
        EXPECT_TRUE(a.exact());
        for (const Sig& b : all) EXPECT_EQ(a.tag() == b.tag(), a == b);
    }
    // Beyond them the tag says so, and never equals an exact one.
    const Sig wide_count(1, uint64_t(1) << Sig::kCountBits), wide_what(uint64_t(1) << 40, 1);
    EXPECT_FALSE(wide_count.exact());
    EXPECT_FALSE(wide_what.exact());
    for (const Sig& a : all) {
        EXPECT_NE(a.tag(), wide_count.tag());
        EXPECT_NE(a.tag(), wide_what.tag());
    }
}

TEST(Arena, WideSignaturesAreComparedWhole) {
    // Counts past the tag's fields: the tags are mixes, and the rounds compare the whole
    // signatures (a reduce's non-root runs ahead through the lanes, its root checks each).
    const uint64_t big = uint64_t(1) << 40;
    auto arenas = make_arenas(2, 4096, 10);
    std::atomic<int> usage_errors{0}, wrong{0};
    on_every_rank(2, [&](int r) {
        try {
            for (int it = 0; it < 100; ++it) {
                int32_t x = r + it, sum = -1;
                ccl::shm::reduce_direct(*arenas[size_t(r)], Sig(7, big + uint64_t(it)), &x, &sum, 1,
                                        CCL_INT32, CCL_SUM, 0)
                    .run_blocking();
                if (r == 0 && sum != 2 * it + 1) ++wrong;
            }
            // The same tag's neighbour on the odd rank: found whole.
            int32_t x = 1;
            ccl::shm::allreduce_direct(*arenas[size_t(r)], Sig(7, big + uint64_t(r)), &x, &x, 1,
                                       CCL_INT32, CCL_SUM)
                .run_blocking();
        } catch (const ccl::Error& e) {
            if (e.code() == CCL_ERROR_INVALID_USAGE) ++usage_errors;
        }
    });
    EXPECT_EQ(wrong.load(), 0);
    EXPECT_EQ(usage_errors.load(), 2);
}

// Whether this process may write into its own memory with process_vm_writev (single copy).
bool single_copy_works() {
    int from = 1, to = 0;
    iovec l{&from, sizeof from}, r{&to, sizeof to};
    return ::process_vm_writev(::getpid(), &l, 1, &r, 1, 0) == ssize_t(sizeof to) && to == 1;
}

TEST(Arena, SingleCopyNeverWritesPastADeclaredBuffer) {
    // Two ranks that sign an allgather alike but disagree on the counts (the signature would
    // catch that; here it is bypassed): the rank with the larger block would write past the
    // other's output. The extents the receiver shared stop it, and the bytes past its output stay
    // as they were.
    if (!single_copy_works()) GTEST_SKIP() << "single copy is not allowed here";
    auto arenas = make_arenas(2, 4096, 10);
    constexpr size_t kSmall = 256, kLarge = 4096, kGuard = 1 << 16;
    std::vector<std::vector<int32_t>> out(2);
    std::atomic<int> usage_errors{0};
    on_every_rank(2, [&](int r) {
        const std::vector<size_t> counts{kSmall, r == 0 ? kSmall : kLarge};
        out[size_t(r)].assign(counts[0] + counts[1] + kGuard, -1);
        std::vector<int32_t> mine(counts[size_t(r)], r + 1);
        try {
            ccl::shm::allgatherv_cma(*arenas[size_t(r)], Sig(11, 2 * kSmall), mine.data(),
                                     out[size_t(r)].data(), counts, CCL_INT32, false)
                .run_blocking();
        } catch (const ccl::Error& e) {
            if (e.code() == CCL_ERROR_INVALID_USAGE) ++usage_errors;
        }
    });
    EXPECT_GE(usage_errors.load(), 1);
    size_t touched = 0;
    for (size_t i = 2 * kSmall; i < out[0].size(); ++i) touched += out[0][i] != -1;
    EXPECT_EQ(touched, 0u) << "rank 1 wrote past rank 0's output";
}

TEST(Arena, AllgathervCountsAreCheckedExactly) {
    // Same total, counts split otherwise: the signature agrees, each rank's own count does not.
    // Small blocks in one eager round, large ones through the buffers, and counts that take one
    // rank eager and the other not.
    struct Case {
        const char* what;
        std::vector<size_t> counts[2];
    };
    const Case cases[] = {{"eager", {{32, 32}, {16, 48}}},
                          {"through the buffers", {{4096, 4096}, {2048, 6144}}},
                          {"eager on one rank only", {{50, 50}, {2, 98}}}};
    for (const Case& c : cases) {
        auto arenas = make_arenas(2, 4096, 10);
        const size_t total = c.counts[0][0] + c.counts[0][1];
        std::atomic<int> usage_errors{0};
        on_every_rank(2, [&](int r) {
            const std::vector<size_t>& counts = c.counts[r];
            std::vector<int32_t> mine(counts[size_t(r)], r + 1), out(total, 0);
            try {
                ccl::shm::allgatherv(*arenas[size_t(r)], Sig(8, total), mine.data(), out.data(),
                                     counts, CCL_INT32, true)
                    .run_blocking();
            } catch (const ccl::Error& e) {
                if (e.code() == CCL_ERROR_INVALID_USAGE) ++usage_errors;
            }
        });
        EXPECT_EQ(usage_errors.load(), 2) << c.what;
    }
}

// A forked child maps rank 0's arena `a` as rank 1, then dies without a word; returns its pid,
// reaped (or -1).
pid_t peer_that_died(Arena& a) {
    const size_t bytes = a.segment().size();
    const pid_t child = fork();
    if (child == 0) {
        Arena peer(Segment::open(a.segment().name(), bytes, kJob), 2, 1, a.buffer_size(), 30, false,
                   ccl::shm::wait_policy(2));
        _exit(0);
    }
    if (child < 0 || waitpid(child, nullptr, 0) != child) return -1;
    a.segment().unlink();
    return child;
}

TEST(Arena, DeadPeerIsNoticed) {
    size_t bytes = Arena::bytes_needed(2, 4096);
    Arena a(Segment::create(unique_name(), bytes, kJob), 2, 0, 4096, 30, true,
            ccl::shm::wait_policy(2));
    ASSERT_GT(peer_that_died(a), 0);  // reaped: its pid is gone
    auto start = std::chrono::steady_clock::now();
    try {
        ccl::shm::barrier(a, Sig(4)).run_blocking();
        FAIL() << "barrier returned without its peer";
    } catch (const ccl::Error& e) {
        EXPECT_EQ(e.code(), CCL_ERROR_PEER_FAILURE) << e.what();
        EXPECT_NE(std::string(e.what()).find("died"), std::string::npos) << e.what();
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

// Forks a child that sleeps until killed with pid `pid`, by setting the kernel's last pid just
// before it (root only; the pid must be free); -1 if that did not work out.
pid_t fork_with_pid(pid_t pid) {
    for (int attempt = 0; attempt < 5; ++attempt) {
        FILE* f = std::fopen("/proc/sys/kernel/ns_last_pid", "w");
        if (!f) return -1;
        std::fprintf(f, "%d", int(pid) - 1);
        if (std::fclose(f) != 0) return -1;
        pid_t child = fork();
        if (child == 0) {
            pause();
            _exit(0);
        }
        if (child == pid) return child;
        if (child > 0) {
            kill(child, SIGKILL);
            waitpid(child, nullptr, 0);
        }
    }
    return -1;
}

TEST(Arena, DeadPeerWhosePidWasReusedIsNoticed) {
    size_t bytes = Arena::bytes_needed(2, 4096);
    Arena a(Segment::create(unique_name(), bytes, kJob), 2, 0, 4096, 20, true,
            ccl::shm::wait_policy(2));
    const pid_t child = peer_that_died(a);
    ASSERT_GT(child, 0);
    // Another process now runs with the dead rank's pid, started a few clock ticks later (start
    // times count ticks of 10 ms; a pid comes round again only after the kernel went through all
    // others, far longer than a tick).
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    const pid_t other = fork_with_pid(child);
    if (other < 0)
        GTEST_SKIP() << "cannot choose a child's pid here (/proc/sys/kernel/ns_last_pid)";
    auto start = std::chrono::steady_clock::now();
    try {
        ccl::shm::barrier(a, Sig(4)).run_blocking();
        ADD_FAILURE() << "barrier returned without its peer";
    } catch (const ccl::Error& e) {
        EXPECT_EQ(e.code(), CCL_ERROR_PEER_FAILURE) << e.what();
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
    kill(other, SIGKILL);
    waitpid(other, nullptr, 0);
}

TEST(Segment, CreateRefusesAnExistingNameAndCleansUp) {
    std::string name = unique_name();
    {
        Segment s = Segment::create(name, 8192, kJob);
        EXPECT_THROW(Segment::create(name, 8192, kJob), ccl::Error);
        EXPECT_THROW(Segment::open(name, 4096, kJob), ccl::Error);  // wrong size
    }
    // The creator's destructor unlinked it.
    EXPECT_THROW(Segment::open(name, 8192, kJob), ccl::Error);
}

TEST(Arena, WaitsPollLongerOnlyWithACoreEach) {
    using std::chrono::microseconds;
    const ccl::shm::WaitPolicy own = ccl::shm::wait_policy(2, 4, microseconds(20000));
    EXPECT_TRUE(own.own_core);
    EXPECT_EQ(own.poll_time, microseconds(20000));
    // More ranks than cpus: a wait yields at once and sleeps soon, whatever CCL_POLL_TIME_US says.
    const ccl::shm::WaitPolicy crowded = ccl::shm::wait_policy(8, 2, microseconds(20000));
    EXPECT_FALSE(crowded.own_core);
    EXPECT_EQ(crowded.poll_time, microseconds(0));
}

}  // namespace
