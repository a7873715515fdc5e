// ccl_bench's names (collectives, datatypes, reductions) and its command line.
#include <getopt.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "bench.h"

namespace bench {

namespace {

const std::vector<CollInfo> kColls = {
    {Coll::allreduce, "allreduce", true, false, Places::both, BusFactor::allreduce},
    {Coll::broadcast, "broadcast", false, true, Places::one_buffer, BusFactor::one},
    {Coll::reduce, "reduce", true, true, Places::both, BusFactor::one},
    {Coll::allgather, "allgather", false, false, Places::both, BusFactor::ring},
    {Coll::allgatherv, "allgatherv", false, false, Places::both, BusFactor::ring},
    {Coll::reduce_scatter, "reduce_scatter", true, false, Places::both, BusFactor::ring},
    {Coll::alltoall, "alltoall", false, false, Places::both, BusFactor::ring},
    {Coll::alltoallv, "alltoallv", false, false, Places::out_only, BusFactor::ring},
    {Coll::barrier, "barrier", false, false, Places::none, BusFactor::one},
    {Coll::sendrecv, "sendrecv", false, false, Places::out_only, BusFactor::one},
};

const DType kTypes[] = {
    {CCL_INT8, "int8", 1},         {CCL_UINT8, "uint8", 1},     {CCL_INT16, "int16", 2},
    {CCL_UINT16, "uint16", 2},     {CCL_INT32, "int32", 4},     {CCL_UINT32, "uint32", 4},
    {CCL_INT64, "int64", 8},       {CCL_UINT64, "uint64", 8},   {CCL_FLOAT16, "float16", 2},
    {CCL_BFLOAT16, "bfloat16", 2}, {CCL_FLOAT32, "float32", 4}, {CCL_FLOAT64, "float64", 8}};

const char* const kOps[] = {"sum", "prod", "min", "max", "avg"};

const char* const kUsage =
    "usage: ccl_bench [options]   (start it with cclrun -n N, mpirun or torchrun)\n"
    "Times ccl collectives over a range of message sizes and prints one row per size like\n"
    "nccl-tests: time (us, the max over ranks of each rank's average), algbw and busbw (GB/s)\n"
    "and #wrong (elements that differ from a reference, summed over ranks).\n"
    "\n"
    "What to run (LIST: comma-separated names, or all):\n"
    "  -c, --coll LIST        allreduce, broadcast, reduce, allgather, allgatherv,\n"
    "                         reduce_scatter, alltoall, alltoallv, barrier, sendrecv\n"
    "                         (default allreduce,broadcast,barrier); -c 0 and -c 1 take\n"
    "                         nccl-tests' meaning: --check none and --check last\n"
    "  -d, --dtype LIST       int8, uint8, int16, uint16, int32, uint32, int64, uint64,\n"
    "                         float16, bfloat16, float32, float64 (default float32); also\n"
    "                         nccl-tests' names: half, float, double, int\n"
    "  -o, --op LIST          sum, prod, min, max, avg (default sum)\n"
    "  -r, --root N           root of broadcast and reduce (default 0)\n"
    "  -p, --place LIST       out (out of place), in (in place) or out,in (default out)\n"
    "  -i, --in-place         the same as --place in (nccl-tests' -i STEP has no counterpart:\n"
    "                         list sizes with -s)\n"
    "      --uneven           uneven counts per rank for allgatherv and alltoallv (default: "
    "equal,\n"
    "                         comparable to allgather and alltoall)\n"
    "  -N, --nonblocking      issue each call with a request and ccl_wait for it\n"
    "  -k, --cache            cache schedules under a match_id per call (attr.to_cache)\n"
    "\n"
    "Sizes (SIZE: bytes, with an optional K, M or G suffix):\n"
    "  -b, --min-bytes SIZE   smallest message (default 8)\n"
    "  -e, --max-bytes SIZE   largest message (default 64M)\n"
    "  -f, --factor N         size multiplier between rows (default 2)\n"
    "  -s, --sizes LIST       explicit sizes instead, e.g. 8,4K,1M\n"
    "  The size of a row is nccl-tests': count * type size for allreduce, broadcast and reduce,\n"
    "  the bytes received for allgather(v), sent for reduce_scatter and alltoall(v) (per\n"
    "  rank), sent by each rank for sendrecv (a ring: rank r sends to r+1, receives from r-1).\n"
    "\n"
    "Timing:\n"
    "  -t, --time SECONDS     timed run per size when -n is not given (default 0.2)\n"
    "  -n, --iters N          timed iterations per size (default: enough for --time)\n"
    "      --min-iters N      fewest timed iterations when chosen by time (default 5)\n"
    "      --max-iters N      most timed iterations when chosen by time (default 100000)\n"
    "  -w, --warmup N         untimed calls per size (default 5, fewer when slow; at least 1)\n"
    "\n"
    "Checking and output:\n"
    "  -C, --check MODE       none, last (one checked call after the timed ones; the default)\n"
    "                         or all (every timed call checked; slower, times less exact)\n"
    "      --no-check         the same as --check none\n"
    "      --csv FILE         also write the rows as CSV (rank 0 writes it; wrong is empty\n"
    "                         when not checked)\n"
    "      --json FILE        also write the run and its rows as JSON\n"
    "  -h, --help             show this help\n"
    "\n"
    "nccl-tests' -g (GPUs per thread) has no counterpart: one rank per process, started by the\n"
    "launcher. The table adds #iters and min (the fastest rank's average) to nccl-tests'\n"
    "columns, and ends with nccl-tests' '# Avg bus bandwidth' line.\n"
    "CCL_LOG_LEVEL=info makes ccl log the algorithm it picks for each call.\n";

[[noreturn]] void fail(const std::string& msg) {
    if (launcher_rank() == 0)
        std::fprintf(stderr, "ccl_bench: %s (ccl_bench --help lists the options)\n", msg.c_str());
    std::exit(2);
}

std::vector<std::string> split(const std::string& s) {
    std::vector<std::string> out;
    for (size_t p = 0; p <= s.size();) {
        size_t q = std::min(s.find(',', p), s.size());
        if (q > p) out.push_back(s.substr(p, q - p));
        p = q + 1;
    }
    return out;
}

size_t parse_size(const std::string& s) {
    char* end = nullptr;
    double v = std::strtod(s.c_str(), &end);
    std::string unit = end;
    if (!unit.empty() && (unit.back() == 'B' || unit.back() == 'b')) unit.pop_back();
    if (unit.size() == 2 && unit[1] == 'i') unit.pop_back();  // KiB
    double mult = unit == ""                   ? 1
                  : unit == "K" || unit == "k" ? 1024.0
                  : unit == "M" || unit == "m" ? 1024.0 * 1024
                  : unit == "G" || unit == "g" ? 1024.0 * 1024 * 1024
                                               : 0;
    if (end == s.c_str() || mult == 0 || !(v >= 0) || v * mult > 0x1p50)
        fail("bad size '" + s + "' (e.g. 8, 64K, 16M)");
    return size_t(v * mult);
}

int parse_int(const char* s, int min, const char* what) {
    char* end = nullptr;
    long v = std::strtol(s, &end, 10);
    if (end == s || *end != '\0' || v < min || v > 1 << 30)
        fail(std::string("bad ") + what + " '" + s + "'");
    return int(v);
}

// The names of a table's entries.
template <class Table>
std::vector<std::string> names(const Table& table) {
    std::vector<std::string> out;
    for (const auto& x : table) {
        if constexpr (requires { x.name; })
            out.push_back(x.name);
        else
            out.push_back(x);
    }
    return out;
}

// The indices in `names` of the names of a comma-separated list ("all": every one), in the
// list's order, without repeats.
std::vector<size_t> parse_names(const std::string& arg, const std::vector<std::string>& names,
                                const char* what) {
    std::vector<size_t> out;
    for (const std::string& want : split(arg)) {
        for (size_t i = 0; i < names.size(); ++i)
            if ((want == "all" || want == names[i]) &&
                std::find(out.begin(), out.end(), i) == out.end())
                out.push_back(i);
        bool known = want == "all" || std::find(names.begin(), names.end(), want) != names.end();
        if (!known) fail(std::string("unknown ") + what + " '" + want + "'");
    }
    if (out.empty()) fail(std::string("no ") + what + " in '" + arg + "'");
    return out;
}

// nccl-tests' datatype names (-d float, half, double, bfloat16, int32, ...) as ccl_bench's.
std::string nccl_type_names(const std::string& arg) {
    std::string out;
    for (const std::string& t : split(arg)) {
        const std::string name = t == "float"    ? "float32"
                                 : t == "half"   ? "float16"
                                 : t == "double" ? "float64"
                                 : t == "int"    ? "int32"
                                                 : t;
        out += (out.empty() ? "" : ",") + name;
    }
    return out.empty() ? arg : out;
}

}  // namespace

const CollInfo& info(Coll c) { return kColls[size_t(c)]; }

double bus_factor(Coll c, int n) {
    switch (info(c).bus) {
        case BusFactor::one: return 1;
        case BusFactor::ring: return double(n - 1) / n;
        case BusFactor::allreduce: return 2.0 * (n - 1) / n;
    }
    return 1;
}

const DType& dtype_info(ccl_datatype_t t) {
    for (const DType& d : kTypes)
        if (d.type == t) return d;
    std::abort();
}

const char* op_name(ccl_reduction_t op) { return kOps[op]; }

std::vector<size_t> Options::size_list() const {
    if (!sizes.empty()) return sizes;
    std::vector<size_t> out;
    for (size_t s = min_bytes; s <= max_bytes; s = s ? s * factor : 1) {
        out.push_back(s);
        if (s > max_bytes / factor) break;  // the next size would pass max_bytes (or overflow)
    }
    return out;
}

int launcher_rank() {
    for (const char* var : {"CCL_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK"})
        if (const char* v = std::getenv(var)) return std::atoi(v);
    return 0;
}

std::string format_bytes(size_t b) {
    const char* units[] = {"B", "KiB", "MiB", "GiB"};
    int u = 0;
    while (u < 3 && b >= 1024 && b % 1024 == 0) b /= 1024, ++u;
    return std::to_string(b) + " " + units[u];
}

Options parse_options(int argc, char** argv) {
    enum { kNoCheck = 256, kMinIters, kMaxIters, kUneven, kCsv, kJson };
    static const option longs[] = {{"coll", 1, nullptr, 'c'},
                                   {"collectives", 1, nullptr, 'c'},
                                   {"dtype", 1, nullptr, 'd'},
                                   {"op", 1, nullptr, 'o'},
                                   {"root", 1, nullptr, 'r'},
                                   {"place", 1, nullptr, 'p'},
                                   {"in-place", 0, nullptr, 'i'},
                                   {"uneven", 0, nullptr, kUneven},
                                   {"nonblocking", 0, nullptr, 'N'},
                                   {"cache", 0, nullptr, 'k'},
                                   {"min-bytes", 1, nullptr, 'b'},
                                   {"max-bytes", 1, nullptr, 'e'},
                                   {"factor", 1, nullptr, 'f'},
                                   {"sizes", 1, nullptr, 's'},
                                   {"time", 1, nullptr, 't'},
                                   {"iters", 1, nullptr, 'n'},
                                   {"min-iters", 1, nullptr, kMinIters},
                                   {"max-iters", 1, nullptr, kMaxIters},
                                   {"warmup", 1, nullptr, 'w'},
                                   {"check", 1, nullptr, 'C'},
                                   {"no-check", 0, nullptr, kNoCheck},
                                   {"csv", 1, nullptr, kCsv},
                                   {"json", 1, nullptr, kJson},
                                   {"help", 0, nullptr, 'h'},
                                   {nullptr, 0, nullptr, 0}};
    Options o;
    opterr = 0;
    int c;
    // nccl-tests' -i STEP (sizes growing by STEP bytes) reads here as -i (in place) and a stray
    // argument: say so before getopt moves the argument away.
    for (int a = 1; a + 1 < argc; ++a)
        if (std::string(argv[a]) == "-i" &&
            std::isdigit(static_cast<unsigned char>(argv[a + 1][0])))
            fail(std::string("-i is --in-place here, with no value; nccl-tests' -i ") +
                 argv[a + 1] +
                 " (sizes in steps of that many bytes) has no counterpart: list the sizes with -s, "
                 "or multiply them with -f");
    while ((c = getopt_long(argc, argv, ":c:d:o:r:p:iNkb:e:f:s:t:n:w:C:g:h", longs, nullptr)) !=
           -1) {
        switch (c) {
            case 'c':
                // nccl-tests' -c 0|1: whether to check the results.
                if (std::string(optarg) == "0" || std::string(optarg) == "1") {
                    o.check = optarg[0] == '0' ? Check::none : Check::last;
                    break;
                }
                o.colls.clear();
                for (size_t i : parse_names(optarg, names(kColls), "collective"))
                    o.colls.push_back(kColls[i].coll);
                break;
            case 'd':
                o.dtypes.clear();
                for (size_t i : parse_names(nccl_type_names(optarg), names(kTypes), "dtype"))
                    o.dtypes.push_back(kTypes[i].type);
                break;
            case 'g':
                fail(
                    "-g is nccl-tests' GPUs per thread, absent here: ccl_bench runs one rank per "
                    "process; "
                    "start N ranks with cclrun -n N (or mpirun, torchrun)");
            case 'o':
                o.ops.clear();
                for (size_t i : parse_names(optarg, names(kOps), "op"))
                    o.ops.push_back(ccl_reduction_t(i));
                break;
            case 'r': o.root = parse_int(optarg, 0, "root"); break;
            case 'p': {
                o.in_place.clear();
                for (const std::string& p : split(optarg)) {
                    if (p != "in" && p != "out") fail("bad place '" + p + "' (out, in or out,in)");
                    o.in_place.push_back(p == "in");
                }
                if (o.in_place.empty()) fail("no place in '" + std::string(optarg) + "'");
                break;
            }
            case 'i': o.in_place = {true}; break;
            case kUneven: o.uneven = true; break;
            case 'N': o.nonblocking = true; break;
            case 'k': o.cache = true; break;
            case 'b': o.min_bytes = parse_size(optarg); break;
            case 'e': o.max_bytes = parse_size(optarg); break;
            case 'f': o.factor = size_t(parse_int(optarg, 2, "factor")); break;
            case 's':
                o.sizes.clear();
                for (const std::string& s : split(optarg)) o.sizes.push_back(parse_size(s));
                if (o.sizes.empty()) fail("no size in '" + std::string(optarg) + "'");
                break;
            case 't': {
                char* end = nullptr;
                o.time_s = std::strtod(optarg, &end);
                if (end == optarg || *end != '\0' || !(o.time_s > 0 && o.time_s <= 3600))
                    fail("bad time '" + std::string(optarg) + "' (seconds, e.g. 0.2)");
                break;
            }
            case 'n': o.iters = parse_int(optarg, 1, "iteration count"); break;
            case kMinIters: o.min_iters = parse_int(optarg, 1, "iteration count"); break;
            case kMaxIters: o.max_iters = parse_int(optarg, 1, "iteration count"); break;
            case 'w': o.warmup = parse_int(optarg, 0, "warm-up count"); break;
            case 'C': {
                std::string m = optarg;
                if (m == "none")
                    o.check = Check::none;
                else if (m == "last")
                    o.check = Check::last;
                else if (m == "all")
                    o.check = Check::all;
                else
                    fail("bad check mode '" + m + "' (none, last or all)");
                break;
            }
            case kNoCheck: o.check = Check::none; break;
            case kCsv: o.csv_path = optarg; break;
            case kJson: o.json_path = optarg; break;
            case 'h':
                if (launcher_rank() == 0) std::fputs(kUsage, stdout);
                std::exit(0);
            case ':': fail(std::string("option ") + argv[optind - 1] + " needs a value");
            default:
                fail(optopt ? std::string("unknown option -") + char(optopt)
                            : std::string("unknown option ") + argv[optind - 1]);
        }
    }
    if (optind < argc) fail(std::string("unexpected argument '") + argv[optind] + "'");
    if (o.sizes.empty() && o.min_bytes > o.max_bytes)
        fail("--min-bytes is larger than --max-bytes");
    if (o.min_iters > o.max_iters) fail("--min-iters is larger than --max-iters");
    return o;
}

}  // namespace bench
