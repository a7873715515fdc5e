// Fault injection without a launcher in the way: this program serves (or starts) the KVS, starts
// the ranks itself (fork + exec of itself, with rank, size and the KVS address in the
// environment), injects the fault and checks what the survivors do. cclrun stops every rank as
// soon as one dies, which would hide whether the survivors notice by themselves.
//
//   ccl_fault kill N [coll...]      SIGKILL one rank in the middle of a loop of each collective:
//                                   every survivor fails with CCL_ERROR_PEER_FAILURE or
//                                   CCL_ERROR_TIMEOUT within CCL_TIMEOUT + 2 s of the kill
//                                   (FAULT_LIMIT seconds, when set), destroys its communicator
//                                   and exits. group_alltoall: four alltoalls in one group, one
//                                   call.
//   ccl_fault absent N              one rank (first the last, then rank 0) never arrives: the
//                                   others' ccl_comm_create fails with CCL_ERROR_TIMEOUT within
//                                   CCL_KVS_TIMEOUT + 2 s.
//   ccl_fault server-dies N         the process serving the KVS is killed while the ranks wait in
//                                   bootstrap: they fail within CCL_KVS_TIMEOUT + 2 s.
//
// Every case also checks that no rank process is left (no hang, no zombie) and that nothing the
// job created is left in /dev/shm (segment names carry their creator's pid). Exit status 0 when
// every case passed.
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "ccl/ccl.h"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
}

double env_seconds(const char* name, double fallback) {
    const char* v = std::getenv(name);
    return v && *v ? std::atof(v) : fallback;
}

const char* const kColls[] = {"allreduce_small", "allreduce_large", "broadcast", "reduce",
                              "allgather",       "reduce_scatter",  "alltoall",  "sendrecv",
                              "barrier",         "group_alltoall"};

// ---------------------------------------------------------------------------------------------
// Rank side.

// One call of collective `coll` (the same on every rank, with a fixed size).
ccl_result_t run_once(const std::string& coll, ccl_comm_t comm, int rank, int size,
                      std::vector<float>& a, std::vector<float>& b) {
    if (coll == "allreduce_small")
        return ccl_allreduce(a.data(), b.data(), 256, CCL_FLOAT32, CCL_SUM, comm, nullptr, nullptr);
    if (coll == "allreduce_large")
        return ccl_allreduce(a.data(), b.data(), a.size(), CCL_FLOAT32, CCL_SUM, comm, nullptr,
                             nullptr);
    if (coll == "broadcast")
        return ccl_broadcast(a.data(), a.size(), CCL_FLOAT32, 0, comm, nullptr, nullptr);
    if (coll == "reduce")
        return ccl_reduce(a.data(), b.data(), a.size(), CCL_FLOAT32, CCL_SUM, 0, comm, nullptr,
                          nullptr);
    const size_t block = a.size() / size_t(size);
    if (coll == "allgather")
        return ccl_allgather(a.data(), b.data(), block, CCL_FLOAT32, comm, nullptr, nullptr);
    if (coll == "reduce_scatter")
        return ccl_reduce_scatter(a.data(), b.data(), block, CCL_FLOAT32, CCL_SUM, comm, nullptr,
                                  nullptr);
    if (coll == "alltoall")
        return ccl_alltoall(a.data(), b.data(), block, CCL_FLOAT32, comm, nullptr, nullptr);
    if (coll == "sendrecv") {  // a ring: right, then from the left
        ccl_result_t r = ccl_send(a.data(), block, CCL_FLOAT32, (rank + 1) % size, comm, nullptr);
        if (r != CCL_SUCCESS) return r;
        return ccl_recv(b.data(), block, CCL_FLOAT32, (rank + size - 1) % size, comm, nullptr);
    }
    if (coll == "barrier") return ccl_barrier(comm, nullptr);
    if (coll == "group_alltoall") {  // one call of four: one deadline for all of them
        ccl_group_start();
        for (int k = 0; k < 4; ++k)
            ccl_alltoall(a.data(), b.data(), block, CCL_FLOAT32, comm, nullptr, nullptr);
        return ccl_group_end();
    }
    std::fprintf(stderr, "unknown collective %s\n", coll.c_str());
    std::exit(2);
}

// Exit statuses of a rank.
constexpr int kOk = 0, kWrongError = 3, kNoFailure = 4, kSetupFailed = 5;

