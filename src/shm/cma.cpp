#include "shm/cma.h"

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "base/team.h"
#include "base/wait.h"
#include "shm/arena.h"

namespace ccl::shm {

namespace {

using Transfer = ssize_t (*)(pid_t, const iovec*, unsigned long, const iovec*, unsigned long,
                             unsigned long);

// The kernel may copy less than asked (at most about 1 GiB per call, or up to a bad page): loop.
void transfer_one(Transfer fn, const char* what, const ProcessId& pid, void* local, void* remote,
                  size_t bytes) {
    size_t done = 0;
    while (done < bytes) {
        iovec l{static_cast<char*>(local) + done, bytes - done};
        iovec r{static_cast<char*>(remote) + done, bytes - done};
        ssize_t n = fn(pid.pid, &l, 1, &r, 1, 0);
        if (n > 0) {
            done += size_t(n);
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        int err = n < 0 ? errno : EFAULT;
        // A peer that is exiting (killed mid-transfer) gives EFAULT rather than ESRCH; give
        // its exit a moment to show before calling the failure a system error.
        bool dead = err == ESRCH || !process_alive(pid);
        for (int i = 0; !dead && err == EFAULT && i < 20; ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
            dead = !process_alive(pid);
        }
        throw Error(dead ? CCL_ERROR_PEER_FAILURE : CCL_ERROR_SYSTEM,
                    std::string(what) + " of " + std::to_string(bytes) + " bytes with pid " +
                        std::to_string(pid.pid) + " failed: " + std::strerror(err) +
                        (dead ? " (that rank died)" : ""));
    }
}

std::atomic<size_t> slice_bytes{size_t(2) << 20};

// Cuts a transfer over the rank's team: one of two slices or more at the remote side's multiples
// of the slice, into as many parts of whole slices as the team has threads (parts that share a
// page table contend for its lock); a shorter one of two parts or more (kCmaPartBytes, or a slice
// if smaller) evenly at pages.
constexpr size_t kCmaPartBytes = size_t(1) << 20;  // a part is a system call and its pinning

void transfer(Transfer fn, const char* what, const ProcessId& pid, void* local, void* remote,
              size_t bytes) {
    const size_t slice = slice_bytes.load(std::memory_order_relaxed);
    const size_t threads = size_t(team_size());
    const uintptr_t from = reinterpret_cast<uintptr_t>(remote), to = from + bytes;
    const uintptr_t first = from / slice, slices = bytes ? (to - 1) / slice - first + 1 : 0;
    const bool whole = bytes >= 2 * slice;
    const size_t parts = threads < 2 ? 1
                         : whole     ? std::min(threads, size_t(slices))
                                     : std::min(threads, bytes / std::min(slice, kCmaPartBytes));
    if (parts < 2) return transfer_one(fn, what, pid, local, remote, bytes);
    auto cut = [&](size_t p) -> uintptr_t {  // where part p starts
        if (p == 0) return from;
        if (p == parts) return to;
        return whole ? (first + p * slices / parts) * slice
                     : std::max(from, (from + bytes / parts * p) & ~uintptr_t(4095));
    };
    team_run(parts, [&](size_t p) {
        const uintptr_t a = cut(p), b = cut(p + 1);
        transfer_one(fn, what, pid, static_cast<char*>(local) + (a - from),
                     reinterpret_cast<void*>(a), b - a);
    });
}

}  // namespace

void cma_slice(size_t slice) { slice_bytes.store(slice, std::memory_order_relaxed); }

void cma_read(const ProcessId& pid, void* local, const void* remote, size_t bytes) {
    transfer(::process_vm_readv, "process_vm_readv", pid, local, const_cast<void*>(remote), bytes);
}

void cma_read_all(const CmaRead* reads, size_t n) {
    const size_t slice = slice_bytes.load(std::memory_order_relaxed);
    size_t total = 0;
    bool whole = true;  // no block that transfer() would cut into slices
    for (size_t i = 0; i < n; ++i) {
        total += reads[i].bytes;
        whole = whole && reads[i].bytes < 2 * slice;
    }
    const size_t parts = team_size() > 1 ? std::min<size_t>(2, n) : 1;  // two: see cma.h
    if (parts > 1 && total >= kParallelReads && whole) {
        team_run(parts, [&](size_t p) {
            for (size_t i = p; i < n; i += parts)
                transfer_one(::process_vm_readv, "process_vm_readv", reads[i].pid, reads[i].local,
                             const_cast<void*>(reads[i].remote), reads[i].bytes);
        });
        return;
    }
    for (size_t i = 0; i < n; ++i)
        cma_read(reads[i].pid, reads[i].local, reads[i].remote, reads[i].bytes);
}

bool cma_beside_pays(size_t bytes) {
    constexpr size_t kBesideBytes = size_t(512) << 10;  // a wake-up costs microseconds
    return bytes >= kBesideBytes && team_size() > 1;
}

void cma_beside(const std::function<void()>& first, const std::function<void()>& second) {
    if (team_size() < 2) {
        first();
        second();
        return;
    }
    team_run(2, [&](size_t p) { p == 0 ? first() : second(); });
}

void cma_write(const ProcessId& pid, void* remote, const void* local, size_t bytes) {
    transfer(::process_vm_writev, "process_vm_writev", pid, const_cast<void*>(local), remote,
             bytes);
}

namespace {

// Nanoseconds since t0 (the probes' measure).
double ns_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
}

// One read of `bytes` at `remote` in `pid` into `local`, timed: nanoseconds, or -1 where it
// failed (never throws).
double timed_read(pid_t pid, void* local, const void* remote, size_t bytes) {
    iovec l{local, bytes}, r{const_cast<void*>(remote), bytes};
    const auto t0 = std::chrono::steady_clock::now();
    if (::process_vm_readv(pid, &l, 1, &r, 1, 0) != ssize_t(bytes)) return -1;
    return ns_since(t0);
}

}  // namespace

double cma_probe(pid_t pid, const void* remote, size_t bytes) {
    std::vector<char> buf(bytes);
    double best = -1;
    for (int i = 0; i < 64; ++i) {
        const double ns = timed_read(pid, buf.data(), remote, bytes);
        if (ns < 0) return -1;
        if (best < 0 || ns < best) best = ns;
    }
    return best;
}

Task cma_copy_costs(Arena& arena, Signature sig, size_t bytes, int reps, bool kernel_too,
                    double* kernel_ns, double* user_ns) {
    const int next = (arena.rank() + 1) % arena.nranks();
    std::vector<char> mine(bytes), into(bytes);  // mine: what the previous rank reads
    *kernel_ns = *user_ns = -1;
    bool failed = false;
    for (int i = 0; i < 2 * reps; ++i) {
        const bool kernel = i % 2 == 1;
        arena.begin_round(sig);
        co_await arena.buffer_free();
        char* buf = static_cast<char*>(arena.own_buffer());
        if (kernel) {
            std::memset(mine.data(), i, bytes);
            *reinterpret_cast<const void**>(buf) = mine.data();
        } else {
            std::memset(buf, i, bytes);
        }
        arena.ready();
        co_await arena.all_ready();
        const void* from = arena.peer_buffer(next);
        double ns;
        if (!kernel) {
            const auto t0 = std::chrono::steady_clock::now();
            std::memcpy(into.data(), from, bytes);
            ns = ns_since(t0);
        } else {
            // Rounds without a read too (this rank may not read): every rank runs the same rounds.
            ns = kernel_too ? timed_read(arena.peer_pid(next), into.data(),
                                         *static_cast<const void* const*>(from), bytes)
                            : -1;
            failed = failed || ns < 0;
        }
        double& best = kernel ? *kernel_ns : *user_ns;
        if (ns >= 0 && (best < 0 || ns < best)) best = ns;
        arena.done();
        if (kernel) co_await arena.all_done();  // the previous rank reads `mine` until then
    }
    if (failed) *kernel_ns = -1;
}

}  // namespace ccl::shm
