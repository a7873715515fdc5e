// libfabric is loaded only by a communicator with ranks on other nodes, and leaves the crash
// signals alone (src/transport/libfabric.h). One rank under cclrun:
//   fabric_loading single    every rank on one node: neither libfabric nor a PSM library
//                            (libpsm*, libinfinipath) is mapped, before ccl_comm_create nor after
//                            it and an allreduce (also where libfabric.so.1 cannot be loaded).
//   fabric_loading multi     ranks on several (fake) nodes: libfabric is mapped only after
//                            ccl_comm_create, the environment (IPATH_NO_BACKTRACE) is as it
//                            was, the allreduce is right.
//   fabric_loading missing   ranks on several nodes where libfabric.so.1 cannot be loaded:
//                            ccl_comm_create fails with CCL_ERROR_UNSUPPORTED naming it.
//   fabric_loading socket    ranks on several nodes over the socket transport: libfabric is
//                            never mapped, the transports are "shm+socket", the allreduce is
//                            right (also where libfabric.so.1 cannot be loaded).
// In every mode the dispositions of SIGSEGV, SIGBUS, SIGILL, SIGABRT, SIGINT and SIGTERM are as
// they were, and a deliberate SIGSEGV (a null write, in a forked child) kills the child by SIGSEGV,
// before and after ccl_comm_create: Debian's libinfinipath, when loaded without
// IPATH_NO_BACKTRACE, catches it, prints a backtrace and exits 1. Exits 0 when every check held.
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "ccl/ccl.h"

namespace {

int failures = 0;
int rank = -1;

void check(bool ok, const std::string& what) {
    if (!ok) ++failures;
    std::printf("rank %d: %s %s\n", rank, ok ? "ok  " : "FAIL", what.c_str());
}

// The mapped files of this process whose name contains `part`.
std::string mapped(const char* part) {
    std::ifstream maps("/proc/self/maps");
    std::string line, found;
    while (std::getline(maps, line)) {
        const size_t slash = line.find('/');
        if (slash == std::string::npos || line.find(part, slash) == std::string::npos) continue;
        const std::string file = line.substr(slash);
        if (found.find(file) == std::string::npos) found += (found.empty() ? "" : " ") + file;
    }
    return found;
}

void check_unmapped(const char* when) {
    for (const char* lib : {"libfabric", "libpsm", "libinfinipath"}) {
        const std::string m = mapped(lib);
        check(m.empty(),
              std::string(when) + ": no " + lib + " mapped" + (m.empty() ? "" : ": " + m));
    }
}

// The sanitizers catch SIGSEGV themselves (to report it), so the check means nothing there.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

// A child that writes through a null pointer must die by SIGSEGV (not exit, not hang).
void check_segv_kills(const char* when) {
    if (kSanitized) {
        std::printf("rank %d: skip %s: SIGSEGV check (a sanitizer handles SIGSEGV)\n", rank, when);
        return;
    }
    std::fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0) {
        const rlimit no_core{0, 0};
        setrlimit(RLIMIT_CORE, &no_core);
        *static_cast<volatile int*>(nullptr) = 1;
        _exit(0);
    }
    int st = 0;
    bool reaped = false;
    for (int i = 0; i < 1000 && !reaped; ++i) {  // 10 s: a handler that hangs is a failure too
        reaped = waitpid(pid, &st, WNOHANG) == pid;
        if (!reaped) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (!reaped) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
    }
    std::string how = !reaped           ? "still running after 10 s (killed)"
                      : WIFSIGNALED(st) ? std::string("signal ") + strsignal(WTERMSIG(st))
                      : WIFEXITED(st)   ? "exit code " + std::to_string(WEXITSTATUS(st))
                                        : "status " + std::to_string(st);
    check(reaped && WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV,
          std::string(when) + ": a null write kills by SIGSEGV (" + how + ")");
}

