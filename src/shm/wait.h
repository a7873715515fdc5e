// How a rank waits for a peer's flag in shared memory: spin while that is cheap, then yield, then
// sleep on a futex, so that 8 ranks on 2 cores still make progress.
#pragma once

#include <chrono>

#include "base/wait.h"

namespace ccl::shm {

struct WaitPolicy {
    int spins;   // polls with a pause between them before yielding
    int yields;  // sched_yield()s before sleeping on the futex, at least
    // and, after the spins, for at least this long (CCL_POLL_TIME_US, when own_core): a rank
    // that sleeps leaves its cpu idle, and on a virtual machine waking an idle cpu can take
    // milliseconds when the host is busy; the peers then wait long enough to sleep too, and every
    // later call pays a wake-up (16-core host: 1-3 ms a call instead of 1.5 us, for whole runs).
    std::chrono::microseconds poll_time{0};
    bool own_core = false;  // every rank has a core of its own: spinning costs nobody
};

// Spinning only pays when every rank has a core of its own: `node_cpus` the node's ranks may run
// on together (Topology::node_cpus), or 0 for this process's own cpus. `poll_time` applies then.
WaitPolicy wait_policy(int local_ranks, int node_cpus = 0,
                       std::chrono::microseconds poll_time = std::chrono::microseconds(0));

}  // namespace ccl::shm
