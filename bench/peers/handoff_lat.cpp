// handoff_lat: what it costs to pass a core from one process to another, the floor under every
// collective with more ranks than cores (each call must run every rank at least once). Two
// processes take turns on a shared counter: on one core by sched_yield() and by futex, and on two
// cores by futex (a wake-up of a sleeping process on another cpu).
//
//   build/handoff_lat [turns]        (default 100000)
#include <linux/futex.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <new>

namespace {

enum class Way { yield, futex };

void futex_wait(std::atomic<int>* word, int expected) {
    syscall(SYS_futex, reinterpret_cast<int*>(word), FUTEX_WAIT, expected, nullptr, nullptr, 0);
}
void futex_wake(std::atomic<int>* word) {
    syscall(SYS_futex, reinterpret_cast<int*>(word), FUTEX_WAKE, 1, nullptr, nullptr, 0);
}

bool pin(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity(0, sizeof(set), &set) == 0;
}

// Microseconds per handoff, or a negative number when the cpus cannot be had.
double measure(Way way, int cpu0, int cpu1, int turns) {
    void* mem = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) return -1;
    auto* turn = new (mem) std::atomic<int>(0);
    const auto start = std::chrono::steady_clock::now();
    const pid_t child = fork();
    const int me = child == 0 ? 1 : 0;
    bool ok = pin(me ? cpu1 : cpu0);
    for (int i = 0; ok && i < turns; ++i) {
        int v;
        while ((v = turn->load()) != 2 * i + me) {
            if (way == Way::yield)
                sched_yield();
            else
                futex_wait(turn, v);
        }
        turn->store(2 * i + me + 1);
        if (way == Way::futex) futex_wake(turn);
    }
    if (child == 0) _exit(ok ? 0 : 1);
    int status = 0;
    waitpid(child, &status, 0);
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    munmap(mem, 4096);
    if (!ok || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1;
    return us / (2.0 * turns);
}

}  // namespace

int main(int argc, char** argv) {
    const int turns = argc > 1 ? std::atoi(argv[1]) : 100000;
    if (turns <= 0) {
        std::fprintf(stderr, "usage: handoff_lat [turns > 0]\n");
        return 2;
    }
    std::printf("# one handoff between two processes, us (%d turns each way)\n", turns);
    const struct {
        const char* name;
        Way way;
        int cpu1;
    } cases[] = {{"one core, sched_yield", Way::yield, 0},
                 {"one core, futex", Way::futex, 0},
                 {"two cores, futex", Way::futex, 1}};
    for (const auto& c : cases) {
        const double us = measure(c.way, 0, c.cpu1, turns);
        if (us < 0)
            std::printf("%-22s  (cpus 0 and %d not available)\n", c.name, c.cpu1);
        else
            std::printf("%-22s %8.3f\n", c.name, us);
    }
    return 0;
}
