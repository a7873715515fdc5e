// cclrun: starts the ranks of a program with a KVS server for their rendezvous, supervises them,
// and stops them all as soon as one fails (or on a signal or a timeout).
//
//   cclrun -n N [-l|--label] [--timeout SECONDS] [--] prog args...            (this machine)
//   cclrun [-n N] --hosts h1,h2 | --hostfile FILE [--ppn M] [--launcher-cmd CMD] [-x VAR] ...
//
// On several hosts, cclrun starts one agent per host (`cclrun --agent`, through the launcher
// command: ssh by default) and tells it on its stdin which ranks to start and the KVS address;
// the agent forks that host's ranks, relays their output and their failure, and stops them when
// its stdin closes (cclrun stopping or gone). cclrun serves the KVS and supervises the agents as
// it supervises local ranks.
//
// Signals reach the supervisor through a signalfd (they are blocked otherwise), so the one poll()
// loop sees child exits, signals, output, the link to cclrun and deadlines without races.
//
// When a rank fails, cclrun names the rank the failure points at, which is often not the one that
// exited first: peers time out waiting for a rank that is stopped (SIGSTOP, ^Z, a debugger) or
// hangs, and their errors say so ("waiting for rank 1", "rank 1 (pid ...) died"). A stopped rank
// is seen in /proc; the errors are read from the tail of the failed rank's stderr, which passes
// through cclrun for that reason (unchanged, as it is read, without -l).
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
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
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/config.h"
#include "base/error.h"
#include "base/number.h"
#include "binding.h"
#include "core/binding.h"
#include "culprit.h"
#include "hosts.h"
#include "job_spec.h"
#include "kvs/kvs.h"
#include "kvs/net.h"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;
using ccl::kvs::net::Fd;
using cclrun::BadUsage;

constexpr int kMaxRanks = 4096;
constexpr auto kGrace = std::chrono::seconds(2);  // SIGTERM -> SIGKILL
// An agent gets kGrace to stop its ranks; cclrun gives it that and a margin before SIGKILL.
constexpr auto kAgentGrace = std::chrono::seconds(5);
constexpr auto kDrainAfterExit = std::chrono::seconds(1);  // output held open by grandchildren
constexpr auto kSpecTimeout = std::chrono::seconds(30);    // agent: the job spec on stdin
constexpr size_t kMaxLine = 64 << 10;                      // a longer line is printed in pieces
constexpr int kUsageError = 2;
constexpr int kExecFailed = 127;
constexpr int kTimedOut = 124;
constexpr int kParentGone = 128 + SIGHUP;
const char* const kDefaultLauncher = "ssh -o BatchMode=yes {host}";

const char* const kUsage =
    "usage: cclrun -n N [options] [--] prog [args...]\n"
    "       cclrun [-n N] --hosts H1,H2,... | --hostfile FILE [--ppn M] [options] [--] prog ...\n"
    "  -n N               start N ranks (1..4096) of prog (on this machine without --hosts)\n"
    "  -l, --label        prefix every output line with \"[rank] \"\n"
    "  --timeout S        stop the job after S seconds (exit status 124)\n"
    "  --hosts LIST       start the ranks on these hosts: names, each with an optional :slots\n"
    "  --hostfile FILE    the same from a file: a host a line, \"name\", \"name:slots\" or\n"
    "                     \"name slots=N\"\n"
    "  --ppn M            M ranks per host (default: the host's slots, else N / hosts rounded\n"
    "                     up); hosts are filled in order, ranks in blocks\n"
    "  --launcher-cmd CMD how to run a command on a host: words, \"{host}\" replaced by the host\n"
    "                     (appended when absent); default \"ssh -o BatchMode=yes {host}\"\n"
    "  -x NAME[=VALUE]    also set NAME in the ranks' environment on the hosts (CCL_* and FI_*\n"
    "                     variables are passed on without it)\n"
    "  --bind-to block|core|none  block: each rank of a host on an equal share of its cores\n"
    "                     (consecutive, in the machine's order, with all their hardware\n"
    "                     threads: room for the rank's threads); core: on one core each; none:\n"
    "                     where the OS puts them. block and core need a core per rank. Default:\n"
    "                     block on this machine when the ranks fit, else none; none with --hosts\n"
    "                     (fake nodes share one machine's cores)\n"
    "  --cpus-per-rank K  block, with K cores per rank (each with its hardware threads) rather\n"
    "                     than an equal share: a layout of ranks that own several cores each,\n"
    "                     whose threads (OMP_NUM_THREADS, ccl's team: CCL_RANK_THREADS) use them\n"
    "  -h, --help         show this help\n"
    "Each rank gets CCL_RANK, CCL_SIZE, CCL_KVS_ADDRESS, RANK, WORLD_SIZE, LOCAL_RANK and\n"
    "LOCAL_WORLD_SIZE (local: among the ranks of its host), and torch's MASTER_ADDR (rank 0's\n"
    "host: 127.0.0.1, or the first host as listed) and MASTER_PORT (a port free here) unless they\n"
    "are set (with -x across hosts). CCL_KVS_IFACE picks the interface of\n"
    "the KVS server, which cclrun serves. When a rank fails, the others get SIGTERM, then SIGKILL\n"
    "after 2 s; cclrun exits with the first failure's status, and names the rank the failure\n"
    "points at (one that is stopped, or the one the ranks' errors name).\n";
