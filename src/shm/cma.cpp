#include "shm/cma.h"

#include <pthread.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "base/error.h"
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

std::atomic<long> poll_us{0};  // cma_parallel's poll

// Helper threads that copy slices of large transfers (cma_parallel). One per process, made by
// the first communicator and never destroyed (its threads sleep until there is work, and end with
// the process). Several transfers may run at once (threads sharing communicators): the helpers
// take slices of whichever is posted, each caller copies slices of its own until none is left
// unclaimed, then waits for the ones the helpers took.
class Slicer {
public:
    explicit Slicer(int helpers) : owner_(::getpid()) {
        try {
            for (; helpers_ < helpers; ++helpers_) {
                std::thread t([this] { serve(); });
                pthread_setname_np(t.native_handle(), "ccl-cma");
                t.detach();
            }
        } catch (const std::system_error&) {  // no more threads: fewer helpers, same results
        }
    }
    int helpers() const { return helpers_; }
    // After a fork the helpers are gone (and the lock may be held by a thread that is too).
    bool usable() const { return owner_ == ::getpid(); }

    // Runs part(0) .. part(parts - 1); rethrows the first part's exception once all have ended.
    void run(size_t parts, const std::function<void(size_t)>& part) {
        Job job(part, parts);
        {
            std::lock_guard lock(m_);
            jobs_.push_back(&job);
        }
        work_.notify_all();
        copy(job);
        {
            std::lock_guard lock(m_);
            jobs_.erase(std::find(jobs_.begin(), jobs_.end(), &job));  // none left to claim
        }
        // The helpers' parts end about when this thread's do (they started together): poll for
        // them, for a wake-up takes tens of microseconds on a virtual machine. (Helpers that
        // polled for the next job as well made all-to-alls of 2 MiB slower on the 16-core host.)
        poll([&] { return job.busy.load(std::memory_order_acquire) == 0; });
        std::unique_lock lock(m_);
        done_.wait(lock, [&] { return job.busy.load(std::memory_order_acquire) == 0; });
        if (job.error) std::rethrow_exception(job.error);
    }

private:
    struct Job {
        Job(const std::function<void(size_t)>& p, size_t n) : part(p), parts(n), busy(n) {}
        const std::function<void(size_t)>& part;
        const size_t parts;
        std::atomic<size_t> next{0};
        // Parts not yet ended, plus the helpers holding the job: its caller lets it go at 0.
        std::atomic<size_t> busy;
        std::exception_ptr error;  // under m_
    };

    // Claims and copies parts of `job` until none is left to claim.
    void copy(Job& job) {
        for (size_t p; (p = job.next.fetch_add(1, std::memory_order_relaxed)) < job.parts;) {
            try {
                job.part(p);
            } catch (...) {
                std::lock_guard lock(m_);
                if (!job.error) job.error = std::current_exception();
            }
            // Nobody to wake at 0: a helper holds the job until it returns (serve), so only the
            // caller's own last part can end it, and the caller is not waiting then.
            job.busy.fetch_sub(1, std::memory_order_acq_rel);
        }
    }

    // Until done() or for the poll time: spinning a moment, then yielding the cpu between looks
    // (as a rank's waits do, wait.h).
    template <typename Done>
    static void poll(Done&& done) {
        const long us = poll_us.load(std::memory_order_relaxed);
        if (us <= 0) return;
        const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
        for (unsigned i = 0; !done(); ++i) {
            if (i < 256) {
                cpu_relax();
            } else {
                if (i % 16 == 0 && std::chrono::steady_clock::now() >= until) return;
                sched_yield();
            }
        }
    }

    Job* claimable() {
        for (Job* j : jobs_)
            if (j->next.load(std::memory_order_relaxed) < j->parts) return j;
        return nullptr;
    }

    void serve() {
        std::unique_lock lock(m_);
        for (;;) {
            // Once: callers claim parts without the lock, so a second look may find none.
            Job* job = nullptr;
            work_.wait(lock, [&] { return (job = claimable()) != nullptr; });
            job->busy.fetch_add(1, std::memory_order_relaxed);  // its caller waits for this
            lock.unlock();
            copy(*job);
            lock.lock();
            if (job->busy.fetch_sub(1, std::memory_order_acq_rel) == 1) done_.notify_all();
        }
    }

