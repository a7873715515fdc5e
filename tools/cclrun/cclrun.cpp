// cclrun: starts N ranks of a program on this machine with a KVS server for their rendezvous,
// supervises them, and stops them all as soon as one fails (or on a signal or a timeout).
//
//   cclrun -n N [-l|--label] [--timeout SECONDS] [--] prog args...
//
// Signals reach the supervisor through a signalfd (they are blocked otherwise), so the one poll()
// loop sees child exits, signals, labelled output and deadlines without races.
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/error.h"
#include "kvs/kvs.h"
#include "kvs/net.h"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;
using ccl::kvs::net::Fd;

constexpr int kMaxRanks = 4096;
constexpr auto kGrace = std::chrono::seconds(2);           // SIGTERM -> SIGKILL
constexpr auto kDrainAfterExit = std::chrono::seconds(1);  // output held open by grandchildren
constexpr size_t kMaxLine = 64 << 10;                      // a longer line is printed in pieces
constexpr int kUsageError = 2;
constexpr int kExecFailed = 127;
constexpr int kTimedOut = 124;

const char* const kUsage =
    "usage: cclrun -n N [-l|--label] [--timeout SECONDS] [--] prog [args...]\n"
    "  -n N              start N ranks (1..4096) of prog on this machine\n"
    "  -l, --label       prefix every output line with \"[rank] \"\n"
    "  --timeout S       stop the job after S seconds (exit status 124)\n"
    "  -h, --help        show this help\n"
    "Each rank gets CCL_RANK, CCL_SIZE, CCL_KVS_ADDRESS, RANK, WORLD_SIZE, LOCAL_RANK and\n"
    "LOCAL_WORLD_SIZE. CCL_KVS_IFACE picks the interface of the KVS server. When a rank fails,\n"
    "the others get SIGTERM, then SIGKILL after 2 s; cclrun exits with the first failure's "
    "status.\n";

struct Options {
    int nranks = 0;
    bool label = false;
    std::optional<double> timeout_s;
    std::vector<std::string> argv;  // the program and its arguments
};

struct UsageError {
    std::string message;
};

// -------------------------------------------------------------------------------------------------
// Command line.

int parse_nranks(const std::string& text) {
    int n = 0;
    const char* end = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(text.data(), end, n);
    if (text.empty() || ec != std::errc() || ptr != end || n < 1 || n > kMaxRanks) {
        throw UsageError{"-n wants a number of ranks in 1.." + std::to_string(kMaxRanks) +
                         ", not '" + text + "'"};
    }
    return n;
}

double parse_timeout(const std::string& text) {
    char* end = nullptr;
    errno = 0;
    double s = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || errno != 0 || !std::isfinite(s) || s <= 0) {
        throw UsageError{"--timeout wants a positive number of seconds, not '" + text + "'"};
    }
    return s;
}

// Returns nullopt for --help.
std::optional<Options> parse_args(int argc, char** argv) {
    Options o;
    int i = 1;
    auto value = [&](const std::string& opt) -> std::string {
        if (i + 1 >= argc) throw UsageError{opt + " needs a value"};
        return argv[++i];
    };
    for (; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--") {
            ++i;
            break;
        } else if (a == "-h" || a == "--help") {
            return std::nullopt;
        } else if (a == "-n" || a == "--np") {
            o.nranks = parse_nranks(value(a));
        } else if (a.rfind("-n", 0) == 0 && a.size() > 2 && a[2] != '-') {
            o.nranks = parse_nranks(a.substr(a[2] == '=' ? 3 : 2));
        } else if (a == "-l" || a == "--label") {
            o.label = true;
        } else if (a == "--timeout") {
            o.timeout_s = parse_timeout(value(a));
        } else if (a.rfind("--timeout=", 0) == 0) {
            o.timeout_s = parse_timeout(a.substr(10));
        } else if (a.size() > 1 && a[0] == '-') {
            throw UsageError{"unknown option '" + a + "'"};
        } else {
            break;  // the program
        }
    }
    for (; i < argc; ++i) o.argv.push_back(argv[i]);
    if (o.nranks == 0) throw UsageError{"missing -n N (the number of ranks)"};
    if (o.argv.empty()) throw UsageError{"missing the program to run"};
    return o;
}

