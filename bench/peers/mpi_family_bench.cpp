// mpi_family_bench: times the MPI collectives ccl is compared with, the way ccl_bench times ccl's,
// so that tools/compare_peers.sh can put both in one table.
//
//   mpirun.openmpi --allow-run-as-root --oversubscribe -np 4 build-peers/mpi_family_bench.openmpi
//   mpiexec.mpich -n 4 build-peers/mpi_family_bench.mpich --only allreduce,alltoall --csv out.csv
//
// Collectives (CSV names): allreduce, broadcast, reduce, allgather, allgatherv, reduce_scatter
// (MPI_Reduce_scatter_block), alltoall, alltoallv, barrier, sendrecv (a ring: every rank posts
// MPI_Irecv from rank-1, MPI_Send to rank+1, then waits). float32, MPI_SUM, root 0, out of place.
//
// Sizes follow nccl-tests: allreduce, broadcast, reduce: count*4 bytes; allgather(v): the bytes
// every rank receives in all (ranks*sendcount*4); reduce_scatter: the bytes every rank sends in
// all; alltoall(v): the bytes every rank sends in all; sendrecv: the bytes every rank sends. Sizes
// that are shared out in per-rank blocks are rounded down to whole blocks of at least one element,
// and a size that rounds to the one before it is skipped. The v-variants use equal counts.
//
// Sizes: --min, --min*--factor, ... up to --max; with --with-max also --max itself when that ladder
// misses it (8 B .. 64 MiB by 8x stops at 16 MiB).
//
// Timing, per size: untimed warm-up calls, the first one timed (a collective that took --slow
// seconds or more gets one timed call and no calibration); calibration (batches of k calls, k
// growing, until the slowest rank needed target/20, and that batch once more; see choose_iters)
// gives an iteration count for about --target seconds, the same on every rank; then MPI_Barrier and
// one timed loop. time = the MAX over ranks of the per-rank average per call. algbw = size/time;
// busbw = algbw * 2(n-1)/n (allreduce), * (n-1)/n (allgather(v), reduce_scatter, alltoall(v)),
// * 1 (broadcast, reduce, sendrecv). The output of the last timed call is checked on every rank
// (#wrong: wrong elements summed over ranks); inputs are small integers, so the float sums are
// exact in any order.

// The C API only: the deprecated C++ bindings' headers do not compile cleanly under -Wextra.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

enum class Coll {
    allreduce,
    broadcast,
    reduce,
    allgather,
    allgatherv,
    reduce_scatter,
    alltoall,
    alltoallv,
    barrier,
    sendrecv
};

struct CollInfo {
    const char* name;
    Coll coll;
    bool reduces;                          // uses MPI_SUM: op column "sum", else "none"
    bool rooted;                           // root column 0, else -1
    bool blocked;                          // size is shared out in per-rank blocks
    enum Bus { twice, gather, once } bus;  // busbw/algbw: 2(n-1)/n, (n-1)/n, 1
};

const CollInfo kColls[] = {
    {"allreduce", Coll::allreduce, true, false, false, CollInfo::twice},
    {"broadcast", Coll::broadcast, false, true, false, CollInfo::once},
    {"reduce", Coll::reduce, true, true, false, CollInfo::once},
    {"allgather", Coll::allgather, false, false, true, CollInfo::gather},
    {"allgatherv", Coll::allgatherv, false, false, true, CollInfo::gather},
    {"reduce_scatter", Coll::reduce_scatter, true, false, true, CollInfo::gather},
    {"alltoall", Coll::alltoall, false, false, true, CollInfo::gather},
    {"alltoallv", Coll::alltoallv, false, false, true, CollInfo::gather},
    {"barrier", Coll::barrier, false, false, false, CollInfo::once},
    {"sendrecv", Coll::sendrecv, false, false, false, CollInfo::once},
};

double bus_factor(const CollInfo& c, int n) {
    switch (c.bus) {
        case CollInfo::twice: return 2.0 * (n - 1) / n;
        case CollInfo::gather: return double(n - 1) / n;
        case CollInfo::once: return 1;
    }
    return 1;
}

struct Options {
    std::vector<const CollInfo*> colls;
    size_t min_bytes = 8;
    size_t max_bytes = size_t(64) << 20;
    size_t factor = 2;
    double target_s = 0.2;
    double slow_s = 0.5;
    long min_iters = 3;
    long max_iters = 100000;
    int warmup = -1;  // -1: by size
    bool check = true;
    bool with_max = false;
    std::string csv;
};

