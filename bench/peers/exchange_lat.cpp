// exchange_lat: the floor under a small allreduce between two ranks. Two processes on two cores
// each publish N bytes and read the other's N bytes, call after call, through shared memory with
// nothing else in the way (no library, no checks, no reduction): no 2-rank allreduce of N bytes
// can take less per call than this exchange. Two ways of saying "here it is":
//   flag: the data, then a sequence number in a line of its own (the reader polls the flag, then
//         reads the data lines; the shape of ccl's lane rounds);
//   line: a sequence number in every cache line beside 56 bytes of data (the reader polls each
//         line; the data crosses with the news of it, the shape of ccl's eager slots and of
//         NCCL's LL128 protocol).
// Slots rotate among 64, as ccl's lanes do, so a writer never waits for its reader.
//
//   build/exchange_lat [calls]        (default 200000; on cpus 0 and 1)
#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

constexpr size_t kSlots = 64, kMaxBytes = 4096, kLineData = 56;
// A slot: a flag line, then room for the data (flag way) or for lines of 56 bytes + a seq.
constexpr size_t kSlotBytes = 64 + (kMaxBytes / kLineData + 1) * 64;

enum class Way { flag, line };

bool pin(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity(0, sizeof(set), &set) == 0;
}

std::atomic<uint64_t>& seq_of(char* line) {  // the last 8 bytes of a line
    return *reinterpret_cast<std::atomic<uint64_t>*>(line + kLineData);
}

void publish(Way way, char* slot, const char* data, size_t bytes, uint64_t seq) {
    if (way == Way::flag) {
        std::memcpy(slot + 64, data, bytes);
        reinterpret_cast<std::atomic<uint64_t>*>(slot)->store(seq, std::memory_order_release);
        return;
    }
    for (size_t at = 0, line = 0; at < bytes || line == 0; at += kLineData, ++line) {
        char* l = slot + 64 * (line + 1);
        std::memcpy(l, data + at, std::min(kLineData, bytes - at));
        seq_of(l).store(seq, std::memory_order_release);
    }
}

void receive(Way way, char* slot, char* out, size_t bytes, uint64_t seq) {
    if (way == Way::flag) {
        auto* flag = reinterpret_cast<std::atomic<uint64_t>*>(slot);
        while (flag->load(std::memory_order_acquire) != seq) {
        }
        std::memcpy(out, slot + 64, bytes);
        return;
    }
    for (size_t at = 0, line = 0; at < bytes || line == 0; at += kLineData, ++line) {
        char* l = slot + 64 * (line + 1);
        while (seq_of(l).load(std::memory_order_acquire) != seq) {
        }
        std::memcpy(out + at, l, std::min(kLineData, bytes - at));
    }
}

// Microseconds per call (each side publishing and receiving once), or negative when the cpus
// cannot be had.
double measure(Way way, size_t bytes, int calls) {
    const size_t total = 2 * kSlots * kSlotBytes;
    void* mem = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) return -1;
    std::memset(mem, 0, total);
    char* base = static_cast<char*>(mem);
    const pid_t child = fork();
    const int me = child == 0 ? 1 : 0;
    bool ok = pin(me);
    char in[kMaxBytes], out[kMaxBytes];
    std::memset(in, me + 1, sizeof in);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; ok && i < calls; ++i) {
        char* mine = base + (size_t(me) * kSlots + size_t(i) % kSlots) * kSlotBytes;
        char* theirs = base + (size_t(1 - me) * kSlots + size_t(i) % kSlots) * kSlotBytes;
        publish(way, mine, in, bytes, uint64_t(i) + 1);
        receive(way, theirs, out, bytes, uint64_t(i) + 1);
        in[0] = out[bytes ? bytes - 1 : 0];  // the next call depends on this one's data
    }
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    if (child == 0) _exit(ok ? 0 : 1);
    int status = 0;
    waitpid(child, &status, 0);
    munmap(mem, total);
    if (!ok || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1;
    return us / calls;
}

}  // namespace

int main(int argc, char** argv) {
    const int calls = argc > 1 ? std::atoi(argv[1]) : 200000;
    if (calls <= 0) {
        std::fprintf(stderr, "usage: exchange_lat [calls > 0]\n");
        return 2;
    }
    std::printf("# two processes on cpus 0 and 1 exchange N bytes, us per call (%d calls)\n",
                calls);
    std::printf("%8s %10s %10s\n", "bytes", "flag", "line");
    for (size_t bytes : {8, 64, 256, 512, 1024, 4096}) {
        const double flag = measure(Way::flag, bytes, calls),
                     line = measure(Way::line, bytes, calls);
        if (flag < 0 || line < 0) {
            std::printf("(cpus 0 and 1 not available)\n");
            return 1;
        }
        std::printf("%8zu %10.3f %10.3f\n", bytes, flag, line);
    }
    return 0;
}