const char* const kShortUsage =
    "\nusage: cclrun -n N [-l|--label] [--timeout SECONDS] [--hosts LIST|--hostfile FILE "
    "[--ppn M] [--launcher-cmd CMD]] [--bind-to block|core|none] [--cpus-per-rank K] [--] prog "
    "[args...] "
    "(cclrun --help says more)";

struct Options {
    int nranks = 0;  // with hosts, 0 takes every slot
    bool label = false;
    std::optional<double> timeout_s;
    std::vector<std::string> argv;    // the program and its arguments
    std::vector<cclrun::Host> hosts;  // empty: this machine, without agents
    int ppn = 0;
    std::string launcher = kDefaultLauncher;
    std::vector<std::string> exports;  // -x
    cclrun::Bind bind = cclrun::Bind::automatic;
    int cores_per_rank = 0;  // --cpus-per-rank
    bool agent = false;      // hidden: cclrun's agent on a host
};

// "cclrun: " (or "cclrun@host: " in an agent) before each message of ours.
std::string g_prefix = "cclrun: ";

// -------------------------------------------------------------------------------------------------
// Command line.

int parse_count(const std::string& text, const std::string& opt, const std::string& what) {
    int n = 0;
    const char* end = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(text.data(), end, n);
    if (text.empty() || ec != std::errc() || ptr != end || n < 1 || n > kMaxRanks) {
        throw BadUsage(opt + " wants a number of " + what + " in 1.." + std::to_string(kMaxRanks) +
                       ", not '" + text + "'");
    }
    return n;
}

double parse_timeout(const std::string& text) {
    // Read as CCL_TIMEOUT is (base/number.h): digits and one decimal point, nothing else.
    const std::optional<double> s = ccl::parse_decimal_fraction(text);
    if (!s || !std::isfinite(*s) || *s <= 0)
        throw BadUsage(
            "--timeout wants a positive number of seconds (digits, one decimal point), "
            "not '" +
            text + "'");
    return *s;
}