// -------------------------------------------------------------------------------------------------
// Small helpers.

void write_all(int fd, const char* data, size_t n) {
    while (n > 0) {
        ssize_t r = write(fd, data, n);
        if (r < 0) {
            if (errno == EINTR) continue;
            return;  // our stdout/stderr is gone (EPIPE): nothing sensible left to do with output
        }
        data += r;
        n -= static_cast<size_t>(r);
    }
}

void say(const std::string& msg) {
    std::string line = "cclrun: " + msg + "\n";
    write_all(STDERR_FILENO, line.data(), line.size());
}

std::string signal_name(int sig) {
    const char* abbrev = sigabbrev_np(sig);
    return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

std::string seconds_text(double s) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%g", s);
    return buf;
}

// -------------------------------------------------------------------------------------------------
// Output of one rank's stdout or stderr, split into lines labelled "[rank] ".

class LabelledStream {
public:
    LabelledStream(int rank, Fd fd, int out)
        : prefix_("[" + std::to_string(rank) + "] "), fd_(std::move(fd)), out_(out) {}
    bool open() const { return fd_.valid(); }
    int fd() const { return fd_.get(); }

    // Reads what is there; prints complete lines. At EOF prints the rest and closes.
    void on_readable() {
        char buf[16 << 10];
        ssize_t r = read(fd_.get(), buf, sizeof(buf));
        if (r < 0 && (errno == EAGAIN || errno == EINTR)) return;
        if (r <= 0) return finish();
        pending_.append(buf, static_cast<size_t>(r));
        size_t start = 0;
        for (size_t nl; (nl = pending_.find('\n', start)) != std::string::npos; start = nl + 1) {
            emit(std::string_view(pending_).substr(start, nl - start));
        }
        pending_.erase(0, start);
        if (pending_.size() >= kMaxLine) {  // bound memory for output that never ends a line
            emit(pending_);
            pending_.clear();
        }
    }

    void finish() {
        if (!pending_.empty()) emit(pending_);
        pending_.clear();
        fd_.reset();
    }

private:
    void emit(std::string_view line) {
        // One write per line keeps lines of different ranks from interleaving.
        std::string s = prefix_;
        s.append(line);
        s.push_back('\n');
        write_all(out_, s.data(), s.size());
    }

    std::string prefix_;
    Fd fd_;
    int out_;
    std::string pending_;
};

// -------------------------------------------------------------------------------------------------
// Starting ranks.

struct Rank {
    int rank = 0;
    pid_t pid = -1;
    bool running = false;
    std::vector<LabelledStream> streams;  // with --label: stdout and stderr
};

// The environment of one rank: ours, with the job's variables replaced.
std::vector<std::string> rank_environment(int rank, int size, const std::string& kvs_address) {
    std::vector<std::pair<std::string, std::string>> ours = {
        {"CCL_RANK", std::to_string(rank)},         {"CCL_SIZE", std::to_string(size)},
        {"CCL_KVS_ADDRESS", kvs_address},           {"RANK", std::to_string(rank)},
        {"WORLD_SIZE", std::to_string(size)},       {"LOCAL_RANK", std::to_string(rank)},
        {"LOCAL_WORLD_SIZE", std::to_string(size)},
    };
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) {
        std::string_view kv(*e);
        bool replaced = std::any_of(ours.begin(), ours.end(), [&](const auto& o) {
            return kv.size() > o.first.size() && kv.substr(0, o.first.size()) == o.first &&
                   kv[o.first.size()] == '=';
        });
        if (!replaced) env.emplace_back(kv);
    }
    for (const auto& [k, v] : ours) env.push_back(k + "=" + v);
    return env;
}

std::vector<char*> c_strings(std::vector<std::string>& v) {
    std::vector<char*> out;
    for (auto& s : v) out.push_back(s.data());
    out.push_back(nullptr);
    return out;
}

