// How a rank waits for a peer's flag in shared memory: spin while that is cheap, then yield, then
// sleep on a futex, so that 8 ranks on 2 cores still make progress.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace ccl::shm {

struct WaitPolicy {
    int spins;   // polls with a pause between them before yielding
    int yields;  // sched_yield()s before sleeping on the futex
};

// Spinning only pays when every rank has a core of its own.
WaitPolicy wait_policy(int local_ranks);

// Sleeps while *word == expected, at most `timeout` (shared, not process-private, futex).
void futex_wait(std::atomic<uint32_t>* word, uint32_t expected, std::chrono::nanoseconds timeout);
void futex_wake_all(std::atomic<uint32_t>* word);

// Whether process `pid` still runs: false once it is gone or a zombie (dead, not yet reaped by its
// parent: a launcher that is slow to reap must not hide a dead peer).
bool process_alive(int pid);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

}  // namespace ccl::shm
