#include "shm/wait.h"

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>

namespace ccl::shm {

namespace {

int usable_cpus() {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? int(n) : 1;
}

}  // namespace

WaitPolicy wait_policy(int local_ranks) {
    static const int cpus = usable_cpus();
    if (local_ranks <= cpus) return {4000, 200};
    return {64, 50};
}

void futex_wait(std::atomic<uint32_t>* word, uint32_t expected, std::chrono::nanoseconds timeout) {
    static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
    struct timespec ts;
    ts.tv_sec = time_t(timeout.count() / 1000000000);
    ts.tv_nsec = long(timeout.count() % 1000000000);
    // EAGAIN (value changed), EINTR and ETIMEDOUT all just send the caller back to its checks.
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t>* word) {
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

}  // namespace ccl::shm
