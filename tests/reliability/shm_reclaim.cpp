// Segments left by a rank 0 killed inside ccl_comm_create, without a launcher to clean up after
// it: rank 0 of a 2-rank job is started alone (this program starts it: fork + exec of itself) and
// this program plays rank 1 in the KVS up to the point where rank 0 has made the arena and
// mailbox and published their names (it gives rank 0 its node record, then waits for the
// segments' record: the bootstrap's keys, core/comm.cpp), so that rank 0 waits for rank 1 to map
// them, which it never does; then
//   - while it lives, neither `ccl_info --clean` nor a later job touches its segments, even when
//     they look old;
//   - it is SIGKILLed: its segments are still there (nobody else had mapped them);
//   - `ccl_info --clean` removes them, naming each and its dead creator (first case), or the next
//     job's ccl_comm_create does, saying so in its log (second case).
// Segments look old by their modification time, set back an hour (the scans leave segments
// younger than a few seconds alone).
//
//   ccl_shm_reclaim CCL_INFO     exit status 0 when every check passed
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "ccl/ccl.h"
#include "kvs/kvs.h"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

// ---------------------------------------------------------------------------------------------
// Child side.

// Rank 0 of a job of 2 whose rank 1 never comes: it waits in ccl_comm_create until killed.
int rank_main() {
    ccl_kvs_t kvs = nullptr;
    if (ccl_kvs_connect(std::getenv("RECLAIM_KVS"), &kvs) != CCL_SUCCESS) return 5;
    ccl_comm_t comm = nullptr;
    ccl_comm_create(2, 0, kvs, &comm);  // returns only at CCL_KVS_TIMEOUT
    std::printf("rank 0: ccl_comm_create returned: %s\n", ccl_last_error());
    return 4;
}

// A later job of one rank: its own KVS, one communicator.
int job_main() {
    ccl_kvs_t kvs = nullptr;
    ccl_comm_t comm = nullptr;
    if (ccl_kvs_create_main(&kvs) != CCL_SUCCESS ||
        ccl_comm_create(1, 0, kvs, &comm) != CCL_SUCCESS) {
        std::printf("later job: %s\n", ccl_last_error());
        return 5;
    }
    ccl_comm_destroy(comm);
    ccl_kvs_destroy(kvs);
    return 0;
}

// ---------------------------------------------------------------------------------------------
// Harness side.

std::string self_exe() {
    char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
    if (n <= 0) std::exit(2);
    return std::string(buf, size_t(n));
}