int rank_main() {
    const int rank = std::atoi(std::getenv("FAULT_RANK"));
    const int size = std::atoi(std::getenv("FAULT_SIZE"));
    const std::string mode = std::getenv("FAULT_MODE");
    const std::string coll = std::getenv("FAULT_COLL") ? std::getenv("FAULT_COLL") : "";
    const int victim = std::getenv("FAULT_VICTIM") ? std::atoi(std::getenv("FAULT_VICTIM")) : -1;
    const int pipe_fd = std::getenv("FAULT_PIPE") ? std::atoi(std::getenv("FAULT_PIPE")) : -1;
    ccl_kvs_t kvs = nullptr;
    if (ccl_kvs_connect(std::getenv("FAULT_KVS"), &kvs) != CCL_SUCCESS) {
        std::fprintf(stderr, "rank %d: ccl_kvs_connect: %s\n", rank, ccl_last_error());
        return mode == "kill" ? kSetupFailed : kOk;  // the server may be gone already
    }
    ccl_comm_t comm = nullptr;
    auto start = Clock::now();
    ccl_result_t r = ccl_comm_create(size, rank, kvs, &comm);
    if (mode != "kill") {
        // Bootstrap faults: creation must fail, in time, with a clear error.
        double took = seconds_since(start), limit = env_seconds("CCL_KVS_TIMEOUT", 60) + 2;
        std::printf("rank %d: ccl_comm_create returned \"%s\" after %.2f s: %s\n", rank,
                    ccl_strerror(r), took, ccl_last_error());
        ccl_kvs_destroy(kvs);
        if (r == CCL_SUCCESS) {
            ccl_comm_destroy(comm);
            return kNoFailure;
        }
        if (took > limit) {
            std::printf("rank %d: FAIL: took longer than %.1f s\n", rank, limit);
            return kWrongError;
        }
        if (mode == "absent" && r != CCL_ERROR_TIMEOUT) return kWrongError;
        return kOk;
    }
    if (r != CCL_SUCCESS) {
        std::fprintf(stderr, "rank %d: ccl_comm_create: %s\n", rank, ccl_last_error());
        return kSetupFailed;
    }
    std::vector<float> a(size_t(1) << 20, float(rank)), b(a.size());  // 4 MiB each
    bool told = false;
    Clock::time_point failed_at{};
    for (long i = 0;; ++i) {
        r = run_once(coll, comm, rank, size, a, b);
        if (r != CCL_SUCCESS) {
            failed_at = Clock::now();
            break;
        }
        if (rank == victim && !told) {  // running: the harness may kill it now
            told = true;
            if (write(pipe_fd, "x", 1) != 1) return kSetupFailed;
        }
        if (seconds_since(start) > 60) {
            std::printf("rank %d: FAIL: %s went on for 60 s after the kill\n", rank, coll.c_str());
            return kNoFailure;
        }
    }
    const std::string why = ccl_last_error();
    int status = kOk;
    if (r != CCL_ERROR_PEER_FAILURE && r != CCL_ERROR_TIMEOUT) {
        std::printf("rank %d: FAIL: %s returned \"%s\": %s\n", rank, coll.c_str(), ccl_strerror(r),
                    why.c_str());
        status = kWrongError;
    }
    // The communicator is broken now: later calls fail at once, the async error says why.
    ccl_result_t again = run_once(coll, comm, rank, size, a, b), async = CCL_SUCCESS;
    ccl_comm_get_async_error(comm, &async);
    if (again == CCL_SUCCESS || async == CCL_SUCCESS) {
        std::printf(
            "rank %d: FAIL: after the failure, a call returned \"%s\" and the async "
            "error is \"%s\"\n",
            rank, ccl_strerror(again), ccl_strerror(async));
        status = kWrongError;
    }
    ccl_result_t destroyed = ccl_comm_destroy(comm);
    if (destroyed != CCL_SUCCESS) {
        std::printf("rank %d: FAIL: ccl_comm_destroy: %s\n", rank, ccl_last_error());
        status = kWrongError;
    }
    ccl_kvs_destroy(kvs);
    std::printf("rank %d: %s failed with \"%s\", communicator destroyed %.0f ms later: %s\n", rank,
                coll.c_str(), ccl_strerror(r),
                std::chrono::duration<double, std::milli>(Clock::now() - failed_at).count(),
                why.c_str());
    return status;
}

// The KVS server of the server-dies case, in a process of its own.
int server_main() {
    ccl_kvs_t kvs = nullptr;
    char address[CCL_KVS_ADDRESS_MAX];
    if (ccl_kvs_create_main(&kvs) != CCL_SUCCESS ||
        ccl_kvs_get_address(kvs, address, sizeof(address)) != CCL_SUCCESS)
        return kSetupFailed;
    const int fd = std::atoi(std::getenv("FAULT_PIPE"));
    size_t len = std::strlen(address) + 1;
    if (write(fd, address, len) != ssize_t(len)) return kSetupFailed;
    for (;;) pause();  // until SIGKILL
}

