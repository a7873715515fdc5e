#include "base/team.h"

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>

#include "base/wait.h"

namespace ccl {

std::atomic<int> detail::team_threads{1};
thread_local bool detail::team_here = true;

void team_for_this_thread(bool on) { detail::team_here = on; }

namespace {

// How long a helper polls for the next job after one (docs/tuning.md, "The rank's team"): the
// jobs of one collective come microseconds apart, and a helper that polled longer would take
// cpu time from the application's threads on the rank's cores between calls.
constexpr auto kIdlePoll = std::chrono::microseconds(50);
// How long a caller polls for its helpers' parts before it sleeps (they started with its own and
// end about when they do, unless the cpus are shared with other work).
constexpr auto kJoinPoll = std::chrono::microseconds(200);

struct Job {
    Job(TeamPart p, size_t n) : part(p), parts(n) {}
    const TeamPart part;
    const size_t parts;
    std::atomic<size_t> next{0};
    std::atomic<bool> failed{false};
    std::exception_ptr error;  // the first part's that threw: written before its thread lets go
};

// Claims and runs parts of `job` until none is left to claim.
void work(Job& job) {
    for (size_t p; (p = job.next.fetch_add(1, std::memory_order_relaxed)) < job.parts;) {
        try {
            job.part.call(job.part.fn, p);
        } catch (...) {
            if (!job.failed.exchange(true, std::memory_order_relaxed))
                job.error = std::current_exception();
        }
    }
}

template <class Done>
bool poll_for(std::chrono::microseconds us, Done&& done) {
    const auto until = std::chrono::steady_clock::now() + us;
    for (unsigned i = 1;; ++i) {
        if (done()) return true;
        cpu_relax();
        if (i % 64 == 0 && std::chrono::steady_clock::now() >= until) return false;
    }
}

// Where a posted job waits for helpers, without a lock: a helper counts itself among the slot's
// holders before it looks at the job, and the job's caller closes the slot, then waits until no
// helper holds it, before its job (on its stack) goes.
struct alignas(64) Slot {
    std::atomic<Job*> job{nullptr};  // null: free; kClosing: its caller is waiting to free it
    // Twice the helpers holding the slot, and bit 0 set while the caller sleeps on it: the helper
    // that lets go of it last sees 3 and wakes the caller.
    std::atomic<uint32_t> holders{0};
};
Job* const kClosing = reinterpret_cast<Job*>(alignof(Job));
constexpr int kSlots = 16;  // jobs posted at once; more run on their callers alone

class Team {
public:
    // Adds helpers up to `helpers`; fewer where the system makes no more threads (same results).
    void grow(int helpers) {
        try {
            for (int h = helpers_.load(std::memory_order_relaxed); h < helpers; ++h) {
                std::thread t([this] { serve(); });
                pthread_setname_np(t.native_handle(), "ccl-team");
                t.detach();
                helpers_.fetch_add(1, std::memory_order_release);
            }
        } catch (const std::system_error&) {
        }
    }
    int helpers() const { return helpers_.load(std::memory_order_acquire); }

    // False where every slot is taken (the caller runs the job alone).
    bool run(size_t parts, TeamPart part, bool wake) {
        Job job(part, parts);
        Slot* slot = nullptr;
        for (Slot& s : slots_) {
            Job* none = nullptr;
            if (s.job.load(std::memory_order_relaxed) == nullptr &&
                s.job.compare_exchange_strong(none, &job, std::memory_order_seq_cst)) {
                slot = &s;
                break;
            }
        }
        if (!slot) return false;
        epoch_.fetch_add(1, std::memory_order_seq_cst);  // polling helpers see it
        if (wake && sleepers_.load(std::memory_order_seq_cst) > 0) futex_wake_all(&epoch_);
        work(job);
        slot->job.store(kClosing, std::memory_order_seq_cst);  // every part is claimed
        auto free = [&] { return slot->holders.load(std::memory_order_seq_cst) >> 1 == 0; };
        if (!poll_for(kJoinPoll, free))
            for (uint32_t v; (v = slot->holders.load(std::memory_order_acquire)) >> 1 != 0;) {
                if (!(v & 1) && !slot->holders.compare_exchange_weak(v, v | 1)) continue;
                futex_wait(&slot->holders, v | 1, std::chrono::milliseconds(10));
            }
        slot->holders.fetch_and(~uint32_t(1), std::memory_order_relaxed);
        slot->job.store(nullptr, std::memory_order_release);
        if (job.error) std::rethrow_exception(job.error);
        return true;
    }

private:
    // Works on every posted job with parts left; whether there was one.
    bool help() {
        bool found = false;
        for (Slot& s : slots_) {
            const Job* seen = s.job.load(std::memory_order_relaxed);
            if (seen == nullptr || seen == kClosing) continue;
            s.holders.fetch_add(2, std::memory_order_seq_cst);
            Job* job = s.job.load(std::memory_order_seq_cst);  // held: it stays until let go
            if (job != nullptr && job != kClosing &&
                job->next.load(std::memory_order_relaxed) < job->parts) {
                work(*job);
                found = true;
            }
            if (s.holders.fetch_sub(2, std::memory_order_acq_rel) == 3) futex_wake_all(&s.holders);
        }
        return found;
    }

    void serve() {
        for (;;) {
            const uint32_t seen = epoch_.load(std::memory_order_acquire);  // before the look
            if (help()) continue;
            if (poll_for(kIdlePoll, [&] { return epoch_.load(std::memory_order_acquire) != seen; }))
                continue;
            sleepers_.fetch_add(1, std::memory_order_seq_cst);
            if (epoch_.load(std::memory_order_seq_cst) == seen)
                futex_wait(&epoch_, seen, std::chrono::seconds(1));
            sleepers_.fetch_sub(1, std::memory_order_relaxed);
        }
    }

    Slot slots_[kSlots];
    alignas(64) std::atomic<uint32_t> epoch_{0};  // one more per job posted
    std::atomic<int> sleepers_{0};
    std::atomic<int> helpers_{0};
};

std::mutex made;                   // team_configure
std::atomic<Team*> team{nullptr};  // never destroyed: its helpers sleep in it

// A forked child has none of the helpers (nor perhaps a usable lock): it starts without a team.
void forget_team() {
    team.store(nullptr, std::memory_order_relaxed);
    detail::team_threads.store(1, std::memory_order_relaxed);
}

}  // namespace

void team_configure(int threads) {
    std::lock_guard lock(made);
    Team* t = team.load(std::memory_order_acquire);
    if (threads > 1 && !t) {
        static const bool registered = pthread_atfork(nullptr, nullptr, forget_team) == 0;
        (void)registered;
        t = new Team;
        team.store(t, std::memory_order_release);
    }
    if (t) t->grow(threads - 1);
    detail::team_threads.store(t ? std::max(1, std::min(threads, t->helpers() + 1)) : 1,
                               std::memory_order_release);
}

void team_run_parts(size_t parts, TeamPart part, bool wake) {
    Team* t = parts > 1 && team_size() > 1 ? team.load(std::memory_order_acquire) : nullptr;
    if (t && t->run(parts, part, wake)) return;
    std::exception_ptr error;  // as with a team: every part runs, the first error is rethrown
    for (size_t p = 0; p < parts; ++p) try {
            part.call(part.fn, p);
        } catch (...) {
            if (!error) error = std::current_exception();
        }
    if (error) std::rethrow_exception(error);
}

}  // namespace ccl