// Starts `argv` (this program when empty) with `env` added, its output into a pipe (*out_fd).
pid_t spawn(std::vector<std::string> argv, const std::map<std::string, std::string>& env,
            int* out_fd) {
    if (argv.empty()) argv.push_back(self_exe());
    std::vector<std::string> strings;
    for (char** e = environ; *e; ++e) strings.emplace_back(*e);
    for (const auto& [k, v] : env) strings.push_back(k + "=" + v);
    std::vector<char*> envp, args;
    for (auto& s : strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    int fds[2];
    if (pipe(fds) != 0) std::exit(2);
    pid_t pid = fork();
    if (pid < 0) std::exit(2);
    if (pid == 0) {
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        close(fds[0]);
        close(fds[1]);
        execve(args[0], args.data(), envp.data());
        _exit(127);
    }
    close(fds[1]);
    *out_fd = fds[0];
    return pid;
}

// Waits for `pid` (at most `seconds`, then kills it) and returns everything it wrote.
std::string finish(pid_t pid, int out_fd, int seconds, int* status) {
    std::string out;
    const auto deadline = Clock::now() + std::chrono::seconds(seconds);
    fcntl(out_fd, F_SETFL, O_NONBLOCK);
    for (;;) {
        char buf[4096];
        ssize_t n = read(out_fd, buf, sizeof buf);
        if (n > 0) {
            out.append(buf, size_t(n));
            continue;
        }
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) break;
        if (Clock::now() > deadline) {
            kill(pid, SIGKILL);
            out += "(killed at the deadline)\n";
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    close(out_fd);
    waitpid(pid, status, 0);
    return out;
}

bool exists(const std::string& name) { return access(("/dev/shm/" + name).c_str(), F_OK) == 0; }

// The names in /dev/shm that process `pid` made ("ccl-<pid>-...").
std::set<std::string> names_of(pid_t pid) {
    std::set<std::string> names;
    const std::string prefix = "ccl-" + std::to_string(pid) + "-";
    if (DIR* d = opendir("/dev/shm")) {
        while (dirent* e = readdir(d))
            if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0)
                names.insert(e->d_name);
        closedir(d);
    }
    return names;
}

void set_back_an_hour(const std::set<std::string>& names) {
    struct timespec times[2];
    clock_gettime(CLOCK_REALTIME, &times[0]);
    times[0].tv_sec -= 3600;
    times[1] = times[0];
    for (const auto& n : names) utimensat(AT_FDCWD, ("/dev/shm/" + n).c_str(), times, 0);
}

bool g_ok = true;
void check(bool what, const std::string& said) {
    std::printf("%s: %s\n", what ? "ok" : "FAIL", said.c_str());
    std::fflush(stdout);
    g_ok &= what;
}

std::string run_clean(const std::string& ccl_info) {
    int fd = -1, status = 0;
    const pid_t pid = spawn({ccl_info, "--clean"}, {}, &fd);
    std::string out = finish(pid, fd, 30, &status);
    check(WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "ccl_info --clean exits 0 (" + std::to_string(status) + ")");
    return out;
}

std::string run_later_job() {
    int fd = -1, status = 0;
    const pid_t pid = spawn({}, {{"RECLAIM_ROLE", "job"}}, &fd);
    std::string out = finish(pid, fd, 60, &status);
    check(WIFEXITED(status) && WEXITSTATUS(status) == 0, "a later job runs: " + out);
    return out;
}

// Rank 0 of a 2-rank job, with `rank1` playing rank 1 until rank 0 has made its segments;
// returns their names.
std::set<std::string> start_rank0(pid_t* pid, int* out_fd, ccl_kvs_t* kvs,
                                  std::unique_ptr<ccl::kvs::Client>* rank1) {
    char address[CCL_KVS_ADDRESS_MAX];
    if (ccl_kvs_create_main(kvs) != CCL_SUCCESS ||
        ccl_kvs_get_address(*kvs, address, sizeof address) != CCL_SUCCESS)
        std::exit(2);
    *pid = spawn({},
                 {{"RECLAIM_ROLE", "rank"},
                  {"RECLAIM_KVS", address},
                  {"LOCAL_RANK", "0"},
                  {"LOCAL_WORLD_SIZE", "2"},
                  {"CCL_PROCESS_LAUNCHER", "none"},
                  {"CCL_KVS_TIMEOUT", "120"}},
                 out_fd);
    std::set<std::string> names;
    try {
        // The first communicator of 2 ranks over this KVS: its keys start "comm0-n2/". Rank 1 is
        // on rank 0's node (the same node record); rank 0 then makes the segments and publishes
        // "name buffer_size job".
        *rank1 = std::make_unique<ccl::kvs::Client>(address, 30);
        (*rank1)->put("comm0-n2/all0/1", (*rank1)->get("comm0-n2/all0/0", 60));
        const std::string record = (*rank1)->get("comm0-n2/shm", 60);
        const std::string name = record.substr(1, record.find(' ') - 1);  // without the '/'
        for (const std::string& n : {name, name + "-m"})
            if (exists(n)) names.insert(n);
    } catch (const std::exception& e) {
        std::printf("playing rank 1: %s\n", e.what());
    }
    check(names.size() == 2 && names == names_of(*pid),
          "rank 0 (pid " + std::to_string(*pid) + ") made its segments (" +
              std::to_string(names.size()) + " names) and waits for rank 1 to map them");
    return names;
}

void kill_rank0(pid_t pid, int out_fd, const std::set<std::string>& names) {
    kill(pid, SIGKILL);
    int status = 0;
    finish(pid, out_fd, 10, &status);
    bool all = true;
    for (const auto& n : names) all &= exists(n);
    check(WIFSIGNALED(status) && all && !names.empty(),
          "rank 0 SIGKILLed: nobody removed its segments");
}

// The first case: `ccl_info --clean`, and never a live job's segments.
void clean_case(const std::string& ccl_info) {
    std::printf("== ccl_info --clean after rank 0 is killed in ccl_comm_create\n");
    pid_t pid = -1;
    int out_fd = -1;
    ccl_kvs_t kvs = nullptr;
    std::unique_ptr<ccl::kvs::Client> rank1;
    const std::set<std::string> names = start_rank0(&pid, &out_fd, &kvs, &rank1);
    set_back_an_hour(names);
    run_clean(ccl_info);
    run_later_job();
    bool kept = true;
    for (const auto& n : names) kept &= exists(n);
    check(kept, "a live job's segments (looking an hour old) are left alone");
    kill_rank0(pid, out_fd, names);
    const std::string out = run_clean(ccl_info);
    for (const auto& n : names) {
        check(!exists(n), "then ccl_info --clean removes " + n);
        check(out.find(n) != std::string::npos &&
                  out.find("pid " + std::to_string(pid)) != std::string::npos,
              "and says so: " + out);
    }
    ccl_kvs_destroy(kvs);
}

// The second case: the next job's ccl_comm_create.
void next_job_case() {
    std::printf("== the next job after rank 0 is killed in ccl_comm_create\n");
    pid_t pid = -1;
    int out_fd = -1;
    ccl_kvs_t kvs = nullptr;
    std::unique_ptr<ccl::kvs::Client> rank1;
    const std::set<std::string> names = start_rank0(&pid, &out_fd, &kvs, &rank1);
    kill_rank0(pid, out_fd, names);
    set_back_an_hour(names);
    const std::string out = run_later_job();
    for (const auto& n : names) {
        check(!exists(n), "the next job removes " + n);
        check(out.find(n) != std::string::npos, "and its log says so: " + out);
    }
    ccl_kvs_destroy(kvs);
}

}  // namespace

int main(int argc, char** argv) {
    if (const char* role = std::getenv("RECLAIM_ROLE")) {
        setvbuf(stdout, nullptr, _IOLBF, 0);
        return std::string(role) == "rank" ? rank_main() : job_main();
    }
    if (argc != 2) {
        std::fprintf(stderr, "usage: ccl_shm_reclaim CCL_INFO\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    clean_case(argv[1]);
    next_job_case();
    std::printf("%s\n", g_ok ? "ALL OK" : "SOME CHECKS FAILED");
    return g_ok ? 0 : 1;
}
