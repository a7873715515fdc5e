// The low-level waits every floor uses: futexes, the fences of the Dekker handshakes (asymmetric
// where the kernel allows), a spin's pause, and whether a process still runs.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace ccl {

// The cpus this process may run on (its affinity).
int usable_cpus();

// Sleeps while *word == expected, at most `timeout` (shared, not process-private, futex).
void futex_wait(std::atomic<uint32_t>* word, uint32_t expected, std::chrono::nanoseconds timeout);
void futex_wake_all(std::atomic<uint32_t>* word);

// Publishing a value a peer may sleep on takes a full fence between the store and the look at
// the sleepers' count (Dekker): otherwise a sleeper that counted itself just then could miss the
// value and sleep through it. That fence waits for the store's cache line to come over from the
// peer polling it, on the path of every small call. Where the kernel has an expedited global
// membarrier, the sleepers pay instead (asymmetric fences): a process registered for it publishes
// with a plain store, and a sleeper forces a fence on every running registered process before its
// last look. Decided once per process; a sleeper without it still wakes within its bounded sleep.
bool detect_asymmetric_fences();
inline bool asymmetric_fences() {
    static const bool on = detect_asymmetric_fences();
    return on;
}
// The sleeper's side: after counting itself among the sleepers, before its last look.
void heavy_fence();
// The publisher's side: orders its store before its next load, for free where the other side
// pays with heavy_fence, else with a full fence.
inline void light_fence() {
    if (asymmetric_fences())
        std::atomic_signal_fence(std::memory_order_seq_cst);  // the compiler keeps the order
    else
        std::atomic_thread_fence(std::memory_order_seq_cst);
}

// A process, told apart from any later one that reuses its pid by its start time (clock ticks
// after boot: /proc/<pid>/stat's 22nd field; 0: unknown, the pid alone tells), within this
// process's pid namespace.
struct ProcessId {
    int32_t pid = 0;
    uint64_t start = 0;
};
ProcessId this_process();

// Whether the process still runs: its pid names a process that started when it did (a thread's id
// counts too) and is neither a zombie (dead, not yet reaped by its parent: a launcher that is
// slow to reap must not hide a dead peer) nor exiting. Where /proc cannot tell (another user's
// process hidden from this one), it counts as running.
bool process_alive(const ProcessId& p);
bool process_alive(int pid);  // by the pid alone
// The state letter of /proc/<pid>/stat (R, S, D, T, t, Z, ...), or '?' where it cannot be read.
char process_state(int pid);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

}  // namespace ccl