int g_rank = 0, g_size = 1;

[[noreturn]] void leave(int code) {
    MPI_Finalize();
    std::exit(code);
}

// Every rank parses the same arguments, so every rank reaches the same verdict; rank 0 speaks.
[[noreturn]] void usage(int code) {
    if (g_rank == 0)
        std::fprintf(
            code ? stderr : stdout,
            "usage: mpi_family_bench [options]   (start it with mpirun/mpiexec -n N)\n"
            "  --only LIST       collectives, comma-separated, or all (default all):\n"
            "                    allreduce,broadcast,reduce,allgather,allgatherv,\n"
            "                    reduce_scatter,alltoall,alltoallv,barrier,sendrecv\n"
            "  --min SIZE        smallest size (default 8; K, M, G suffixes: 64K)\n"
            "  --max SIZE        largest size (default 64M)\n"
            "  --factor N        size multiplier between rows (default 2)\n"
            "  --with-max        also measure --max when the factor ladder misses it\n"
            "  --target SECONDS  time of one timed loop (default 0.2)\n"
            "  --min-iters N     fewest timed calls per size (default 3)\n"
            "  --max-iters N     most timed calls per size (default 100000)\n"
            "  --warmup N        untimed calls per size (default 5, 2 above 64K, 1 above 4M)\n"
            "  --slow SECONDS    a size whose first warm-up call took this long or more gets\n"
            "                    one timed call, no calibration (default 0.5)\n"
            "  --no-check        skip the result check (#wrong is then -1)\n"
            "  --csv FILE        also write the rows as CSV (rank 0)\n"
            "  -h, --help\n");
    leave(code);
}

[[noreturn]] void fail(const std::string& msg) {
    if (g_rank == 0) std::fprintf(stderr, "mpi_family_bench: %s\n", msg.c_str());
    leave(2);
}

size_t parse_size(const std::string& s) {
    char* end = nullptr;
    double v = std::strtod(s.c_str(), &end);
    std::string unit = end;
    double mult = unit == "" || unit == "B"     ? 1
                  : unit == "K" || unit == "KB" ? 1024.0
                  : unit == "M" || unit == "MB" ? 1024.0 * 1024
                  : unit == "G" || unit == "GB" ? 1024.0 * 1024 * 1024
                                                : 0;
    if (end == s.c_str() || mult == 0 || !(v >= 0))
        fail("bad size '" + s + "' (examples: 8, 64K, 16M)");
    return size_t(v * mult);
}

double parse_number(const std::string& opt, const std::string& s, double lo) {
    char* end = nullptr;
    double v = std::strtod(s.c_str(), &end);
    if (end == s.c_str() || *end != '\0' || !(v >= lo)) fail("bad value '" + s + "' for " + opt);
    return v;
}

double parse_integer(const std::string& opt, const std::string& s, double lo) {
    double v = parse_number(opt, s, lo);
    if (v != std::floor(v) || v > 1e15)
        fail("bad value '" + s + "' for " + opt + " (a whole number)");
    return v;
}

const CollInfo* find_coll(const std::string& name) {
    std::string n = name == "bcast"                  ? "broadcast"
                    : name == "reduce_scatter_block" ? "reduce_scatter"
                                                     : name;
    for (const CollInfo& c : kColls)
        if (n == c.name) return &c;
    return nullptr;
}