// A signal's handler (SIG_DFL, SIG_IGN or a function), as a pointer.
void* disposition(int sig) {
    struct sigaction a {};
    sigaction(sig, nullptr, &a);
    return (a.sa_flags & SA_SIGINFO) ? reinterpret_cast<void*>(a.sa_sigaction)
                                     : reinterpret_cast<void*>(a.sa_handler);
}

}  // namespace

int main(int argc, char** argv) {
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode != "single" && mode != "multi" && mode != "missing" && mode != "socket") {
        std::fprintf(stderr, "usage: fabric_loading single|multi|missing|socket (under cclrun)\n");
        return 2;
    }
    setvbuf(stdout, nullptr, _IOLBF, 0);
    rank = std::atoi(std::getenv("CCL_RANK") ? std::getenv("CCL_RANK") : "-1");
    const char* user_ipath = std::getenv("IPATH_NO_BACKTRACE");
    const std::string user_value = user_ipath ? user_ipath : "";
    const int kSignals[] = {SIGSEGV, SIGBUS, SIGILL, SIGABRT, SIGINT, SIGTERM};
    std::vector<void*> before;
    for (int sig : kSignals) before.push_back(disposition(sig));
    check_unmapped("before ccl_comm_create");
    check_segv_kills("before ccl_comm_create");

    ccl_comm_t comm = nullptr;
    const ccl_result_t r = ccl_comm_create_from_env(&comm);
    if (mode == "missing") {
        const std::string why = r == CCL_SUCCESS ? "" : ccl_last_error();
        check(r == CCL_ERROR_UNSUPPORTED && why.find("libfabric.so.1") != std::string::npos,
              std::string("ccl_comm_create across nodes without libfabric: \"") + ccl_strerror(r) +
                  "\": " + why);
        if (r == CCL_SUCCESS) ccl_comm_destroy(comm);
        check_segv_kills("after ccl_comm_create failed");
        return failures ? 1 : 0;
    }
    check(r == CCL_SUCCESS,
          std::string("ccl_comm_create: ") + (r == CCL_SUCCESS ? "success" : ccl_last_error()));
    if (r != CCL_SUCCESS) return 1;
    int size = 0, nodes = 0;
    char transports[64] = {};
    ccl_comm_size(comm, &size);
    ccl_comm_nodes(comm, &nodes, transports, sizeof(transports));
    check(mode == "single" ? nodes == 1 : nodes > 1,
          "the communicator spans " + std::to_string(nodes) + " node(s): " + transports);
    std::vector<float> a(1000, float(rank + 1)), b(a.size());
    const ccl_result_t ar =
        ccl_allreduce(a.data(), b.data(), a.size(), CCL_FLOAT32, CCL_SUM, comm, nullptr, nullptr);
    const float want = float(size) * float(size + 1) / 2;
    check(ar == CCL_SUCCESS && b[0] == want && b.back() == want, "allreduce");
    if (mode == "socket")
        check(std::string(transports) == "shm+socket",
              std::string("transports \"") + transports + "\", expected \"shm+socket\"");
    if (mode == "single" || mode == "socket") {
        check_unmapped("after ccl_comm_create and an allreduce");
    } else {
        check(!mapped("libfabric").empty(), "libfabric mapped after ccl_comm_create");
        // The environment as it was (setenv is not safe beside other threads).
        const char* now = std::getenv("IPATH_NO_BACKTRACE");
        check((now == nullptr) == (user_ipath == nullptr) && (!now || now == user_value),
              "IPATH_NO_BACKTRACE=" + std::string(now ? now : "(unset)") + ", was " +
                  (user_ipath ? user_value : std::string("(unset)")));
    }
    for (size_t i = 0; i < before.size(); ++i)
        check(
            disposition(kSignals[i]) == before[i],
            "signal " + std::to_string(kSignals[i]) + "'s disposition changed by ccl_comm_create");
    check_segv_kills("after ccl_comm_create");
    check(ccl_comm_destroy(comm) == CCL_SUCCESS, "ccl_comm_destroy");
    return failures ? 1 : 0;
}