// Returns nullopt for --help.
std::optional<Options> parse_args(int argc, char** argv) {
    Options o;
    int i = 1;
    bool have_ppn = false, have_launcher = false;
    std::string hostfile;
    // The value of option `name`: "--name=value", or the next argument.
    auto value_of = [&](const std::string& a,
                        const std::string& name) -> std::optional<std::string> {
        if (a == name) {
            if (i + 1 >= argc) throw BadUsage(name + " needs a value");
            return std::string(argv[++i]);
        }
        if (a.size() > name.size() + 1 && a.rfind(name + "=", 0) == 0) {
            return a.substr(name.size() + 1);
        }
        return std::nullopt;
    };
    for (; i < argc; ++i) {
        std::string a = argv[i];
        std::optional<std::string> v;
        if (a == "--") {
            ++i;
            break;
        } else if (a == "-h" || a == "--help") {
            return std::nullopt;
        } else if (a == "--agent") {
            o.agent = true;
        } else if ((v = value_of(a, "-n")) || (v = value_of(a, "--np"))) {
            o.nranks = parse_count(*v, "-n", "ranks");
        } else if (a.rfind("-n", 0) == 0 && a.size() > 2 && a[2] != '-') {
            o.nranks = parse_count(a.substr(2), "-n", "ranks");
        } else if (a == "-l" || a == "--label") {
            o.label = true;
        } else if ((v = value_of(a, "--timeout"))) {
            o.timeout_s = parse_timeout(*v);
        } else if ((v = value_of(a, "--hosts")) || (v = value_of(a, "-H"))) {
            o.hosts = cclrun::parse_host_list(*v);
        } else if ((v = value_of(a, "--hostfile"))) {
            hostfile = *v;
        } else if ((v = value_of(a, "--ppn"))) {
            o.ppn = parse_count(*v, "--ppn", "ranks per host");
            have_ppn = true;
        } else if ((v = value_of(a, "--launcher-cmd"))) {
            o.launcher = *v;
            have_launcher = true;
        } else if ((v = value_of(a, "--bind-to"))) {
            o.bind = cclrun::parse_bind(*v);
        } else if ((v = value_of(a, "--cpus-per-rank"))) {
            o.cores_per_rank = parse_count(*v, "--cpus-per-rank", "cores per rank");
        } else if ((v = value_of(a, "-x")) || (v = value_of(a, "--env"))) {
            if (v->empty() || v->front() == '=') throw BadUsage("-x wants NAME or NAME=VALUE");
            o.exports.push_back(*v);
        } else if (a.size() > 1 && a[0] == '-') {
            throw BadUsage("unknown option '" + a + "'");
        } else {
            break;  // the program
        }
    }
    for (; i < argc; ++i) o.argv.push_back(argv[i]);
    if (o.agent) return o;  // everything else comes on stdin
    if (!hostfile.empty()) {
        if (!o.hosts.empty()) throw BadUsage("give --hosts or --hostfile, not both");
        o.hosts = cclrun::read_hostfile(hostfile);
    }
    if (o.hosts.empty()) {
        if (have_ppn || have_launcher || !o.exports.empty()) {
            throw BadUsage("--ppn, --launcher-cmd and -x go with --hosts or --hostfile");
        }
        if (o.nranks == 0) throw BadUsage("missing -n N (the number of ranks)");
    }
    if (o.argv.empty()) throw BadUsage("missing the program to run");
    if (o.cores_per_rank && o.bind != cclrun::Bind::automatic && o.bind != cclrun::Bind::block)
        throw BadUsage(
            "--cpus-per-rank binds each rank to its cores: it goes with --bind-to block");
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
    std::string line = g_prefix + msg + "\n";
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

std::string rank_range(int first, int n) {
    return n == 1 ? "rank " + std::to_string(first)
                  : "ranks " + std::to_string(first) + "-" + std::to_string(first + n - 1);
}

// -------------------------------------------------------------------------------------------------
// Output of one rank's (or agent's) stdout or stderr. Split into lines, each written whole with a
// prefix, when `lines` ("[rank] " with --label, else none): lines of different ranks never
// interleave. Otherwise passed on as it comes (a rank's stderr without --label: partial lines,
// progress bars, as if it were the rank's own). Either way the last kTail bytes are kept, for
// reading what a failed rank said last.
constexpr size_t kTail = 8 << 10;

class LabelledStream {
public:
    LabelledStream(std::string prefix, Fd fd, int out, bool lines = true)
        : prefix_(std::move(prefix)), fd_(std::move(fd)), out_(out), lines_(lines) {}
    bool open() const { return fd_.valid(); }
    int fd() const { return fd_.get(); }
    const std::string& tail() const { return tail_; }

    // Reads what is there; prints complete lines (or all of it). At EOF prints the rest and
    // closes. Returns whether data came (false on nothing there yet, or EOF).
    bool on_readable() {
        char buf[16 << 10];
        ssize_t r = read(fd_.get(), buf, sizeof(buf));
        if (r < 0 && (errno == EAGAIN || errno == EINTR)) return false;
        if (r <= 0) {
            finish();
            return false;
        }
        tail_.append(buf, static_cast<size_t>(r));
        if (tail_.size() > 2 * kTail) tail_.erase(0, tail_.size() - kTail);
        if (!lines_) {
            write_all(out_, buf, static_cast<size_t>(r));
            return true;
        }
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
        return true;
    }

    // Prints what is already in the pipe (the pipe is non-blocking).
    void drain_now() {
        while (open() && on_readable()) {
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
    bool lines_;
    std::string pending_;
    std::string tail_;
};

// -------------------------------------------------------------------------------------------------
// Starting processes: ranks, and agents on hosts.

// A process cclrun (or an agent) supervises: a rank, or the agent of a host.
struct Child {
    std::string what;  // "rank 3 (pid 123)", "the agent on node1 (ranks 2-3, pid 456)"
    pid_t pid = -1;
    int rank = -1;  // a rank's; -1 for an agent
    bool running = false;
    int exit_code = 0;                    // once it is not running
    std::vector<LabelledStream> streams;  // its stdout and stderr, when they come through pipes
    Fd input;                             // an agent's stdin: the job spec, then the link
    std::string pending;                  // what is still to be written to input
};

// The environment of a process: ours, with `set` ("NAME=value") replacing what we have.
std::vector<std::string> environment_with(const std::vector<std::string>& set) {
    auto name_of = [](std::string_view kv) { return kv.substr(0, kv.find('=')); };
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) {
        std::string_view kv(*e);
        bool replaced = std::any_of(set.begin(), set.end(),
                                    [&](const auto& s) { return name_of(s) == name_of(kv); });
        if (!replaced) env.emplace_back(kv);
    }
    env.insert(env.end(), set.begin(), set.end());
    return env;
}

// The variables of one rank.
std::vector<std::string> rank_variables(int rank, int size, int local_rank, int local_size,
                                        const std::string& kvs_address) {
    return {"CCL_RANK=" + std::to_string(rank),
            "CCL_SIZE=" + std::to_string(size),
            "CCL_KVS_ADDRESS=" + kvs_address,
            "RANK=" + std::to_string(rank),
            "WORLD_SIZE=" + std::to_string(size),
            "LOCAL_RANK=" + std::to_string(local_rank),
            "LOCAL_WORLD_SIZE=" + std::to_string(local_size)};
}

// A TCP port no socket of this machine is bound to now (0 when none could be had).
int free_port() {
    Fd s(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    socklen_t n = sizeof a;
    if (s.get() < 0 || bind(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        getsockname(s.get(), reinterpret_cast<sockaddr*>(&a), &n) != 0)
        return 0;
    return ntohs(a.sin_port);
}

// torch.distributed's env:// rendezvous, so that a script written for torchrun runs under cclrun
// unchanged: MASTER_ADDR is rank 0's host (`master_host`), MASTER_PORT a port free on this
// machine, where rank 0's TCP store listens. What the user set (`has`) stays.
std::vector<std::string> rendezvous_variables(const std::string& master_host,
                                              const std::function<bool(const char*)>& has) {
    std::vector<std::string> set;
    if (!has("MASTER_ADDR")) set.push_back("MASTER_ADDR=" + master_host);
    if (!has("MASTER_PORT")) {
        int port = free_port();
        if (port == 0) port = 29500;  // torchrun's default
        set.push_back("MASTER_PORT=" + std::to_string(port));
    }
    return set;
}

std::vector<char*> c_strings(std::vector<std::string>& v) {
    std::vector<char*> out;
    for (auto& s : v) out.push_back(s.data());
    out.push_back(nullptr);
    return out;
}

// In the child, between fork and exec: only async-signal-safe calls (the KVS thread may hold
// locks in the parent). Everything it needs was built before fork.
[[noreturn]] void exec_child(pid_t parent, char** argv, char** envp, int in_fd, int out_fd,
                             int err_fd, const std::string& exec_error_prefix,
                             const cpu_set_t* cpus, const std::string& bind_error) {
    // Die with cclrun (or the agent), even if it is SIGKILLed; it may already be gone by the time
    // this runs. Kept across exec: an agent started through nsenter dies with cclrun too.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(kExecFailed);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    signal(SIGPIPE, SIG_DFL);
    if (in_fd >= 0 && dup2(in_fd, STDIN_FILENO) < 0) _exit(kExecFailed);
    if (out_fd >= 0 && dup2(out_fd, STDOUT_FILENO) < 0) _exit(kExecFailed);
    if (err_fd >= 0 && dup2(err_fd, STDERR_FILENO) < 0) _exit(kExecFailed);
    // Kept across exec and by every thread the rank starts. A failure only costs speed.
    if (cpus && sched_setaffinity(0, sizeof(cpu_set_t), cpus) != 0)
        write_all(STDERR_FILENO, bind_error.data(), bind_error.size());
    execvpe(argv[0], argv, envp);
    int err = errno;
    write_all(STDERR_FILENO, exec_error_prefix.data(), exec_error_prefix.size());
    const char* why = strerrordesc_np(err);
    if (why) write_all(STDERR_FILENO, why, std::strlen(why));
    write_all(STDERR_FILENO, "\n", 1);
    _exit(kExecFailed);
}

struct Pipe {
    Fd read, write;
};

Pipe make_pipe() {
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) ccl::throw_errno("pipe");
    return {Fd(p[0]), Fd(p[1])};
}

struct StartRequest {
    std::vector<std::string> argv;
    std::vector<std::string> env;
    std::string what;             // for messages; " (pid N)" is added
    std::string exec_error;       // printed before strerror when exec fails
    int stdin_fd = -1;            // -1: ours
    bool with_input = false;      // a pipe to its stdin (agents)
    bool capture = false;         // its stdout and stderr through pipes, written with `prefix`
    bool capture_stderr = false;  // its stderr alone through a pipe, passed on as it comes
    std::string prefix;
    std::optional<cpu_set_t> cpus;  // bound to these
    std::string bind_error;         // printed when binding fails
};

// Starts one process. Throws ccl::Error when a pipe or fork fails.
Child start_child(StartRequest req) {
    std::vector<char*> envp = c_strings(req.env);
    std::vector<char*> argv = c_strings(req.argv);
    Pipe in, out, err;
    if (req.with_input) in = make_pipe();
    if (req.capture) out = make_pipe();
    if (req.capture || req.capture_stderr) err = make_pipe();
    int in_fd = req.with_input ? in.read.get() : req.stdin_fd;
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) ccl::throw_errno("fork");
    if (pid == 0) {
        exec_child(parent, argv.data(), envp.data(), in_fd, out.write.get(), err.write.get(),
                   req.exec_error, req.cpus ? &*req.cpus : nullptr, req.bind_error);
    }
    Child c;
    c.what = req.what + " (pid " + std::to_string(pid) + ")";
    c.pid = pid;
    c.running = true;
    if (req.with_input) {
        fcntl(in.write.get(), F_SETFL, O_NONBLOCK);
        c.input = std::move(in.write);
    }
    if (req.capture) {
        fcntl(out.read.get(), F_SETFL, O_NONBLOCK);
        c.streams.emplace_back(req.prefix, std::move(out.read), STDOUT_FILENO);
    }
    if (err.read.valid()) {
        fcntl(err.read.get(), F_SETFL, O_NONBLOCK);
        c.streams.emplace_back(req.prefix, std::move(err.read), STDERR_FILENO, req.capture);
    }
    return c;  // the other ends close here: EOF arrives once the child (and its children) exit
}

// -------------------------------------------------------------------------------------------------
// Supervising.

struct SupervisorSettings {
    std::string noun = "rank";  // what the children are, in "stopping the other 2 rank(s)"
    std::chrono::seconds grace = kGrace;
    // Sent when stopping; 0 for agents: closing their stdin tells them (and through ssh, which
    // a signal would not cross), and they stop their ranks with SIGTERM themselves.
    int stop_signal = SIGTERM;
    Fd parent_link;  // an agent's stdin: EOF stops the ranks
};

class Supervisor {
public:
    Supervisor(std::vector<Child> children, Fd signals, std::optional<double> timeout_s,
               SupervisorSettings settings)
        : children_(std::move(children)),
          signals_(std::move(signals)),
          timeout_s_(timeout_s),
          settings_(std::move(settings)) {
        if (timeout_s_) {
            job_deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                               std::chrono::duration<double>(*timeout_s_));
        }
    }

    // Runs until every child is reaped and its output drained; returns the exit status.
    int run() {
        for (;;) {
            bool running =
                std::any_of(children_.begin(), children_.end(), [](auto& c) { return c.running; });
            if (!running) {
                if (!drain_deadline_) drain_deadline_ = Clock::now() + kDrainAfterExit;
                if (!any_stream_open()) break;
            }
            poll_once();
            check_deadlines();
        }
        for (auto& c : children_) {
            for (auto& s : c.streams) s.finish();
        }
        return exit_status_;
    }

    std::vector<pid_t> pids() const {
        std::vector<pid_t> out;
        for (const auto& c : children_) out.push_back(c.pid);
        return out;
    }

private:
    bool any_stream_open() const {
        for (const auto& c : children_) {
            for (const auto& s : c.streams) {
                if (s.open()) return true;
            }
        }
        return false;
    }

    void poll_once() {
        std::vector<pollfd> fds{{signals_.get(), POLLIN, 0}};
        std::vector<std::function<void(short)>> handlers{[this](short) { on_signal(); }};
        if (settings_.parent_link.valid()) {
            fds.push_back({settings_.parent_link.get(), POLLIN, 0});
            handlers.push_back([this](short) { on_parent_link(); });
        }
        for (auto& c : children_) {
            if (c.input.valid() && !c.pending.empty()) {
                fds.push_back({c.input.get(), POLLOUT, 0});
                handlers.push_back([&c](short) { write_input(c); });
            }
            for (auto& s : c.streams) {
                if (!s.open()) continue;
                fds.push_back({s.fd(), POLLIN, 0});
                handlers.push_back([&s](short) { s.on_readable(); });
            }
        }
        int n = poll(fds.data(), fds.size(), timeout_ms());
        if (n < 0) {
            if (errno == EINTR) return;
            ccl::throw_errno("poll");
        }
        for (size_t i = 0; i < fds.size(); ++i) {
            if (fds[i].revents) handlers[i](fds[i].revents);
        }
    }

    // Feeds an agent its job spec; an agent that is gone (EPIPE) is reaped as usual.
    static void write_input(Child& c) {
        ssize_t r = write(c.input.get(), c.pending.data(), c.pending.size());
        if (r > 0) {
            c.pending.erase(0, static_cast<size_t>(r));
        } else if (r < 0 && errno != EAGAIN && errno != EINTR) {
            c.pending.clear();
        }
    }

    // The agent's link to cclrun: anything that arrives is ignored; EOF means cclrun is stopping
    // the job (or is gone), so the ranks stop, quietly: cclrun says why.
    void on_parent_link() {
        char buf[4096];
        ssize_t r = read(settings_.parent_link.get(), buf, sizeof(buf));
        if (r > 0 || (r < 0 && (errno == EAGAIN || errno == EINTR))) return;
        settings_.parent_link.reset();
        stop(kParentGone);
    }

    int timeout_ms() const {
        std::optional<Clock::time_point> next;
        auto consider = [&](std::optional<Clock::time_point> t) {
            if (t && (!next || *t < *next)) next = t;
        };
        if (!stopping_) consider(job_deadline_);
        consider(kill_deadline_);
        consider(drain_deadline_);
        if (!next) return -1;  // a signal (SIGCHLD included), output or the link wakes us
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
                say("got " + signal_name(sig) + " again; killing the " + settings_.noun + "s now");
                kill_all(SIGKILL);
            } else {
                say("got " + signal_name(sig) + "; stopping the " + settings_.noun + "s");
                stop(128 + sig);
            }
        }
    }

    void reap() {
        for (;;) {
            int status = 0;
            pid_t pid = waitpid(-1, &status, WNOHANG);
            if (pid <= 0) return;  // 0: none left exited; -1 ECHILD: none left at all
            auto it = std::find_if(children_.begin(), children_.end(),
                                   [&](auto& c) { return c.pid == pid; });
            if (it == children_.end()) continue;
            it->running = false;
            it->input.reset();
            it->pending.clear();
            int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
            it->exit_code = code;
            if (code == 0 || stopping_) continue;  // children we stopped are not failures
            // What it said before it died (an agent: which rank failed) comes before our word.
            for (auto& s : it->streams) s.drain_now();
            std::string how = WIFEXITED(status)
                                  ? "exited with status " + std::to_string(code)
                                  : "was killed by signal " + signal_name(WTERMSIG(status));
            auto [points_at, evidence] = culprit(*it);
            say(it->what + " " + how + points_at + stopping_note());
            if (!evidence.empty()) say(evidence);
            stop(code);
        }
    }

    // Whom the failure of rank `failed` points at, when it is another rank: one that is stopped;
    // else the end of the chain of names: the rank that failed's last error names, and on while
    // the named rank failed too (it exited non-zero, or logged a ccl error) and its own error
    // names another. Returns the clause for the failure's line ("" when it points at nobody
    // else) and a line quoting the error that names the culprit ("" when none does).
    std::pair<std::string, std::string> culprit(const Child& failed) {
        if (failed.rank < 0) return {};  // an agent: its own line names the rank
        for (auto& c : children_)
            for (auto& s : c.streams) s.drain_now();  // what the others said so far
        auto said = [](const Child& c) {
            std::string text;
            for (const auto& s : c.streams) text += s.tail() + "\n";  // stderr (last) counts first
            return text;
        };
        auto has_failed = [&](const Child& c) {
            return (!c.running && c.exit_code != 0) || said(c).find("[ccl E ") != std::string::npos;
        };
        auto rank_of = [&](int r) -> const Child* {
            for (const auto& c : children_)
                if (c.rank == r) return &c;
            return nullptr;
        };
        const Child* at = &failed;
        std::optional<cclrun::NamedRank> named;
        const Child* namer = nullptr;
        std::vector<int> seen{failed.rank};
        int elsewhere = -1;  // a named rank on another host
        for (;;) {
            auto n = cclrun::rank_named_in(said(*at), at->rank);
            if (!n || std::find(seen.begin(), seen.end(), n->rank) != seen.end()) break;
            named = n;
            namer = at;
            const Child* next = rank_of(n->rank);
            if (!next) {
                elsewhere = n->rank;
                break;
            }
            seen.push_back(n->rank);
            at = next;
            if (!has_failed(*next)) break;
        }
        const Child* stopped = nullptr;
        for (const auto& c : children_)
            if (c.running && c.rank >= 0 && cclrun::is_stopped(c.pid))
                if (!stopped || &c == at) stopped = &c;
        const Child* blamed = stopped ? stopped : at;
        auto names = [&](const Child* c) { return named && c && named->rank == c->rank; };
        std::string evidence;
        if (named && (names(blamed) || (!stopped && elsewhere >= 0)))
            evidence = "rank " + std::to_string(namer->rank) + "'s last error names rank " +
                       std::to_string(named->rank) + ": " + named->line;
        if (!stopped && elsewhere >= 0)
            return {
                "; the failure points at rank " + std::to_string(elsewhere) + " (on another host)",
                evidence};
        if (blamed == &failed) return {};
        std::string by =
            names(blamed) ? "rank " + std::to_string(namer->rank) + "'s error names it" : "";
        std::string why;
        if (blamed == stopped) {
            why = "it is stopped (state T: SIGSTOP, ^Z or a debugger)" +
                  (by.empty() ? "" : ", and " + by);
        } else if (has_failed(*blamed)) {
            why = by + ", and it failed too";
        } else if (blamed->running) {
            why = by + ", and it is still running (hung, or not calling the same collective)";
        } else {
            why = by + ", and it had exited with status " + std::to_string(blamed->exit_code);
        }
        return {"; the failure points at " + blamed->what + ": " + why, evidence};
    }

    std::string stopping_note() const {
        size_t others =
            std::count_if(children_.begin(), children_.end(), [](auto& c) { return c.running; });
        return others
                   ? "; stopping the other " + std::to_string(others) + " " + settings_.noun + "(s)"
                   : "";
    }

    void check_deadlines() {
        auto now = Clock::now();
        if (!stopping_ && job_deadline_ && now >= *job_deadline_) {
            say("the job timed out after " + seconds_text(*timeout_s_) + " s; stopping the " +
                settings_.noun + "s");
            stop(kTimedOut);
        }
        if (kill_deadline_ && now >= *kill_deadline_) {
            for (auto& c : children_) {
                if (c.running) {
                    std::string why = settings_.stop_signal ? signal_name(settings_.stop_signal)
                                                            : std::string("its stdin closing");
                    say(c.what + " did not stop within " + std::to_string(settings_.grace.count()) +
                        " s of " + why + "; sending SIGKILL");
                }
            }
            kill_all(SIGKILL);
            kill_deadline_.reset();
        }
        if (drain_deadline_ && now >= *drain_deadline_) {
            // Every child is gone but something they started keeps the output open: stop reading.
            for (auto& c : children_) {
                for (auto& s : c.streams) s.finish();
            }
        }
    }

    // First cause wins: its status becomes ours. Agents see their stdin close.
    void stop(int status) {
        if (stopping_) return;
        stopping_ = true;
        exit_status_ = status;
        for (auto& c : children_) {
            c.input.reset();
            c.pending.clear();
        }
        if (settings_.stop_signal) {
            kill_all(settings_.stop_signal);
            kill_all(SIGCONT);  // a stopped rank gets to handle it too, rather than our SIGKILL
        }
        kill_deadline_ = Clock::now() + settings_.grace;
    }

    void kill_all(int sig) {
        for (auto& c : children_) {
            if (c.running) kill(c.pid, sig);  // an unreaped zombie ignores it harmlessly
        }
    }

    std::vector<Child> children_;
    Fd signals_;
    std::optional<double> timeout_s_;
    SupervisorSettings settings_;
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

