// ccl_bench: times ccl collectives over a range of sizes and prints a table like nccl-tests.
// Start it under cclrun, mpirun or torchrun (ccl_comm_create_from_env):
//   cclrun -n 4 ccl_bench -c allreduce,alltoall -b 8 -e 16M --csv out.csv
//
// For every case (collective, datatype, reduction, placement) and size: warm up, choose the
// iteration count (the same on every rank), time a loop of calls on every rank, report the
// slowest rank's average, and check one more call (or every call) against a reference.
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench.h"
#include "collective.h"
#include "report.h"

namespace bench {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Exits on a ccl failure: the launcher then stops the other ranks.
void check(ccl_result_t r, const char* what) {
    if (r == CCL_SUCCESS) return;
    std::fprintf(stderr, "ccl_bench: %s: %s: %s\n", what, ccl_strerror(r), ccl_last_error());
    std::exit(1);
}

// A line on stderr every 10 s once a run has taken that long, from a thread of its own, so that
// it comes during a long row too (a large size checked at every call, a slow machine) without a
// clock read in the timed loops: which row runs, since when.
class Progress {
public:
    ~Progress() {
        {
            std::lock_guard<std::mutex> lock(mu_);
            stop_ = true;
        }
        cv_.notify_one();
        if (thread_.joinable()) thread_.join();
    }
    void start(size_t rows) {
        rows_ = rows;
        start_ = Clock::now();
        thread_ = std::thread([this] { run(); });
    }
    // The row now running.
    void now(const char* coll, size_t bytes, size_t row) {
        std::lock_guard<std::mutex> lock(mu_);
        coll_ = coll, bytes_ = bytes, row_ = row, row_start_ = Clock::now();
    }

private:
    void run() {
        std::unique_lock<std::mutex> lock(mu_);
        while (!cv_.wait_for(lock, std::chrono::seconds(10), [&] { return stop_; }))
            if (coll_)
                std::fprintf(stderr,
                             "ccl_bench: %.0f s: %s %s running for %.0f s, row %zu of about %zu\n",
                             seconds_since(start_), coll_, format_bytes(bytes_).c_str(),
                             seconds_since(row_start_), row_, rows_);
    }

    std::mutex mu_;
    std::condition_variable cv_;
    bool stop_ = false;
    const char* coll_ = nullptr;
    size_t bytes_ = 0, row_ = 0, rows_ = 0;
    Clock::time_point start_, row_start_;
    std::thread thread_;
};

class Runner {
public:
    Runner(ccl_comm_t comm, const Options& o, Report& report)
        : comm_(comm), o_(o), report_(report) {
        check(ccl_comm_rank(comm, &rank_), "ccl_comm_rank");
        check(ccl_comm_size(comm, &ranks_), "ccl_comm_size");
    }

    // Every case, each over its sizes.
    void run() {
        std::vector<Spec> specs = cases();
        for (const Spec& s : specs) total_rows_ += sizes(s.coll).size();
        if (rank_ == 0) progress_.start(total_rows_);
        for (const Spec& s : specs) {
            Case c(comm_, rank_, ranks_, o_, s.coll, s.dtype, s.op, s.in_place);
            run_case(c);
        }
    }

private:
    struct Timing {
        double us;      // the slowest rank's average time per call
        double min_us;  // the fastest rank's
        int iters;
        int64_t wrong;  // over all ranks; -1 when not checked
    };

    struct Spec {
        Coll coll;
        ccl_datatype_t dtype;
        ccl_reduction_t op;
        bool in_place;
    };

    // Every case of the run, in order: each collective at each datatype, reduction and placement
    // it takes.
    std::vector<Spec> cases() const {
        std::vector<Spec> out;
        for (Coll coll : o_.colls) {
            const CollInfo& ci = info(coll);
            std::vector<ccl_datatype_t> dtypes = o_.dtypes;
            if (coll == Coll::barrier) dtypes.resize(1);
            std::vector<ccl_reduction_t> ops = ci.reduces ? o_.ops : std::vector{CCL_SUM};
            std::vector<bool> places = ci.places == Places::both ? o_.in_place : std::vector{false};
            for (ccl_datatype_t dtype : dtypes)
                for (ccl_reduction_t op : ops)
                    for (bool in_place : places) out.push_back({coll, dtype, op, in_place});
        }
        return out;
    }