Options parse(int argc, char** argv) {
    Options o;
    for (const CollInfo& c : kColls) o.colls.push_back(&c);
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) fail("option " + a + " needs a value");
            return argv[++i];
        };
        if (a == "--min")
            o.min_bytes = parse_size(value());
        else if (a == "--max")
            o.max_bytes = parse_size(value());
        else if (a == "--factor")
            o.factor = size_t(parse_integer(a, value(), 2));
        else if (a == "--target")
            o.target_s = parse_number(a, value(), 0);
        else if (a == "--min-iters")
            o.min_iters = long(parse_integer(a, value(), 1));
        else if (a == "--max-iters")
            o.max_iters = long(parse_integer(a, value(), 1));
        else if (a == "--warmup")
            o.warmup = int(parse_integer(a, value(), 0));
        else if (a == "--slow")
            o.slow_s = parse_number(a, value(), 0);
        else if (a == "--no-check")
            o.check = false;
        else if (a == "--with-max")
            o.with_max = true;
        else if (a == "--csv")
            o.csv = value();
        else if (a == "--only") {
            std::string list = value();
            o.colls.clear();
            if (list == "all") {
                for (const CollInfo& c : kColls) o.colls.push_back(&c);
                continue;
            }
            for (size_t p = 0; p <= list.size();) {
                size_t q = std::min(list.find(',', p), list.size());
                std::string name = list.substr(p, q - p);
                const CollInfo* c = find_coll(name);
                if (!c) fail("unknown collective '" + name + "' (see --help)");
                o.colls.push_back(c);
                p = q + 1;
            }
        } else if (a == "-h" || a == "--help")
            usage(0);
        else {
            if (g_rank == 0)
                std::fprintf(stderr, "mpi_family_bench: unknown option '%s'\n", a.c_str());
            usage(2);
        }
    }
    if (o.min_bytes < 1) o.min_bytes = 1;
    if (o.min_bytes > o.max_bytes) fail("--min is larger than --max");
    if (o.max_bytes / sizeof(float) > size_t(INT_MAX)) fail("--max is too large for int counts");
    if (o.min_iters > o.max_iters) fail("--min-iters is larger than --max-iters");
    return o;
}

// Small integers, distinct per source rank and position, exact in float32 and in sums of them.
float value(int rank, size_t i) { return float((uint64_t(rank) * 1009 + i * 7) % 8191); }

// One measurement: a collective at one size, with its buffers.
class Case {
public:
    Case(const CollInfo& c, size_t requested, std::vector<float>& send, std::vector<float>& recv)
        : c_(c), send_(send), recv_(recv) {
        const int n = g_size;
        if (c.coll == Coll::barrier) {
            bytes_ = count_ = 0;
        } else if (c.blocked) {
            block_ = std::max<size_t>(1, requested / (sizeof(float) * n));
            count_ = block_ * n;
            bytes_ = count_ * sizeof(float);
        } else {
            count_ = std::max<size_t>(1, requested / sizeof(float));
            bytes_ = count_ * sizeof(float);
        }
        counts_.assign(n, int(block_));
        displs_.resize(n);
        for (int r = 0; r < n; ++r) displs_[r] = int(block_ * r);
    }

    size_t bytes() const { return bytes_; }
    size_t count() const { return count_; }

    void fill() {
        const int me = g_rank;
        switch (c_.coll) {
            case Coll::broadcast:
                for (size_t i = 0; i < count_; ++i) send_[i] = me == 0 ? value(0, i) : -1.0f;
                break;
            case Coll::allgather:
            case Coll::allgatherv:
                for (size_t j = 0; j < block_; ++j) send_[j] = value(me, j);
                break;
            default:
                for (size_t i = 0; i < count_; ++i) send_[i] = value(me, i);
        }
        std::fill(recv_.begin(), recv_.begin() + std::max<size_t>(count_, 1), -1.0f);
    }

    void run() {
        float* s = send_.data();
        float* r = recv_.data();
        const int cnt = int(count_), blk = int(block_);
        const MPI_Comm w = MPI_COMM_WORLD;
        switch (c_.coll) {
            case Coll::allreduce: MPI_Allreduce(s, r, cnt, MPI_FLOAT, MPI_SUM, w); break;
            case Coll::broadcast: MPI_Bcast(s, cnt, MPI_FLOAT, 0, w); break;
            case Coll::reduce: MPI_Reduce(s, r, cnt, MPI_FLOAT, MPI_SUM, 0, w); break;
            case Coll::allgather: MPI_Allgather(s, blk, MPI_FLOAT, r, blk, MPI_FLOAT, w); break;
            case Coll::allgatherv:
                MPI_Allgatherv(s, blk, MPI_FLOAT, r, counts_.data(), displs_.data(), MPI_FLOAT, w);
                break;
            case Coll::reduce_scatter:
                MPI_Reduce_scatter_block(s, r, blk, MPI_FLOAT, MPI_SUM, w);
                break;
            case Coll::alltoall: MPI_Alltoall(s, blk, MPI_FLOAT, r, blk, MPI_FLOAT, w); break;
            case Coll::alltoallv:
                MPI_Alltoallv(s, counts_.data(), displs_.data(), MPI_FLOAT, r, counts_.data(),
                              displs_.data(), MPI_FLOAT, w);
                break;
            case Coll::barrier: MPI_Barrier(w); break;
            case Coll::sendrecv: {
                const int prev = (g_rank - 1 + g_size) % g_size, next = (g_rank + 1) % g_size;
                MPI_Request req;
                MPI_Irecv(r, cnt, MPI_FLOAT, prev, 7, w, &req);
                MPI_Send(s, cnt, MPI_FLOAT, next, 7, w);
                MPI_Wait(&req, MPI_STATUS_IGNORE);
                break;
            }
        }
    }