// Blocks the signals we handle before any thread (the KVS server's) or child exists, so that they
// arrive only through the returned signalfd; children unblock them before exec. SIGINT and
// SIGTERM are reset to their default first (a script's background job starts with SIGINT
// ignored, and an ignored signal never reaches a signalfd); an ignored SIGHUP (nohup) stays so.
Fd handle_signals() {
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    struct sigaction hup {};
    sigaction(SIGHUP, nullptr, &hup);
    sigset_t handled;
    sigemptyset(&handled);
    for (int s : {SIGCHLD, SIGINT, SIGTERM}) sigaddset(&handled, s);
    if (hup.sa_handler != SIG_IGN) sigaddset(&handled, SIGHUP);
    if (sigprocmask(SIG_BLOCK, &handled, nullptr) != 0) ccl::throw_errno("sigprocmask");
    Fd signals(signalfd(-1, &handled, SFD_NONBLOCK | SFD_CLOEXEC));
    if (!signals.valid()) ccl::throw_errno("signalfd");
    signal(SIGPIPE, SIG_IGN);  // a closed stdout must not kill the supervisor (children reset it)
    return signals;
}

// Kills and reaps what was started when starting the rest failed.
void abandon(std::vector<Child>& started) {
    for (auto& c : started) kill(c.pid, SIGKILL);
    for (auto& c : started) waitpid(c.pid, nullptr, 0);
}

