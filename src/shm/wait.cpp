#include "shm/wait.h"

namespace ccl::shm {

WaitPolicy wait_policy(int local_ranks, int node_cpus, std::chrono::microseconds poll_time) {
    static const int own = usable_cpus();
    if (local_ranks <= (node_cpus > 0 ? node_cpus : own)) return {4000, 200, poll_time, true};
    // More ranks than cpus: no spinning at all, the core goes at once to whoever may need it (the
    // rank waited for may be on this very core): a few polls first cost about half of every small
    // call (docs/tuning.md, "Constants of the data path").
    return {0, 50, std::chrono::microseconds(0), false};
}

}  // namespace ccl::shm
