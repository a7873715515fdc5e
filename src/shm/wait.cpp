#include "shm/wait.h"

#include <linux/futex.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <signal.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace ccl::shm {

int usable_cpus() {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? int(n) : 1;
}

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

bool detect_asymmetric_fences() {
    constexpr long kNeed =
        MEMBARRIER_CMD_GLOBAL_EXPEDITED | MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED;
    const long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0);
    // Registered before this process publishes anything: from then on other processes' sleepers
    // reach it. A seccomp profile that forbids membarrier makes the query fail: full fences.
    if (cmds <= 0 || (cmds & kNeed) != kNeed ||
        syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0) != 0)
        return false;
    // A forked child inherits the decision; registering again makes sure that its new address
    // space is registered too.
    pthread_atfork(nullptr, nullptr,
                   [] { syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0); });
    return true;
}

void heavy_fence() {
    // The barrier cannot fail once registered (EINVAL/EPERM are decided at registration); were it
    // to, a fenceless publisher could be missed, and the sleep's bound (50 ms) would end the wait.
    if (!asymmetric_fences() || syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0) != 0)
        std::atomic_thread_fence(std::memory_order_seq_cst);
}

namespace {

// /proc/<pid>/stat after its command ("pid (comm) S ..."): the fields from the state on, which
// follow the last ')' (comm may hold anything); empty if the process is gone. `gone` tells a
// missing file (the process is gone) from one that cannot be read.
std::string stat_fields(int pid, bool* gone) {
    char buf[1024];
    const std::string path = "/proc/" + std::to_string(pid) + "/stat";
    FILE* f = std::fopen(path.c_str(), "r");
    *gone = !f && errno == ENOENT;
    if (!f) return {};
    size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
    std::fclose(f);
    buf[n] = '\0';
    std::string stat(buf);
    size_t close = stat.rfind(')');
    if (close == std::string::npos || close + 2 >= stat.size()) return {};
    return stat.substr(close + 2);
}

// The start time, the 20th field after the state (the stat file's 22nd).
uint64_t start_of(const std::string& fields) {
    const char* p = fields.c_str();
    for (int i = 0; i < 19 && p; ++i) {
        p = std::strchr(p, ' ');
        if (p) ++p;
    }
    return p ? std::strtoull(p, nullptr, 10) : 0;
}

}  // namespace

uint64_t process_start(int pid) {
    bool gone;
    return start_of(stat_fields(pid, &gone));
}

ProcessId this_process() { return {int32_t(::getpid()), process_start(::getpid())}; }

bool process_alive(int pid) { return process_alive(ProcessId{pid, 0}); }

bool process_alive(const ProcessId& p) {
    if (::kill(p.pid, 0) != 0 && errno == ESRCH) return false;
    bool gone;
    const std::string fields = stat_fields(p.pid, &gone);
    if (fields.empty()) return !gone;
    const char state = fields[0];
    if (state == 'Z' || state == 'X') return false;
    // Field 9, the kernel's task flags: PF_EXITING (0x4) is set from the start of exit, before
    // the memory goes (a peer read then fails with EFAULT) and long before the zombie.
    int ppid, pgrp, session, tty, tpgid;
    unsigned flags = 0;
    if (std::sscanf(fields.c_str() + 1, "%d %d %d %d %d %u", &ppid, &pgrp, &session, &tty, &tpgid,
                    &flags) == 6 &&
        (flags & 0x4u))
        return false;
    // A later process with the pid of a dead one is not it.
    return p.start == 0 || start_of(fields) == p.start;
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