// Starts a host's (or this machine's) ranks. `spec` says which; output through pipes when
// `capture` (an agent always captures: its stdout is its link's; ranks on this machine only with
// --label), and stderr always. Throws ccl::Error when a pipe or fork fails, after killing those it
// started.
std::vector<Child> start_ranks(const cclrun::JobSpec& spec, bool capture, int stdin_fd,
                               const std::string& where) {
    std::vector<cpu_set_t> cpus;
    if (spec.bind != cclrun::Bind::none) {
        std::string why;
        cpus = ccl::core_sets(spec.local_size,
                              spec.bind == cclrun::Bind::core ? 1 : spec.cores_per_rank, why);
        if (cpus.empty() && (spec.bind != cclrun::Bind::automatic || spec.cores_per_rank))
            say("not binding the ranks" + where + ": " + why);
    }
    // Ranks cclrun leaves unbound stay so, unless the user set CCL_BIND: the library would bind
    // them itself by local rank, which piles fake nodes' ranks sharing one machine onto the same
    // cores (and `--bind-to none` means none).
    const bool keep_unbound =
        cpus.empty() && !std::getenv("CCL_BIND") &&
        std::none_of(spec.env.begin(), spec.env.end(),
                     [](const std::string& kv) { return kv.rfind("CCL_BIND=", 0) == 0; });
    std::vector<Child> ranks;
    try {
        for (int l = 0; l < spec.local_size; ++l) {
            int rank = spec.first_rank + l;
            StartRequest req;
            req.argv = spec.argv;
            std::vector<std::string> set = spec.env;
            if (keep_unbound) set.push_back("CCL_BIND=none");
            for (auto& v : rank_variables(rank, spec.size, l, spec.local_size, spec.kvs_address)) {
                set.push_back(std::move(v));
            }
            req.env = environment_with(set);
            req.what = "rank " + std::to_string(rank);
            req.exec_error = g_prefix + "rank " + std::to_string(rank) + where +
                             ": cannot execute '" + spec.argv[0] + "': ";
            req.stdin_fd = stdin_fd;
            req.capture = capture;
            req.capture_stderr = true;  // to read what a failed rank said last
            req.prefix = spec.label ? "[" + std::to_string(rank) + "] " : "";
            if (!cpus.empty()) {
                req.cpus = cpus[size_t(l)];
                req.bind_error = g_prefix + "rank " + std::to_string(rank) + where +
                                 ": could not bind it to its cores; it runs unbound\n";
            }
            ranks.push_back(start_child(std::move(req)));
            ranks.back().rank = rank;
            if (!where.empty()) ranks.back().what += where;
        }
    } catch (const ccl::Error& e) {
        say(std::string("could not start all ranks: ") + e.what());
        abandon(ranks);
        std::vector<pid_t> pids;
        for (auto& r : ranks) pids.push_back(r.pid);
        remove_leftover_segments(pids);
        throw;
    }
    return ranks;
}

