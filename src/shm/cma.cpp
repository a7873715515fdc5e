#include "shm/cma.h"

#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "shm/wait.h"

namespace ccl::shm {

namespace {

using Transfer = ssize_t (*)(pid_t, const iovec*, unsigned long, const iovec*, unsigned long,
                             unsigned long);

// The kernel may copy less than asked (at most about 1 GiB per call, or up to a bad page): loop.
void transfer(Transfer fn, const char* what, pid_t pid, void* local, void* remote, size_t bytes) {
    size_t done = 0;
    while (done < bytes) {
        iovec l{static_cast<char*>(local) + done, bytes - done};
        iovec r{static_cast<char*>(remote) + done, bytes - done};
        ssize_t n = fn(pid, &l, 1, &r, 1, 0);
        if (n > 0) {
            done += size_t(n);
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        int err = n < 0 ? errno : EFAULT;
        // A peer that is exiting (killed mid-transfer) gives EFAULT rather than ESRCH; give
        // its exit a moment to show before calling the failure a system error.
        bool dead = err == ESRCH || !process_alive(pid);
        for (int i = 0; !dead && err == EFAULT && i < 20; ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
            dead = !process_alive(pid);
        }
        throw Error(dead ? CCL_ERROR_PEER_FAILURE : CCL_ERROR_SYSTEM,
                    std::string(what) + " of " + std::to_string(bytes) + " bytes with pid " +
                        std::to_string(pid) + " failed: " + std::strerror(err) +
                        (dead ? " (that rank died)" : ""));
    }
}

}  // namespace

void cma_read(pid_t pid, void* local, const void* remote, size_t bytes) {
    transfer(::process_vm_readv, "process_vm_readv", pid, local, const_cast<void*>(remote), bytes);
}

void cma_write(pid_t pid, void* remote, const void* local, size_t bytes) {
    transfer(::process_vm_writev, "process_vm_writev", pid, const_cast<void*>(local), remote,
             bytes);
}

double cma_probe(pid_t pid, const void* remote, size_t bytes) {
    std::vector<char> buf(bytes);
    iovec l{buf.data(), bytes}, r{const_cast<void*>(remote), bytes};
    double best = -1;
    for (int i = 0; i < 64; ++i) {
        auto t0 = std::chrono::steady_clock::now();
        if (::process_vm_readv(pid, &l, 1, &r, 1, 0) != ssize_t(bytes)) return -1;
        double ns =
            std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
        if (best < 0 || ns < best) best = ns;
    }
    return best;
}

size_t cma_min_bytes(double probe_ns) {
    const int shift = int(std::lround((probe_ns - 800) / 275));
    return (size_t(8) << 10) << std::clamp(shift + 1, 0, 6);  // 16 KiB at shift 0
}

}  // namespace ccl::shm
