// Prints, once its first communicator exists, the cpus of this rank's main thread and of a thread
// it started before (as a framework's thread pool would be), one line per rank:
// "rank R main LIST thread LIST team T" (LIST in the kernel's list format; T the threads of the
// rank's team, ccl_comm_threads). bind_check.sh compares them.
#include <pthread.h>
#include <sched.h>

#include <cstdio>
#include <string>
#include <thread>

#include "ccl/ccl.h"

namespace {

std::string cpus(pthread_t t) {
    cpu_set_t set;
    if (pthread_getaffinity_np(t, sizeof(set), &set) != 0) return "?";
    std::string s;
    for (int c = 0; c < CPU_SETSIZE; ++c) {
        if (!CPU_ISSET(c, &set)) continue;
        int last = c;
        while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, &set)) ++last;
        s += (s.empty() ? "" : ",") + std::to_string(c) +
             (last > c ? "-" + std::to_string(last) : "");
        c = last;
    }
    return s;
}

}  // namespace

int main() {
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&mu);
    std::thread pool([&] {  // parked until the end
        pthread_mutex_lock(&mu);
        pthread_mutex_unlock(&mu);
    });
    ccl_comm_t comm = nullptr;
    if (ccl_comm_create_from_env(&comm) != CCL_SUCCESS) {
        std::fprintf(stderr, "bind_check: %s\n", ccl_last_error());
        pthread_mutex_unlock(&mu);
        pool.join();
        return 1;
    }
    int rank = -1, team = 0;
    ccl_comm_rank(comm, &rank);
    ccl_comm_threads(comm, &team);
    std::printf("rank %d main %s thread %s team %d\n", rank, cpus(pthread_self()).c_str(),
                cpus(pool.native_handle()).c_str(), team);
    std::fflush(stdout);
    pthread_mutex_unlock(&mu);
    pool.join();
    const ccl_result_t r = ccl_barrier(comm, nullptr);
    ccl_comm_destroy(comm);
    return r == CCL_SUCCESS ? 0 : 1;
}