int run_local(const Options& o) {
    Fd signals = handle_signals();
    ccl::kvs::Server server(ccl::config().kvs_iface, 0, std::nullopt,
                            ccl::kvs::ServerLimits::for_job(o.nranks));
    cclrun::JobSpec spec;
    spec.kvs_address = server.address();
    spec.size = spec.local_size = o.nranks;
    spec.label = o.label;
    spec.bind = o.bind;
    spec.cores_per_rank = o.cores_per_rank;
    spec.argv = o.argv;
    spec.env = rendezvous_variables("127.0.0.1", [](const char* name) { return getenv(name); });
    std::vector<Child> ranks;
    try {
        ranks = start_ranks(spec, o.label, -1, "");
    } catch (const ccl::Error&) {
        return 1;
    }
    Supervisor sup(std::move(ranks), std::move(signals), o.timeout_s, {});
    int status = sup.run();
    remove_leftover_segments(sup.pids());
    return status;
}

// The variables that go to the ranks on every host: CCL_* and FI_* (but the job's own), and -x.
std::vector<std::string> exported_environment(const Options& o) {
    std::vector<std::string> out;
    for (char** e = environ; *e; ++e) {
        std::string_view kv(*e);
        std::string_view name = kv.substr(0, kv.find('='));
        if (name == "CCL_RANK" || name == "CCL_SIZE" || name == "CCL_KVS_ADDRESS") continue;
        if (name.rfind("CCL_", 0) == 0 || name.rfind("FI_", 0) == 0) out.emplace_back(kv);
    }
    for (const auto& x : o.exports) {
        if (x.find('=') != std::string::npos) {
            out.push_back(x);
        } else if (const char* v = std::getenv(x.c_str())) {
            out.push_back(x + "=" + v);
        } else {
            throw BadUsage("-x " + x + ": " + x + " is not set here (use -x " + x + "=VALUE)");
        }
    }
    return out;
}