// In the child, between fork and exec: only async-signal-safe calls (the KVS thread may hold
// locks in the parent). Everything it needs was built before fork.
[[noreturn]] void exec_rank(pid_t parent, char** argv, char** envp, int out_fd, int err_fd,
                            const std::string& exec_error_prefix) {
    // Die with cclrun, even if it is SIGKILLed; it may already be gone by the time this runs.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(kExecFailed);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    signal(SIGPIPE, SIG_DFL);
    if (out_fd >= 0 && dup2(out_fd, STDOUT_FILENO) < 0) _exit(kExecFailed);
    if (err_fd >= 0 && dup2(err_fd, STDERR_FILENO) < 0) _exit(kExecFailed);
    execvpe(argv[0], argv, envp);
    int err = errno;
    write_all(STDERR_FILENO, exec_error_prefix.data(), exec_error_prefix.size());
    const char* why = strerrordesc_np(err);
    if (why) write_all(STDERR_FILENO, why, std::strlen(why));
    write_all(STDERR_FILENO, "\n", 1);
    _exit(kExecFailed);
}

// Starts one rank. Throws ccl::Error when a pipe or fork fails.
Rank start_rank(int rank, const Options& o, const std::string& kvs_address) {
    std::vector<std::string> env = rank_environment(rank, o.nranks, kvs_address);
    std::vector<std::string> args = o.argv;
    std::vector<char*> envp = c_strings(env);
    std::vector<char*> argv = c_strings(args);
    std::string exec_error =
        "cclrun: rank " + std::to_string(rank) + ": cannot execute '" + o.argv[0] + "': ";

    Fd out_r, out_w, err_r, err_w;
    if (o.label) {
        int p[2];
        if (pipe2(p, O_CLOEXEC) != 0) ccl::throw_errno("pipe");
        out_r = Fd(p[0]);
        out_w = Fd(p[1]);
        if (pipe2(p, O_CLOEXEC) != 0) ccl::throw_errno("pipe");
        err_r = Fd(p[0]);
        err_w = Fd(p[1]);
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) ccl::throw_errno("fork");
    if (pid == 0) exec_rank(parent, argv.data(), envp.data(), out_w.get(), err_w.get(), exec_error);

    Rank r;
    r.rank = rank;
    r.pid = pid;
    r.running = true;
    if (o.label) {
        fcntl(out_r.get(), F_SETFL, O_NONBLOCK);
        fcntl(err_r.get(), F_SETFL, O_NONBLOCK);
        r.streams.emplace_back(rank, std::move(out_r), STDOUT_FILENO);
        r.streams.emplace_back(rank, std::move(err_r), STDERR_FILENO);
    }
    return r;  // the write ends close here: EOF arrives once the rank (and its children) exit
}

// -------------------------------------------------------------------------------------------------
// Supervising.

class Supervisor {
public:
    Supervisor(std::vector<Rank> ranks, Fd signals, std::optional<double> timeout_s)
        : ranks_(std::move(ranks)), signals_(std::move(signals)), timeout_s_(timeout_s) {
        if (timeout_s_) {
            job_deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                               std::chrono::duration<double>(*timeout_s_));
        }
    }

    // Runs until every rank is reaped and its output drained; returns cclrun's exit status.
    int run() {
        for (;;) {
            bool running =
                std::any_of(ranks_.begin(), ranks_.end(), [](auto& r) { return r.running; });
            if (!running) {
                if (!drain_deadline_) drain_deadline_ = Clock::now() + kDrainAfterExit;
                if (!any_stream_open()) break;
            }
            poll_once();
            check_deadlines();
        }
        for (auto& r : ranks_) {
            for (auto& s : r.streams) s.finish();
        }
        return exit_status_;
    }

    std::vector<pid_t> pids() const {
        std::vector<pid_t> out;
        for (const auto& r : ranks_) out.push_back(r.pid);
        return out;
    }

