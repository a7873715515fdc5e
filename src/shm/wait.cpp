#include "shm/wait.h"

namespace ccl::shm {

WaitPolicy wait_policy(int local_ranks, int node_cpus, std::chrono::microseconds poll_time) {
    static const int own = usable_cpus();
    if (local_ranks <= (node_cpus > 0 ? node_cpus : own)) return {4000, 200, poll_time, true};
    // More ranks than cpus: no spinning at all, the core goes at once to whoever may need it (the
    // rank waited for may be on this very core). 64 polls first cost about half of every small
    // call (2-core AMD VM, alternating launches, medians, us, 64 polls / none: 4 ranks, alltoall
    // 16 B 4.44 / 2.75, reduce_scatter 16 B 4.74 / 2.32, sendrecv 16 B 2.19 / 1.61, barrier 3.46 /
    // 2.42; 8 ranks, allreduce 16 B 10.2 / 6.2, barrier 12.6 / 6.1); 4 polls measured the same.
    return {0, 50, std::chrono::microseconds(0), false};
}

}  // namespace ccl::shm
