#include "base/wait.h"

#include <fcntl.h>
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
#include <optional>
#include <string>

namespace ccl {

int usable_cpus() {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? int(n) : 1;
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

// Fields 3 (state), 9 (flags) and 22 (start time) of /proc/<pid>/stat, or nothing if there is no
// such process here. `unreadable` is set where it exists but cannot be read.
struct Stat {
    char state = '?';
    unsigned long flags = 0;
    uint64_t start = 0;
};
std::optional<Stat> read_stat(int32_t pid, bool* unreadable) {
    *unreadable = false;
    char path[32];
    std::snprintf(path, sizeof path, "/proc/%d/stat", int(pid));
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        *unreadable = errno != ENOENT && errno != ESRCH;
        return std::nullopt;
    }
    char buf[1024];
    const ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
    ::close(fd);
    if (n <= 0) {  // it went between the open and the read
        *unreadable = n < 0 && errno != ESRCH;
        return std::nullopt;
    }
    buf[n] = '\0';
    // "pid (comm) S ...": the fields follow the last ')' (comm may hold anything).
    const char* p = std::strrchr(buf, ')');
    if (!p || p[1] != ' ') {
        *unreadable = true;
        return std::nullopt;
    }
    Stat st;
    st.state = p[2];
    p += 3;
    for (int field = 4; field <= 22 && *p; ++field) {
        char* end = nullptr;
        const unsigned long long v = std::strtoull(p, &end, 10);
        if (end == p) break;
        if (field == 9) st.flags = static_cast<unsigned long>(v);
        if (field == 22) st.start = v;
        p = end;
    }
    return st;
}

}  // namespace

ProcessId this_process() {
    bool unreadable = false;
    const auto st = read_stat(int32_t(::getpid()), &unreadable);
    return {int32_t(::getpid()), st ? st->start : 0};
}

bool process_alive(int pid) { return process_alive(ProcessId{pid, 0}); }

char process_state(int pid) {
    bool unreadable = false;
    const auto st = pid > 0 ? read_stat(pid, &unreadable) : std::nullopt;
    return st ? st->state : '?';
}

bool process_alive(const ProcessId& p) {
    if (p.pid <= 0) return false;
    bool unreadable = false;
    const auto st = read_stat(p.pid, &unreadable);
    if (!st) return unreadable || (::kill(p.pid, 0) != 0 && errno == EPERM);
    if (p.start != 0 && st->start != p.start) return false;  // a later process with its pid
    // A zombie (dead, not yet reaped by its parent: a launcher slow to reap must not hide a dead
    // peer) or one already exiting (PF_EXITING: set from the start of exit, before the memory
    // goes, a peer read then failing with EFAULT) holds nothing any more.
    return st->state != 'Z' && st->state != 'X' && !(st->flags & 0x4u);
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

}  // namespace ccl