std::string current_directory() {
    std::vector<char> buf(4096);
    if (!getcwd(buf.data(), buf.size())) ccl::throw_errno("getcwd");
    return buf.data();
}

std::string own_executable() {
    std::vector<char> buf(4096);
    ssize_t n = readlink("/proc/self/exe", buf.data(), buf.size() - 1);
    if (n <= 0) ccl::throw_errno("readlink /proc/self/exe");
    return std::string(buf.data(), static_cast<size_t>(n));
}

// Several hosts: an agent on each, started through the launcher command.
int run_hosts(const Options& o) {
    auto placements = cclrun::place_ranks(o.hosts, o.nranks, o.ppn);
    int size = placements.back().first_rank + placements.back().nranks;
    std::vector<std::string> env = exported_environment(o);
    for (auto& v : rendezvous_variables(placements.front().host, [&](const char* name) {
             std::string prefix = std::string(name) + "=";
             return std::any_of(env.begin(), env.end(),
                                [&](const std::string& kv) { return kv.rfind(prefix, 0) == 0; });
         }))
        env.push_back(std::move(v));
    std::vector<std::string> agent_command = {own_executable(), "--agent"};
    std::string cwd = current_directory();
    cclrun::launcher_argv(o.launcher, "", {});  // a usage error before anything starts

    Fd signals = handle_signals();
    ccl::kvs::Server server(ccl::config().kvs_iface, 0, std::nullopt,
                            ccl::kvs::ServerLimits::for_job(size));
    if (server.address().rfind("127.", 0) == 0 && placements.size() > 1) {
        say("warning: the KVS is at a loopback address (" +
            server.address().substr(0, server.address().find('/')) +
            "): ranks on other hosts cannot reach it; set CCL_KVS_IFACE");
    }
    std::vector<Child> agents;
    try {
        for (const auto& p : placements) {
            cclrun::JobSpec spec;
            spec.host = p.host;
            spec.kvs_address = server.address();
            spec.cwd = cwd;
            spec.size = size;
            spec.first_rank = p.first_rank;
            spec.local_size = p.nranks;
            spec.label = o.label;
            spec.bind = o.bind == cclrun::Bind::automatic && !o.cores_per_rank ? cclrun::Bind::none
                                                                               : o.bind;
            spec.cores_per_rank = o.cores_per_rank;
            spec.env = env;
            spec.argv = o.argv;
            StartRequest req;
            req.argv = cclrun::launcher_argv(o.launcher, p.host, agent_command);
            req.env = environment_with({});
            req.what = "the agent on " + p.host;
            req.exec_error = g_prefix + "cannot start the agent on " + p.host +
                             ": cannot execute '" + req.argv[0] + "': ";
            req.with_input = true;
            req.capture = true;  // relayed line by line: lines of different hosts never mix
            Child c = start_child(std::move(req));
            c.what = "the agent on " + p.host + " (" + rank_range(p.first_rank, p.nranks) +
                     ", pid " + std::to_string(c.pid) + ")";
            c.pending = cclrun::encode(spec);
            agents.push_back(std::move(c));
        }
    } catch (const ccl::Error& e) {
        say(std::string("could not start the agents: ") + e.what());
        abandon(agents);
        return 1;
    }
    SupervisorSettings settings;
    settings.noun = "host";
    settings.grace = kAgentGrace;
    settings.stop_signal = 0;
    Supervisor sup(std::move(agents), std::move(signals), o.timeout_s, std::move(settings));
    return sup.run();
}

