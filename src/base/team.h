// A rank's team: helper threads of the process that split the data movement of one large
// collective (copies, reductions, single-copy transfers) with the thread that makes the call, so
// that a rank owning many cores uses them all. One team per process, sized by the first
// communicator of a launch (CCL_RANK_THREADS; by default the cpus the rank owns on its node) and
// never destroyed: its helpers run inside the process's cpus (they inherit the affinity of the
// thread that made them), poll a moment after each job for the next one (so that the jobs of one
// collective, and of calls in a row, start without a system call), then sleep on a futex until a
// job large enough to be worth waking them (kTeamWakeBytes). Several threads may run jobs at once
// (threads sharing communicators, a progress worker): helpers take parts of whichever is posted.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>

namespace ccl {

// Sets the team's size: `threads` counting the caller (1: no helpers, every job runs on the caller
// alone). A larger size adds helpers; a smaller one leaves the extra helpers asleep.
void team_configure(int threads);
// Whether this thread's jobs go to the team (default: yes). A progress worker's do not: it runs
// nonblocking collectives while the application computes on the rank's cores, and helpers taking
// them would slow the application more than they speed the collective (a DDP step took twice as
// long: docs/tuning.md, "The rank's team"). A thread that waits for its request drives the rest
// of the collective itself (core/request.cpp), with the team.
void team_for_this_thread(bool on);

namespace detail {
extern std::atomic<int> team_threads;
extern thread_local bool team_here;
}  // namespace detail
// The threads a job this thread posts runs on (1 where there is no team, on a thread that does
// not use it, or after a fork: helpers are not inherited). Inline: every large copy and
// reduction of the data path asks.
inline int team_size() {
    return detail::team_here ? detail::team_threads.load(std::memory_order_relaxed) : 1;
}

// A part of a job: called with the part's number (a reference to the caller's callable, which
// outlives the job: no allocation per job).
struct TeamPart {
    void (*call)(const void* fn, size_t part);
    const void* fn;
};
void team_run_parts(size_t parts, TeamPart part, bool wake);

// Runs part(0) .. part(parts - 1), on this thread and the team's helpers at once; returns when all
// have ended and rethrows the first exception a part threw (the others still run). `wake`: whether
// sleeping helpers are worth waking for it (else this thread runs what no polling helper takes).
template <class Fn>
void team_run(size_t parts, const Fn& part, bool wake = true) {
    team_run_parts(
        parts, {[](const void* fn, size_t p) { (*static_cast<const Fn*>(fn))(p); }, &part}, wake);
}

// Bytes below which a part is not worth a helper (a job's cost to post and join is about a
// microsecond), and the bytes a job must move to wake sleeping helpers (a wake takes tens of
// microseconds on a virtual machine). docs/tuning.md, "The rank's team".
inline constexpr size_t kTeamPartBytes = size_t(32) << 10;
inline constexpr size_t kTeamWakeBytes = size_t(128) << 10;

// How many parts a job over `bytes` is cut into: up to the team's size, each at least
// kTeamPartBytes (1: run it whole, here).
inline size_t team_parts(size_t bytes) {
    if (bytes < 2 * kTeamPartBytes) return 1;
    return std::min(size_t(team_size()), bytes / kTeamPartBytes);
}

// Runs fn(p, begin, end) for the p-th of `parts` ranges of [0, n), cut at multiples of `granule`
// (empty ones skipped), over the team (`wake`: as team_run's).
template <class Fn>
void team_split(size_t n, size_t granule, size_t parts, bool wake, Fn&& fn) {
    if (n == 0) return;
    if (parts < 2) return fn(size_t(0), size_t(0), n);
    const size_t blocks = (n + granule - 1) / granule;
    team_run(
        parts,
        [&](size_t p) {
            const size_t b = std::min(n, blocks * p / parts * granule),
                         e = std::min(n, blocks * (p + 1) / parts * granule);
            if (e > b) fn(p, b, e);
        },
        wake);
}

// Runs fn(begin, end) over [0, n) cut into team_parts(n * unit) ranges at multiples of `granule`
// (elements of `unit` bytes): the whole range on this thread when one part suffices.
template <class Fn>
void team_for(size_t n, size_t unit, size_t granule, Fn&& fn) {
    team_split(n, granule, team_parts(n * unit), n * unit >= kTeamWakeBytes,
               [&](size_t, size_t b, size_t e) { fn(b, e); });
}

}  // namespace ccl
