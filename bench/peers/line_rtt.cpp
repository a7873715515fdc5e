// line_rtt: the round trip of one cache line between the first two cpus this process may use, in
// nanoseconds: two threads, each pinned to one of them, bounce a counter. It tells where the
// hypervisor has put a virtual machine's cpus, which it may change from one second to the next:
// on the 2-core AMD VM one launch found 105 ns (cpus sharing a core's caches) and the next 530 ns,
// and every collective's small sizes moved with it (a 2-rank alltoall of 8 B: 0.13 / 0.44 us, Open
// MPI's allgatherv 0.15 / 0.47). tools/compare_peers.sh reads it before every launch, so that the
// implementations it compares ran on the same placement.
//
//   build/line_rtt [trips]        (default 20000; prints one integer, or fails with fewer than
//                                  two cpus)
// Its two threads wait for each other by spinning, without a deadline of their own (a few ms in
// all): a caller bounds it (compare_peers.sh runs it under timeout(1)).
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace {

bool pin(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

alignas(64) std::atomic<long> ping{0};
alignas(64) std::atomic<long> pong{0};

}  // namespace

int main(int argc, char** argv) {
    const long trips = argc > 1 ? std::atol(argv[1]) : 20000;
    cpu_set_t mine;
    if (trips < 1 || sched_getaffinity(0, sizeof(mine), &mine) != 0) return 2;
    int cpus[2], found = 0;
    for (int c = 0; c < CPU_SETSIZE && found < 2; ++c)
        if (CPU_ISSET(c, &mine)) cpus[found++] = c;
    if (found < 2) {
        std::fprintf(stderr, "line_rtt: needs two cpus\n");
        return 1;
    }
    std::atomic<bool> pinned{true};
    std::thread echo([&] {
        if (!pin(cpus[1])) pinned = false;
        for (long i = 1; i <= trips; ++i) {
            while (ping.load(std::memory_order_acquire) != i) {
            }
            pong.store(i, std::memory_order_release);
        }
    });
    if (!pin(cpus[0])) pinned = false;
    const auto t0 = std::chrono::steady_clock::now();
    for (long i = 1; i <= trips; ++i) {
        ping.store(i, std::memory_order_release);
        while (pong.load(std::memory_order_acquire) != i) {
        }
    }
    const std::chrono::duration<double, std::nano> took = std::chrono::steady_clock::now() - t0;
    echo.join();
    if (!pinned) {
        std::fprintf(stderr, "line_rtt: cannot pin to cpus %d and %d\n", cpus[0], cpus[1]);
        return 1;
    }
    std::printf("%.0f\n", took.count() / double(trips));
    return 0;
}