    std::vector<size_t> sizes(Coll coll) const {
        return coll == Coll::barrier ? std::vector<size_t>{0} : o_.size_list();
    }

    void run_case(Case& c) {
        const char* name = info(c.coll()).name;
        report_.section(name, c.title());
        size_t previous = SIZE_MAX;
        for (size_t size : sizes(c.coll())) {
            ++rows_done_;
            c.resize(size);
            if (c.bytes() == previous) continue;  // rounded to the size of the last row
            previous = c.bytes();
            progress_.now(name, c.bytes(), rows_done_);
            std::optional<Timing> t = measure(c);
            if (!t) {
                report_.skipped(std::string(name) + " is not supported: " + unsupported_);
                return;
            }
            double algbw = t->us > 0 ? double(c.bytes()) / t->us / 1e3 : 0;
            report_.row(Row{name, ranks_, c.bytes(), c.count(), c.dtype_name(), c.op_name(),
                            c.root(), c.in_place(), t->us, algbw,
                            algbw * bus_factor(c.coll(), ranks_), t->wrong, t->iters, t->min_us});
        }
        report_.section_end();
    }

    // Times one size. nullopt when ccl does not support the case.
    std::optional<Timing> measure(Case& c) {
        c.prepare();  // defined inputs, for the warm-up too
        // The first call says whether ccl supports the case, and roughly how long a call takes.
        Clock::time_point t0 = Clock::now();
        ccl_result_t r = c.issue();
        if (r == CCL_ERROR_UNSUPPORTED) {
            unsupported_ = *ccl_last_error() ? ccl_last_error() : ccl_strerror(r);
            return std::nullopt;
        }
        check(r, "warm-up call");
        double first = max_over_ranks(seconds_since(t0));
        // The rest of the warm-up takes at most a quarter of the time per size.
        int warmup = int(std::min(o_.warmup - 1.0, o_.time_s / 4 / first));
        for (int i = 0; i < warmup; ++i) check(c.issue(), "warm-up call");

        int iters = o_.iters ? o_.iters : choose_iters(c, first);
        uint64_t wrong = 0;
        const double mine = loop(c, iters, wrong) / iters * 1e6;
        double spread[2] = {mine, -mine};  // the slowest rank's, and the fastest's negated
        check(ccl_allreduce(spread, spread, 2, CCL_FLOAT64, CCL_MAX, comm_, nullptr, nullptr),
              "ccl_allreduce");
        const double us = spread[0], min_us = -spread[1];
        if (o_.check == Check::last) {
            c.prepare();
            check(c.issue(), "checked call");
            wrong = c.wrong();
        }
        int64_t total_wrong = o_.check == Check::none ? -1 : int64_t(sum_over_ranks(wrong));
        return Timing{us, min_us, iters, total_wrong};
    }

    // Enough iterations for about o_.time_s of timing, the same on every rank: time growing loops
    // until one takes a tenth of that.
    int choose_iters(Case& c, double first_call_s) {
        int k = int(std::clamp(o_.time_s / 20 / first_call_s, 1.0, double(o_.max_iters)));
        for (;;) {
            uint64_t ignored = 0;
            Clock::time_point t0 = Clock::now();
            loop(c, k, ignored);
            double t = std::max(max_over_ranks(seconds_since(t0)), 1e-9);
            if (t >= o_.time_s / 10 || k >= o_.max_iters)
                return int(
                    std::clamp(o_.time_s * k / t, double(o_.min_iters), double(o_.max_iters)));
            k = std::min(k * 4, o_.max_iters);
        }
    }

    // Runs `iters` timed calls; returns this rank's seconds in them. With --check all, every call
    // gets fresh inputs first and is checked after (neither timed), adding its wrong elements.
    double loop(Case& c, int iters, uint64_t& wrong) {
        check(ccl_barrier(comm_, nullptr), "ccl_barrier");
        if (o_.check != Check::all) {
            Clock::time_point t0 = Clock::now();
            for (int i = 0; i < iters; ++i) check(c.issue(), "timed call");
            return seconds_since(t0);
        }
        double s = 0;
        for (int i = 0; i < iters; ++i) {
            c.prepare();
            check(ccl_barrier(comm_, nullptr), "ccl_barrier");
            Clock::time_point t0 = Clock::now();
            check(c.issue(), "timed call");
            s += seconds_since(t0);
            wrong += c.wrong();
        }
        return s;
    }