// ---------------------------------------------------------------------------------------------
// Harness side.

struct Job {
    std::vector<pid_t> pids;  // by rank; -1: not started
    int pipe_read = -1;
};

std::string self_exe() {
    char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
    if (n <= 0) {
        std::perror("readlink /proc/self/exe");
        std::exit(2);
    }
    return std::string(buf, size_t(n));
}

// Starts this program with `env` added to the environment; `keep_fd` stays open in the child.
pid_t spawn(const std::map<std::string, std::string>& env) {
    static const std::string exe = self_exe();
    std::vector<std::string> strings;
    for (char** e = environ; *e; ++e) strings.emplace_back(*e);
    for (const auto& [k, v] : env) strings.push_back(k + "=" + v);
    std::vector<char*> envp, argv{const_cast<char*>(exe.c_str()), nullptr};
    for (auto& s : strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    pid_t pid = fork();
    if (pid < 0) {
        std::perror("fork");
        std::exit(2);
    }
    if (pid == 0) {
        execve(exe.c_str(), argv.data(), envp.data());
        _exit(127);
    }
    return pid;
}

// Reaps every pid in `pids` (status by pid), waiting until `deadline`; those still running then
// are SIGKILLed, reaped and reported as hung. Returns false if any hung.
bool reap(const std::vector<pid_t>& pids, Clock::time_point deadline, std::map<pid_t, int>& status,
          std::map<pid_t, double>& exit_s, Clock::time_point t0) {
    size_t left = 0;
    for (pid_t p : pids)
        if (p > 0 && !status.count(p)) ++left;
    while (left > 0 && Clock::now() < deadline) {
        int st = 0;
        pid_t p = waitpid(-1, &st, WNOHANG);
        if (p > 0) {
            status[p] = st;
            exit_s[p] = seconds_since(t0);
            --left;
        } else {
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
    }
    bool ok = left == 0;
    for (pid_t p : pids)
        if (p > 0 && !status.count(p)) {
            std::printf(
                "FAIL: pid %d still running at the deadline (too slow, or a hang): killed\n", p);
            kill(p, SIGKILL);
            int st = 0;
            waitpid(p, &st, 0);
            status[p] = st;
            exit_s[p] = seconds_since(t0);
        }
    return ok;
}

// The names in /dev/shm now.
std::set<std::string> shm_names() {
    std::set<std::string> names;
    if (DIR* d = opendir("/dev/shm")) {
        while (dirent* e = readdir(d)) names.insert(e->d_name);
        closedir(d);
    }
    return names;
}

// Names in /dev/shm made by any of `pids` (ccl names segments "ccl-<creator pid>-...") that were
// not there `before` the case (a name an earlier process of the same pid left, pids wrapping, is
// not this case's); removes them so that one failure does not spill into later cases.
bool shm_clean(const std::vector<pid_t>& pids, const std::set<std::string>& before) {
    bool clean = true;
    std::vector<std::string> left;
    for (const std::string& name : shm_names()) {
        if (before.count(name)) continue;
        for (pid_t p : pids)
            if (p > 0 && name.rfind("ccl-" + std::to_string(p) + "-", 0) == 0) left.push_back(name);
    }
    for (const auto& name : left) {
        std::printf("FAIL: left in /dev/shm: %s\n", name.c_str());
        shm_unlink(("/" + name).c_str());
        clean = false;
    }
    return clean;
}

bool no_children_left() {
    int st = 0;
    pid_t p = waitpid(-1, &st, WNOHANG);
    if (p == -1 && errno == ECHILD) return true;
    std::printf("FAIL: a child process is left (pid %d)\n", p);
    return false;
}

bool exited_ok(int st) { return WIFEXITED(st) && WEXITSTATUS(st) == kOk; }

std::string describe(int st) {
    if (WIFEXITED(st)) return "exit " + std::to_string(WEXITSTATUS(st));
    if (WIFSIGNALED(st)) return std::string("signal ") + strsignal(WTERMSIG(st));
    return "status " + std::to_string(st);
}

std::string kvs_address(ccl_kvs_t kvs) {
    char address[CCL_KVS_ADDRESS_MAX];
    if (ccl_kvs_get_address(kvs, address, sizeof(address)) != CCL_SUCCESS) std::exit(2);
    return address;
}

std::map<std::string, std::string> rank_env(const std::string& mode, int rank, int n,
                                            const std::string& address) {
    // FAULT_PPN: fake nodes of that many ranks each (CCL_NODE_ID), joined by libfabric.
    if (const char* ppn_text = std::getenv("FAULT_PPN")) {
        const int ppn = std::max(1, std::atoi(ppn_text));
        return {{"FAULT_ROLE", "rank"},
                {"FAULT_MODE", mode},
                {"FAULT_RANK", std::to_string(rank)},
                {"FAULT_SIZE", std::to_string(n)},
                {"FAULT_KVS", address},
                {"CCL_NODE_ID", "node" + std::to_string(rank / ppn)},
                {"LOCAL_RANK", std::to_string(rank % ppn)},
                {"LOCAL_WORLD_SIZE", std::to_string(ppn)},
                {"CCL_PROCESS_LAUNCHER", "none"}};
    }
    return {{"FAULT_ROLE", "rank"},
            {"FAULT_MODE", mode},
            {"FAULT_RANK", std::to_string(rank)},
            {"FAULT_SIZE", std::to_string(n)},
            {"FAULT_KVS", address},
            {"LOCAL_RANK", std::to_string(rank)},
            {"LOCAL_WORLD_SIZE", std::to_string(n)},
            {"CCL_PROCESS_LAUNCHER", "none"}};
}

bool kill_case(int n, const std::string& coll, int victim, std::mt19937& rng) {
    const double timeout = env_seconds("CCL_TIMEOUT", 300);
    std::printf("== kill rank %d of %d during %s\n", victim, n, coll.c_str());
    std::fflush(stdout);
    ccl_kvs_t kvs = nullptr;
    if (ccl_kvs_create_main(&kvs) != CCL_SUCCESS) {
        std::printf("FAIL: ccl_kvs_create_main: %s\n", ccl_last_error());
        return false;
    }
    int fds[2];
    if (pipe(fds) != 0) std::exit(2);
    const std::set<std::string> shm_before = shm_names();
    std::vector<pid_t> pids;
    for (int r = 0; r < n; ++r) {
        auto env = rank_env("kill", r, n, kvs_address(kvs));
        env["FAULT_COLL"] = coll;
        env["FAULT_VICTIM"] = std::to_string(victim);
        env["FAULT_PIPE"] = std::to_string(fds[1]);
        pids.push_back(spawn(env));
    }
    close(fds[1]);
    bool ok = true;
    // The victim says it has finished one call; let it run a little more, then kill it.
    pollfd p{fds[0], POLLIN, 0};
    char c;
    if (poll(&p, 1, 60000) != 1 || read(fds[0], &c, 1) != 1) {
        std::printf("FAIL: the victim never got going\n");
        ok = false;
    }
    close(fds[0]);
    std::this_thread::sleep_for(
        std::chrono::milliseconds(std::uniform_int_distribution<>(5, 60)(rng)));
    kill(pids[size_t(victim)], SIGKILL);
    const auto t0 = Clock::now();
    std::map<pid_t, int> status;
    std::map<pid_t, double> exit_s;
    const double limit = env_seconds("FAULT_LIMIT", timeout + 2);
    ok &=
        reap(pids,
             t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(limit)),
             status, exit_s, t0);
    double slowest = 0;
    for (int r = 0; r < n; ++r) {
        int st = status[pids[size_t(r)]];
        if (r == victim) {
            if (!(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL)) {
                std::printf("FAIL: the victim ended with %s before it was killed\n",
                            describe(st).c_str());
                ok = false;
            }
            continue;
        }
        slowest = std::max(slowest, exit_s[pids[size_t(r)]]);
        std::printf("rank %d out %.2f s after the kill\n", r, exit_s[pids[size_t(r)]]);
        if (!exited_ok(st)) {
            std::printf("FAIL: rank %d ended with %s\n", r, describe(st).c_str());
            ok = false;
        }
    }
    ok &= no_children_left();
    ok &= shm_clean(pids, shm_before);
    ccl_kvs_destroy(kvs);
    std::printf(
        "%s: kill rank %d of %d during %s: every survivor out %.2f s after the kill "
        "(limit %.1f s)\n",
        ok ? "ok" : "FAIL", victim, n, coll.c_str(), slowest, limit);
    std::fflush(stdout);
    return ok;
}

// Ranks that wait in bootstrap for a rank that never comes; with `server_dies`, the KVS server's
// process is killed meanwhile.
bool bootstrap_case(int n, int absent, bool server_dies) {
    const double kvs_timeout = env_seconds("CCL_KVS_TIMEOUT", 60);
    std::printf("== bootstrap of %d ranks, rank %d never arrives%s\n", n, absent,
                server_dies ? ", the KVS server is killed" : "");
    std::fflush(stdout);
    ccl_kvs_t kvs = nullptr;
    pid_t server = -1;
    std::string address;
    if (server_dies) {
        int fds[2];
        if (pipe(fds) != 0) std::exit(2);
        server = spawn({{"FAULT_ROLE", "server"}, {"FAULT_PIPE", std::to_string(fds[1])}});
        close(fds[1]);
        char buf[CCL_KVS_ADDRESS_MAX] = {};
        size_t got = 0;
        while (got < sizeof(buf) - 1) {
            ssize_t k = read(fds[0], buf + got, sizeof(buf) - 1 - got);
            if (k <= 0) break;
            got += size_t(k);
            if (buf[got - 1] == '\0') break;
        }
        close(fds[0]);
        address = buf;
        if (address.empty()) {
            std::printf("FAIL: the KVS server process did not start\n");
            return false;
        }
    } else {
        if (ccl_kvs_create_main(&kvs) != CCL_SUCCESS) return false;
        address = kvs_address(kvs);
    }
    const std::set<std::string> shm_before = shm_names();
    std::vector<pid_t> pids;
    for (int r = 0; r < n; ++r)
        pids.push_back(
            r == absent ? -1
                        : spawn(rank_env(server_dies ? "server-dies" : "absent", r, n, address)));
    const auto t0 = Clock::now();
    if (server_dies) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1000));  // all wait in bootstrap
        kill(server, SIGKILL);
        int st = 0;
        waitpid(server, &st, 0);
    }
    std::map<pid_t, int> status;
    std::map<pid_t, double> exit_s;
    // Each rank checks its own ccl_comm_create against CCL_KVS_TIMEOUT + 2 s; this deadline adds
    // the start-up of the processes, to tell a hang.
    bool ok = reap(pids,
                   t0 + std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double>(kvs_timeout + 10)),
                   status, exit_s, t0);
    double slowest = 0;
    for (int r = 0; r < n; ++r) {
        if (r == absent) continue;
        slowest = std::max(slowest, exit_s[pids[size_t(r)]]);
        if (!exited_ok(status[pids[size_t(r)]])) {
            std::printf("FAIL: rank %d ended with %s\n", r,
                        describe(status[pids[size_t(r)]]).c_str());
            ok = false;
        }
    }
    ok &= no_children_left();
    pids.push_back(server);
    ok &= shm_clean(pids, shm_before);
    if (kvs) ccl_kvs_destroy(kvs);
    std::printf("%s: bootstrap of %d ranks without rank %d%s: every rank out after %.2f s\n",
                ok ? "ok" : "FAIL", n, absent, server_dies ? ", KVS server killed" : "", slowest);
    std::fflush(stdout);
    return ok;
}