    // Wrong elements of this rank's output of the last call.
    long long wrong() const {
        const int n = g_size, me = g_rank;
        long long bad = 0;
        auto sum_over_ranks = [n](size_t i) {
            float v = 0;
            for (int q = 0; q < n; ++q) v += value(q, i);
            return v;
        };
        switch (c_.coll) {
            case Coll::allreduce:
                for (size_t i = 0; i < count_; ++i) bad += recv_[i] != sum_over_ranks(i);
                break;
            case Coll::reduce:
                if (me == 0)
                    for (size_t i = 0; i < count_; ++i) bad += recv_[i] != sum_over_ranks(i);
                break;
            case Coll::broadcast:
                for (size_t i = 0; i < count_; ++i) bad += send_[i] != value(0, i);
                break;
            case Coll::allgather:
            case Coll::allgatherv:
                for (int q = 0; q < n; ++q)
                    for (size_t j = 0; j < block_; ++j) bad += recv_[q * block_ + j] != value(q, j);
                break;
            case Coll::reduce_scatter:
                for (size_t j = 0; j < block_; ++j)
                    bad += recv_[j] != sum_over_ranks(me * block_ + j);
                break;
            case Coll::alltoall:
            case Coll::alltoallv:
                for (int q = 0; q < n; ++q)
                    for (size_t j = 0; j < block_; ++j)
                        bad += recv_[q * block_ + j] != value(q, me * block_ + j);
                break;
            case Coll::barrier: break;
            case Coll::sendrecv: {
                const int prev = (me - 1 + n) % n;
                for (size_t i = 0; i < count_; ++i) bad += recv_[i] != value(prev, i);
                break;
            }
        }
        return bad;
    }

private:
    const CollInfo& c_;
    std::vector<float>& send_;
    std::vector<float>& recv_;
    size_t bytes_ = 0, count_ = 0, block_ = 0;
    std::vector<int> counts_, displs_;
};

double max_over_ranks(double x) {
    MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return x;
}

int warmup_for(size_t bytes, const Options& o) {
    if (o.warmup >= 0) return o.warmup;
    return bytes <= (size_t(64) << 10) ? 5 : bytes <= (size_t(4) << 20) ? 2 : 1;
}

// Seconds the slowest rank needed for k back-to-back calls.
double batch(Case& cs, long k) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (long i = 0; i < k; ++i) cs.run();
    return max_over_ranks(MPI_Wtime() - t0);
}

// Batches of k calls, k growing, until one took target/20 or more; that batch is run once more and
// the faster of the two gives the time per call (so one stall of the machine does not shrink the
// timed loop to a few calls), and the iteration count for about target seconds follows from it.
// Every rank gets the same answer (the times are maxima over ranks).
long choose_iters(Case& cs, const Options& o) {
    const double want = o.target_s / 10;
    long k = 1;
    for (;;) {
        double el = batch(cs, k);
        if (el >= want / 2 || k >= o.max_iters) {
            double per = std::min(el, batch(cs, k)) / double(k);
            long iters = per > 0 ? long(o.target_s / per) : o.max_iters;
            return std::clamp(iters, o.min_iters, o.max_iters);
        }
        // Aim at target/10, growing by at least 2x and at most 64x per batch.
        double grow = el > 0 ? want / el : 64;
        k = std::min(o.max_iters, long(double(k) * std::clamp(grow, 2.0, 64.0)));
    }
}

struct Row {
    size_t bytes, count;
    long iters;
    double time_us;
    long long wrong;
};