private:
    bool any_stream_open() const {
        for (const auto& r : ranks_) {
            for (const auto& s : r.streams) {
                if (s.open()) return true;
            }
        }
        return false;
    }

    void poll_once() {
        std::vector<pollfd> fds{{signals_.get(), POLLIN, 0}};
        std::vector<LabelledStream*> streams;
        for (auto& r : ranks_) {
            for (auto& s : r.streams) {
                if (!s.open()) continue;
                fds.push_back({s.fd(), POLLIN, 0});
                streams.push_back(&s);
            }
        }
        int n = poll(fds.data(), fds.size(), timeout_ms());
        if (n < 0) {
            if (errno == EINTR) return;
            ccl::throw_errno("poll");
        }
        if (fds[0].revents & POLLIN) on_signal();
        for (size_t i = 0; i < streams.size(); ++i) {
            if (fds[i + 1].revents) streams[i]->on_readable();
        }
    }

    int timeout_ms() const {
        std::optional<Clock::time_point> next;
        auto consider = [&](std::optional<Clock::time_point> t) {
            if (t && (!next || *t < *next)) next = t;
        };
        if (!stopping_) consider(job_deadline_);
        consider(kill_deadline_);
        consider(drain_deadline_);
        if (!next) return -1;  // a signal (SIGCHLD included) or output wakes us
        auto ms = std::chrono::ceil<std::chrono::milliseconds>(*next - Clock::now()).count();
        return static_cast<int>(std::clamp<decltype(ms)>(ms, 0, 60'000));
    }

    void on_signal() {
        signalfd_siginfo info;
        while (read(signals_.get(), &info, sizeof(info)) == sizeof(info)) {
            int sig = static_cast<int>(info.ssi_signo);
            if (sig == SIGCHLD) {
                reap();
            } else if (stopping_) {
                say("got " + signal_name(sig) + " again; killing the ranks now");
                kill_all(SIGKILL);
            } else {
                say("got " + signal_name(sig) + "; stopping the ranks");
                stop(128 + sig);
            }
        }
    }

    void reap() {
        for (;;) {
            int status = 0;
            pid_t pid = waitpid(-1, &status, WNOHANG);
            if (pid <= 0) return;  // 0: none left exited; -1 ECHILD: none left at all
            auto it =
                std::find_if(ranks_.begin(), ranks_.end(), [&](auto& r) { return r.pid == pid; });
            if (it == ranks_.end()) continue;
            it->running = false;
            int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
            if (code == 0 || stopping_) continue;  // ranks we stopped are not failures
            std::string how = WIFEXITED(status)
                                  ? "exited with status " + std::to_string(code)
                                  : "was killed by signal " + signal_name(WTERMSIG(status));
            say("rank " + std::to_string(it->rank) + " (pid " + std::to_string(pid) + ") " + how +
                stopping_note());
            stop(code);
        }
    }

    std::string stopping_note() const {
        size_t others =
            std::count_if(ranks_.begin(), ranks_.end(), [](auto& r) { return r.running; });
        return others ? "; stopping the other " + std::to_string(others) + " rank(s)" : "";
    }

    void check_deadlines() {
        auto now = Clock::now();
        if (!stopping_ && job_deadline_ && now >= *job_deadline_) {
            say("the job timed out after " + seconds_text(*timeout_s_) + " s; stopping the ranks");
            stop(kTimedOut);
        }
        if (kill_deadline_ && now >= *kill_deadline_) {
            for (auto& r : ranks_) {
                if (r.running) {
                    say("rank " + std::to_string(r.rank) + " (pid " + std::to_string(r.pid) +
                        ") did not stop within 2 s of SIGTERM; sending SIGKILL");
                }
            }
            kill_all(SIGKILL);
            kill_deadline_.reset();
        }
        if (drain_deadline_ && now >= *drain_deadline_) {
            // Every rank is gone but something they started keeps the output open: stop reading.
            for (auto& r : ranks_) {
                for (auto& s : r.streams) s.finish();
            }
        }
    }

    // First cause wins: its status becomes cclrun's.
    void stop(int status) {
        if (stopping_) return;
        stopping_ = true;
        exit_status_ = status;
        kill_all(SIGTERM);
        kill_deadline_ = Clock::now() + kGrace;
    }

    void kill_all(int sig) {
        for (auto& r : ranks_) {
            if (r.running) kill(r.pid, sig);  // an unreaped zombie ignores it harmlessly
        }
    }

    std::vector<Rank> ranks_;
    Fd signals_;
    std::optional<double> timeout_s_;
    std::optional<Clock::time_point> job_deadline_;
    std::optional<Clock::time_point> kill_deadline_;
    std::optional<Clock::time_point> drain_deadline_;
    bool stopping_ = false;
    int exit_status_ = 0;
};

// -------------------------------------------------------------------------------------------------
// Clean-up: the library names its shared-memory segments "ccl-<creator pid>-..." and unlinks them
// once mapped; a rank that died early may leave some behind.

void remove_leftover_segments(const std::vector<pid_t>& pids) {
    struct CloseDir {
        void operator()(DIR* d) const { closedir(d); }
    };
    std::unique_ptr<DIR, CloseDir> dir(opendir("/dev/shm"));
    if (!dir) return;
    std::vector<std::string> prefixes;
    for (pid_t p : pids) prefixes.push_back("ccl-" + std::to_string(p) + "-");
    int removed = 0;
    while (dirent* e = readdir(dir.get())) {
        std::string_view name(e->d_name);
        for (const auto& pre : prefixes) {
            if (name.substr(0, pre.size()) != pre) continue;
            if (unlinkat(dirfd(dir.get()), e->d_name, 0) == 0) {
                ++removed;
            } else {
                say("could not remove /dev/shm/" + std::string(name) + ": " + std::strerror(errno));
            }
            break;
        }
    }
    if (removed) say("removed " + std::to_string(removed) + " leftover shared-memory segment(s)");
}

int run_job(const Options& o) {
    // Block the signals we handle before any thread (the KVS server's) or child exists, so that
    // they arrive only through the signalfd; children unblock them before exec.
    sigset_t handled;
    sigemptyset(&handled);
    for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) sigaddset(&handled, s);
    if (sigprocmask(SIG_BLOCK, &handled, nullptr) != 0) ccl::throw_errno("sigprocmask");
    Fd signals(signalfd(-1, &handled, SFD_NONBLOCK | SFD_CLOEXEC));
    if (!signals.valid()) ccl::throw_errno("signalfd");
    signal(SIGPIPE, SIG_IGN);  // a closed stdout must not kill the supervisor (children reset it)

    ccl::kvs::Server server(ccl::config().kvs_iface);

    std::vector<Rank> ranks;
    try {
        for (int r = 0; r < o.nranks; ++r) ranks.push_back(start_rank(r, o, server.address()));
    } catch (const ccl::Error& e) {
        say(std::string("could not start all ranks: ") + e.what());
        for (auto& r : ranks) kill(r.pid, SIGKILL);
        for (auto& r : ranks) waitpid(r.pid, nullptr, 0);
        std::vector<pid_t> pids;
        for (auto& r : ranks) pids.push_back(r.pid);
        remove_leftover_segments(pids);
        return 1;
    }
    Supervisor sup(std::move(ranks), std::move(signals), o.timeout_s);
    int status = sup.run();
    remove_leftover_segments(sup.pids());
    return status;
}

}  // namespace

int main(int argc, char** argv) {
    std::optional<Options> opts;
    try {
        opts = parse_args(argc, argv);
    } catch (const UsageError& e) {
        say(e.message +
            "\nusage: cclrun -n N [-l|--label] [--timeout SECONDS] [--] prog [args...]"
            " (cclrun --help says more)");
        return kUsageError;
    }
    if (!opts) {
        write_all(STDOUT_FILENO, kUsage, std::strlen(kUsage));
        return 0;
    }
    try {
        return run_job(*opts);
    } catch (const std::exception& e) {
        say(e.what());
        return 1;
    }
}
