// copy_bw: the physical limit under a large collective, a STREAM-like copy over the same cores:
// every rank of a launch copies a buffer of each size with T threads (its cpus by default, each
// pinned to one of them; the buffer cut in T equal parts), all ranks at once, and the slowest
// rank's time per copy gives the table. Run it with the layout ccl_bench runs (the same cclrun
// options): `cclrun -n 2 --cpus-per-rank 8 -- build/copy_bw`. GB/s = size / time (1 GB = 1e9 B):
// the bytes one rank copies (reads once and writes once) per second; x ranks: the node's.
//
//   copy_bw [-t THREADS] [-s 4K,1M,16M,...] [--budget SECONDS]  (default: its cpus; 4 KiB to
//           256 MiB by 4x; 0.2 s per size)
// Ranks meet through ccl's barrier and agree on the iterations and the slowest time by allreduce
// (not timed).
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "ccl/ccl.h"

namespace {

void check(ccl_result_t r, const char* what) {
    if (r == CCL_SUCCESS) return;
    std::fprintf(stderr, "copy_bw: %s: %s\n", what, ccl_last_error());
    std::exit(1);
}

size_t parse_size(const std::string& s) {
    char* end = nullptr;
    size_t v = std::strtoull(s.c_str(), &end, 10);
    switch (*end) {
        case 'K': return v << 10;
        case 'M': return v << 20;
        case 'G': return v << 30;
        default: return v;
    }
}

// T threads that copy their part of src into dst `iters` times whenever told, each pinned to one
// of the process's cpus (the first T of its affinity, cycling).
class Copiers {
public:
    explicit Copiers(int threads) : n_(threads) {
        cpu_set_t mine;
        sched_getaffinity(0, sizeof mine, &mine);
        for (int c = 0; c < CPU_SETSIZE; ++c)
            if (CPU_ISSET(c, &mine)) cpus_.push_back(c);
        for (int t = 1; t < n_; ++t) threads_.emplace_back([this, t] { serve(t); });
        pin(0);
    }
    ~Copiers() {
        stop_ = true;
        go_.fetch_add(1);
        for (auto& t : threads_) t.join();
    }
    // Seconds for `iters` copies of `bytes`, every thread on its part.
    double run(char* dst, const char* src, size_t bytes, long iters) {
        dst_ = dst, src_ = src, bytes_ = bytes, iters_ = iters;
        done_ = 0;
        const auto t0 = std::chrono::steady_clock::now();
        go_.fetch_add(1);
        copy(0);
        while (done_.load() < n_ - 1) std::this_thread::yield();
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }

private:
    void pin(int t) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpus_[size_t(t) % cpus_.size()], &one);
        pthread_setaffinity_np(pthread_self(), sizeof one, &one);
    }
    void copy(int t) {
        const size_t b = bytes_ * size_t(t) / size_t(n_) / 64 * 64,
                     e = t + 1 == n_ ? bytes_ : bytes_ * size_t(t + 1) / size_t(n_) / 64 * 64;
        for (long i = 0; i < iters_; ++i) {
            std::memcpy(dst_ + b, src_ + b, e - b);
            asm volatile("" : : "r"(dst_) : "memory");
        }
    }
    void serve(int t) {
        pin(t);
        for (unsigned seen = 0;;) {
            while (go_.load() == seen) std::this_thread::yield();
            seen = go_.load();
            if (stop_) return;
            copy(t);
            done_.fetch_add(1);
        }
    }
    const int n_;
    std::vector<int> cpus_;
    std::vector<std::thread> threads_;
    std::atomic<unsigned> go_{0};
    std::atomic<int> done_{0};
    std::atomic<bool> stop_{false};
    char* dst_ = nullptr;
    const char* src_ = nullptr;
    size_t bytes_ = 0;
    long iters_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
    cpu_set_t mine;
    sched_getaffinity(0, sizeof mine, &mine);
    int threads = CPU_COUNT(&mine);
    double budget = 0.2;
    std::vector<size_t> sizes;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "-t" && i + 1 < argc) {
            threads = std::max(1, std::atoi(argv[++i]));
        } else if (a == "-s" && i + 1 < argc) {
            std::string list = argv[++i];
            for (size_t at = 0; at <= list.size();) {
                const size_t comma = std::min(list.find(',', at), list.size());
                sizes.push_back(parse_size(list.substr(at, comma - at)));
                at = comma + 1;
            }
        } else if (a == "--budget" && i + 1 < argc) {
            budget = std::atof(argv[++i]);
        } else {
            std::fprintf(stderr, "usage: copy_bw [-t THREADS] [-s SIZES] [--budget SECONDS]\n");
            return 2;
        }
    }
    if (sizes.empty())
        for (size_t s = 4096; s <= (size_t(256) << 20); s *= 4) sizes.push_back(s);
    ccl_comm_t comm;
    check(ccl_comm_create_from_env(&comm), "ccl_comm_create_from_env");
    int rank = 0, ranks = 1;
    check(ccl_comm_rank(comm, &rank), "ccl_comm_rank");
    check(ccl_comm_size(comm, &ranks), "ccl_comm_size");
    if (rank == 0)
        std::printf(
            "# copy_bw: %d ranks, %d copying threads each (rank 0 on %d cpus)\n"
            "#        size    time(us)  GB/s/rank  GB/s(node)\n",
            ranks, threads, CPU_COUNT(&mine));
    {
        Copiers copiers(threads);
        for (size_t bytes : sizes) {
            std::vector<char> src(bytes, 1), dst(bytes, 0);  // touched: pages in place
            // Iterations: a tenth of the budget's worth, the slowest rank's guess.
            double once = copiers.run(dst.data(), src.data(), bytes, 3) / 3;
            check(ccl_allreduce(&once, &once, 1, CCL_FLOAT64, CCL_MAX, comm, nullptr, nullptr),
                  "ccl_allreduce");
            const long iters = std::clamp(long(budget / std::max(once, 1e-9)), 5L, 1000000L);
            check(ccl_barrier(comm, nullptr), "ccl_barrier");
            double s = copiers.run(dst.data(), src.data(), bytes, iters);
            check(ccl_allreduce(&s, &s, 1, CCL_FLOAT64, CCL_MAX, comm, nullptr, nullptr),
                  "ccl_allreduce");
            const double us = s / double(iters) * 1e6, gbs = double(bytes) / (us * 1e3);
            if (rank == 0) std::printf("%13zu %11.2f %10.2f %11.2f\n", bytes, us, gbs, gbs * ranks);
            std::fflush(stdout);
        }
    }
    check(ccl_comm_destroy(comm), "ccl_comm_destroy");
    return 0;
}