// Reads the job spec from stdin, waiting at most kSpecTimeout.
cclrun::JobSpec read_spec() {
    auto deadline = Clock::now() + kSpecTimeout;
    std::string data;
    for (;;) {
        if (auto spec = cclrun::decode(data)) return *spec;
        auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
        if (left <= 0) throw std::runtime_error("no job spec from cclrun on stdin within 30 s");
        pollfd p{STDIN_FILENO, POLLIN, 0};
        int n = poll(&p, 1, static_cast<int>(left));
        if (n < 0 && errno != EINTR) ccl::throw_errno("poll");
        if (n <= 0) continue;
        char buf[16 << 10];
        ssize_t r = read(STDIN_FILENO, buf, sizeof(buf));
        if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (r < 0) ccl::throw_errno("read stdin");
        if (r == 0) throw std::runtime_error("stdin closed before the job spec (cclrun is gone)");
        data.append(buf, static_cast<size_t>(r));
    }
}

// cclrun --agent: started on a host by cclrun, with the job spec on stdin.
int run_agent() {
    Fd signals = handle_signals();
    cclrun::JobSpec spec = read_spec();
    g_prefix = "cclrun@" + spec.host + ": ";
    if (!spec.cwd.empty() && chdir(spec.cwd.c_str()) != 0) {
        say("cannot enter the working directory '" + spec.cwd + "': " + std::strerror(errno));
        return 1;
    }
    Fd devnull(open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (!devnull.valid()) ccl::throw_errno("open /dev/null");
    std::vector<Child> ranks;
    try {
        ranks = start_ranks(spec, true, devnull.get(), " on " + spec.host);
    } catch (const ccl::Error&) {
        return 1;
    }
    SupervisorSettings settings;
    settings.parent_link = Fd(STDIN_FILENO);
    Supervisor sup(std::move(ranks), std::move(signals), std::nullopt, std::move(settings));
    int status = sup.run();
    remove_leftover_segments(sup.pids());
    return status;
}

}  // namespace

int main(int argc, char** argv) {
    std::optional<Options> opts;
    try {
        opts = parse_args(argc, argv);
    } catch (const BadUsage& e) {
        say(e.what() + std::string(kShortUsage));
        return kUsageError;
    }
    if (!opts) {
        write_all(STDOUT_FILENO, kUsage, std::strlen(kUsage));
        return 0;
    }
    try {
        if (opts->agent) return run_agent();
        if (!opts->hosts.empty()) return run_hosts(*opts);
        return run_local(*opts);
    } catch (const BadUsage& e) {
        say(e.what() + std::string(kShortUsage));
        return kUsageError;
    } catch (const std::exception& e) {
        say(e.what());
        return 1;
    }
}