    const pid_t owner_;
    int helpers_ = 0;  // set before the Slicer is published
    std::mutex m_;
    std::condition_variable work_, done_;
    std::vector<Job*> jobs_;  // under m_
};

std::atomic<Slicer*> slicer{nullptr};
std::atomic<int> threads_wanted{1};
std::atomic<size_t> slice_bytes{size_t(2) << 20};
std::mutex slicer_made;

// The threads a transfer may run on with `s` (null: none made yet).
int threads_of(const Slicer* s) {
    return s && s->usable()
               ? std::min(threads_wanted.load(std::memory_order_relaxed), s->helpers() + 1)
               : 1;
}

// Cuts a transfer of at least two slices' bytes at the remote side's multiples of the slice,
// into as many parts of whole slices as there are threads; one of one slice or more in two
// halves, at the page boundary below the middle (where that is inside).
void transfer(Transfer fn, const char* what, const ProcessId& pid, void* local, void* remote,
              size_t bytes) {
    const size_t slice = slice_bytes.load(std::memory_order_relaxed);
    Slicer* s = bytes < slice ? nullptr : slicer.load(std::memory_order_acquire);
    const size_t threads = size_t(threads_of(s));  // no getpid() for the small ones
    if (threads < 2) return transfer_one(fn, what, pid, local, remote, bytes);
    const uintptr_t from = reinterpret_cast<uintptr_t>(remote), to = from + bytes;
    const uintptr_t first = from / slice, slices = (to - 1) / slice - first + 1;
    const bool halves = bytes < 2 * slice;
    const size_t parts = halves ? 2 : std::min(slices, threads);
    auto cut = [&](size_t p) -> uintptr_t {  // where part p starts
        if (p == 0) return from;
        if (p == parts) return to;
        return halves ? std::max(from, (from + bytes / 2) & ~uintptr_t(4095))
                      : (first + p * slices / parts) * slice;
    };
    s->run(parts, [&](size_t p) {
        const uintptr_t a = cut(p), b = cut(p + 1);
        transfer_one(fn, what, pid, static_cast<char*>(local) + (a - from),
                     reinterpret_cast<void*>(a), b - a);
    });
}

}  // namespace

void cma_parallel(int threads, size_t slice, std::chrono::microseconds poll) {
    slice_bytes.store(slice, std::memory_order_relaxed);
    poll_us.store(long(poll.count()), std::memory_order_relaxed);
    threads_wanted.store(threads, std::memory_order_relaxed);
    std::lock_guard lock(slicer_made);
    Slicer* s = slicer.load(std::memory_order_acquire);
    if (threads <= 1 || (s && s->usable() && s->helpers() + 1 >= threads)) return;
    // More helpers than before, or a forked child's first: a new set. An old one stays
    // reachable and idle (its helpers sleep in it).
    static std::vector<Slicer*> retired;
    if (s) retired.push_back(s);
    slicer.store(new Slicer(threads - 1), std::memory_order_release);
}

void cma_read(const ProcessId& pid, void* local, const void* remote, size_t bytes) {
    transfer(::process_vm_readv, "process_vm_readv", pid, local, const_cast<void*>(remote), bytes);
}

int cma_threads() { return threads_of(slicer.load(std::memory_order_acquire)); }

void cma_read_all(const CmaRead* reads, size_t n) {
    Slicer* s = slicer.load(std::memory_order_acquire);
    const size_t slice = slice_bytes.load(std::memory_order_relaxed);
    size_t total = 0;
    bool whole = true;  // no block that transfer() would cut into slices
    for (size_t i = 0; i < n; ++i) {
        total += reads[i].bytes;
        whole = whole && reads[i].bytes < 2 * slice;
    }
    if (threads_of(s) > 1 && n > 1 && total >= kParallelReads && whole) {
        s->run(2, [&](size_t p) {
            for (size_t i = p; i < n; i += 2)
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
    return bytes >= kBesideBytes && cma_threads() > 1;
}

void cma_beside(const std::function<void()>& first, const std::function<void()>& second) {
    Slicer* s = slicer.load(std::memory_order_acquire);
    if (threads_of(s) < 2) {
        first();
        second();
        return;
    }
    s->run(2, [&](size_t p) { p == 0 ? first() : second(); });
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