int usage() {
    std::fprintf(stderr,
                 "usage: ccl_fault kill N [collective...] | absent N | server-dies N\n"
                 "collectives: allreduce_small allreduce_large broadcast reduce allgather "
                 "reduce_scatter alltoall sendrecv barrier group_alltoall\n");
    return 2;
}

}  // namespace

int main(int argc, char** argv) {
    if (const char* role = std::getenv("FAULT_ROLE")) {
        // Like cclrun's ranks: nobody reads our stdout interleaved mid-line.
        setvbuf(stdout, nullptr, _IOLBF, 0);
        return std::string(role) == "server" ? server_main() : rank_main();
    }
    if (argc < 3) return usage();
    const std::string mode = argv[1];
    const int n = std::atoi(argv[2]);
    if (n < 2 || n > 64) return usage();
    signal(SIGPIPE, SIG_IGN);
    bool ok = true;
    if (mode == "kill") {
        std::vector<std::string> colls(argv + 3, argv + argc);
        if (colls.empty()) colls.assign(std::begin(kColls), std::end(kColls));
        std::mt19937 rng(12345u + unsigned(n));
        for (size_t i = 0; i < colls.size(); ++i) ok &= kill_case(n, colls[i], int(i) % n, rng);
    } else if (mode == "absent") {
        ok &= bootstrap_case(n, n - 1, false);
        ok &= bootstrap_case(n, 0, false);
    } else if (mode == "server-dies") {
        ok &= bootstrap_case(n, n - 1, true);
    } else {
        return usage();
    }
    std::printf("%s\n", ok ? "ALL OK" : "SOME CASES FAILED");
    return ok ? 0 : 1;
}