    double max_over_ranks(double x) {
        check(ccl_allreduce(&x, &x, 1, CCL_FLOAT64, CCL_MAX, comm_, nullptr, nullptr),
              "ccl_allreduce");
        return x;
    }
    uint64_t sum_over_ranks(uint64_t x) {
        check(ccl_allreduce(&x, &x, 1, CCL_UINT64, CCL_SUM, comm_, nullptr, nullptr),
              "ccl_allreduce");
        return x;
    }

    ccl_comm_t comm_;
    const Options& o_;
    Report& report_;
    int rank_ = 0, ranks_ = 1;
    std::string unsupported_;
    size_t rows_done_ = 0, total_rows_ = 0;
    Progress progress_;
};

std::string cpu_model() {
    std::ifstream in("/proc/cpuinfo");
    for (std::string line; std::getline(in, line);)
        if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
    return "unknown";
}

// The cpus this process may run on, as the kernel lists them ("0-3,8"): whether cclrun (or
// another launcher) bound it.
std::string affinity() {
    std::ifstream in("/proc/self/status");
    for (std::string line; std::getline(in, line);)
        if (line.rfind("Cpus_allowed_list:", 0) == 0)
            return line.substr(line.find_first_not_of(" \t", line.find(':') + 1));
    return "unknown";
}

RunInfo run_info(ccl_comm_t comm, int ranks) {
    RunInfo run;
    run.ranks = ranks;
    char transports[128] = "";
    check(ccl_comm_nodes(comm, &run.nodes, transports, sizeof transports), "ccl_comm_nodes");
    run.transport = transports;
    int major = 0, minor = 0, patch = 0;
    check(ccl_get_version(&major, &minor, &patch), "ccl_get_version");
    run.version = std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
    run.cpu = cpu_model();
    run.cpus = int(sysconf(_SC_NPROCESSORS_ONLN));
    run.affinity = affinity();
    cpu_set_t own;
    run.own_cpus = sched_getaffinity(0, sizeof own, &own) == 0 ? CPU_COUNT(&own) : 0;
    check(ccl_comm_threads(comm, &run.threads), "ccl_comm_threads");
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    run.host = host;
    char date[64] = "";
    std::time_t now = std::time(nullptr);
    std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S%z", std::localtime(&now));
    run.date = date;
    return run;
}

int run(int argc, char** argv) {
    Options o = parse_options(argc, argv);
    ccl_comm_t comm;
    check(ccl_comm_create_from_env(&comm), "ccl_comm_create_from_env");
    int rank = 0, ranks = 1;
    check(ccl_comm_rank(comm, &rank), "ccl_comm_rank");
    check(ccl_comm_size(comm, &ranks), "ccl_comm_size");

    Report report(o, rank == 0);
    std::string error = report.open_files();
    if (o.root >= ranks)
        error = "root " + std::to_string(o.root) + " is not a rank (0.." +
                std::to_string(ranks - 1) + ")";
    double failed = !error.empty();  // rank 0's verdict, so that every rank stops
    check(ccl_allreduce(&failed, &failed, 1, CCL_FLOAT64, CCL_MAX, comm, nullptr, nullptr),
          "ccl_allreduce");
    if (failed) {
        if (rank == 0) std::fprintf(stderr, "ccl_bench: %s\n", error.c_str());
        check(ccl_comm_destroy(comm), "ccl_comm_destroy");
        return 2;
    }

    RunInfo run = run_info(comm, ranks);
    check(ccl_comm_shm_bytes(comm, &run.shm_bytes), "ccl_comm_shm_bytes");
    report.header(run);
    Runner(comm, o, report).run();
    int64_t wrong = report.finish();
    check(ccl_comm_destroy(comm), "ccl_comm_destroy");
    return wrong > 0 ? 1 : 0;
}

}  // namespace
}  // namespace bench

int main(int argc, char** argv) {
    try {
        return bench::run(argc, argv);
    } catch (const std::bad_alloc&) {
        std::fprintf(stderr, "ccl_bench: out of memory (try a smaller --max-bytes)\n");
        return 1;
    }
}