Row measure(Case& cs, const Options& o) {
    cs.fill();
    const int warm = warmup_for(cs.bytes(), o);
    long iters;
    if (warm > 0 && batch(cs, 1) >= o.slow_s) {
        // The first warm-up call alone took --slow seconds or more (MPICH oversubscribed can take
        // seconds per call): no more warm-up, no calibration, one timed call.
        iters = 1;
    } else {
        for (int i = 1; i < warm; ++i) cs.run();
        iters = o.target_s > 0 ? choose_iters(cs, o) : o.min_iters;
    }
    cs.fill();
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (long i = 0; i < iters; ++i) cs.run();
    double per_call = (MPI_Wtime() - t0) / double(iters);
    double worst = 0;
    MPI_Reduce(&per_call, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    long long bad = o.check ? cs.wrong() : 0, bad_all = 0;
    MPI_Reduce(&bad, &bad_all, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    return {cs.bytes(), cs.count(), iters, worst * 1e6, o.check ? bad_all : -1};
}

std::string library_version() {
    char buf[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(buf, &len);
    std::string v(buf, size_t(len));
    size_t cut =
        v.find_first_of("\n,");  // "Open MPI v4.1.4, package: ..." / "MPICH Version: 4.0.2 ..."
    if (cut != std::string::npos) v.resize(cut);
    while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.pop_back();
    std::replace(v.begin(), v.end(), '\t', ' ');
    return v;
}

}  // namespace

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    const Options o = parse(argc, argv);
    const int n = g_size;

    FILE* csv = nullptr;
    int csv_ok = 1;
    std::string csv_error;
    if (g_rank == 0 && !o.csv.empty()) {
        csv = std::fopen(o.csv.c_str(), "w");
        if (!csv) csv_error = std::strerror(errno);
        csv_ok = csv != nullptr;
    }
    MPI_Bcast(&csv_ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (!csv_ok) fail("cannot write " + o.csv + ": " + csv_error);
    if (csv) {
        std::fprintf(csv,
                     "collective,ranks,size_bytes,count,dtype,op,root,in_place,time_us,algbw_gbps,"
                     "busbw_gbps,wrong\n");
        std::fflush(csv);
    }

    // Large enough for every collective at --max (blocked sizes round to at least one per rank);
    // written once here so that no page is first touched inside a timed loop.
    const size_t elems = std::max(o.max_bytes / sizeof(float), size_t(n)) + 1;
    std::vector<float> send(elems, 0.0f), recv(elems, 0.0f);

    if (g_rank == 0) {
        std::printf(
            "# mpi_family_bench: %s, %d ranks, target %.3f s per size, iterations %ld..%ld\n",
            library_version().c_str(), n, o.target_s, o.min_iters, o.max_iters);
        std::fflush(stdout);
    }

    for (const CollInfo* c : o.colls) {
        const char* op = c->reduces ? "sum" : "none";
        const int root = c->rooted ? 0 : -1;
        if (g_rank == 0) {
            std::printf("#\n# %s  dtype float32  op %s  root %d  out of place\n", c->name, op,
                        root);
            std::printf("# %12s %12s %11s %9s %9s %7s %8s\n", "size(B)", "count", "time(us)",
                        "algbw", "busbw", "#wrong", "iters");
            std::fflush(stdout);
        }
        // The requested sizes: min, min*factor, ... <= max, and max itself with --with-max.
        std::vector<size_t> sizes;
        for (size_t req = o.min_bytes;; req *= o.factor) {
            sizes.push_back(req);
            if (c->coll == Coll::barrier || req > o.max_bytes / o.factor) break;
        }
        if (o.with_max && c->coll != Coll::barrier && sizes.back() != o.max_bytes)
            sizes.push_back(o.max_bytes);
        size_t last = SIZE_MAX;
        for (size_t req : sizes) {
            Case cs(*c, req, send, recv);
            if (cs.bytes() != last) {
                last = cs.bytes();
                Row row = measure(cs, o);
                if (g_rank == 0) {
                    double algbw = row.time_us > 0 ? double(row.bytes) / row.time_us / 1e3 : 0;
                    double busbw = algbw * bus_factor(*c, n);
                    std::printf("  %12zu %12zu %11.2f %9.3f %9.3f %7lld %8ld%s\n", row.bytes,
                                row.count, row.time_us, algbw, busbw, row.wrong, row.iters,
                                row.wrong > 0 ? "  WRONG" : "");
                    std::fflush(stdout);
                    if (csv) {
                        std::fprintf(csv, "%s,%d,%zu,%zu,float32,%s,%d,0,%.3f,%.4f,%.4f,%lld\n",
                                     c->name, n, row.bytes, row.count, op, root, row.time_us, algbw,
                                     busbw, row.wrong);
                        std::fflush(csv);
                    }
                }
            }
        }
    }

    if (csv) std::fclose(csv);
    MPI_Finalize();
    return 0;
}
