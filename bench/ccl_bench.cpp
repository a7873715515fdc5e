// ccl_bench: times ccl collectives over a range of sizes and prints a table like nccl-tests.
// Start it under cclrun (ccl_comm_create_from_env): cclrun -n 4 ccl_bench -c allreduce
#include <getopt.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "ccl/ccl.h"

namespace {

#define CHECK(call)                                                                  \
    do {                                                                             \
        ccl_result_t r_ = (call);                                                    \
        if (r_ != CCL_SUCCESS) {                                                     \
            std::fprintf(stderr, "ccl_bench: %s: %s: %s\n", #call, ccl_strerror(r_), \
                         ccl_last_error());                                          \
            std::exit(1);                                                            \
        }                                                                            \
    } while (0)

struct Options {
    std::vector<std::string> colls{"allreduce", "broadcast", "barrier"};
    size_t min_bytes = 8, max_bytes = 64u << 20, factor = 2;
    ccl_datatype_t dtype = CCL_FLOAT32;
    ccl_reduction_t op = CCL_SUM;
    int root = 0;
    int iters = 0;  // 0: chosen per size for about `target_s` of timing
    int warmup = 5;
    double target_s = 0.2;
    bool in_place = false;
    bool check = true;
    bool cache = false;  // match_id caching (attr.to_cache)
};

const struct {
    const char* name;
    ccl_datatype_t t;
    size_t size;
} kTypes[] = {
    {"int8", CCL_INT8, 1},         {"uint8", CCL_UINT8, 1},     {"int16", CCL_INT16, 2},
    {"uint16", CCL_UINT16, 2},     {"int32", CCL_INT32, 4},     {"uint32", CCL_UINT32, 4},
    {"int64", CCL_INT64, 8},       {"uint64", CCL_UINT64, 8},   {"float16", CCL_FLOAT16, 2},
    {"bfloat16", CCL_BFLOAT16, 2}, {"float32", CCL_FLOAT32, 4}, {"float64", CCL_FLOAT64, 8}};
const char* kOps[] = {"sum", "prod", "min", "max", "avg"};

size_t type_size(ccl_datatype_t t) {
    for (auto& x : kTypes)
        if (x.t == t) return x.size;
    return 0;
}
const char* type_name(ccl_datatype_t t) {
    for (auto& x : kTypes)
        if (x.t == t) return x.name;
    return "?";
}

size_t parse_size(const char* s) {
    char* end = nullptr;
    double v = std::strtod(s, &end);
    std::string unit = end;
    size_t mult = unit == "" || unit == "B"     ? 1
                  : unit == "K" || unit == "KB" ? 1024
                  : unit == "M" || unit == "MB" ? 1u << 20
                  : unit == "G" || unit == "GB" ? 1u << 30
                                                : 0;
    if (end == s || mult == 0 || v < 0) {
        std::fprintf(stderr, "ccl_bench: bad size '%s' (examples: 8, 64K, 16M)\n", s);
        std::exit(2);
    }
    return size_t(v * double(mult));
}

void usage(int code) {
    std::printf(
        "usage: ccl_bench [options]   (start it with cclrun -n N, or another launcher)\n"
        "  -c, --coll LIST       allreduce,broadcast,barrier or all (default all)\n"
        "  -b, --min-bytes SIZE  smallest message (default 8)\n"
        "  -e, --max-bytes SIZE  largest message (default 64M)\n"
        "  -f, --factor N        size multiplier between rows (default 2)\n"
        "  -d, --dtype NAME      int8 ... float64, float16, bfloat16 (default float32)\n"
        "  -o, --op NAME         sum, prod, min, max, avg (default sum)\n"
        "  -r, --root N          broadcast root (default 0)\n"
        "  -n, --iters N         timed iterations per size (default: about 0.2 s per size)\n"
        "  -w, --warmup N        untimed iterations per size (default 5)\n"
        "  -i, --in-place        send == recv\n"
        "      --no-check        skip the result check\n"
        "  -k, --cache           cache schedules under a match_id per size (attr.to_cache)\n"
        "  -h, --help\n");
    std::exit(code);
}

Options parse(int argc, char** argv) {
    Options o;
    static const option longs[] = {{"coll", 1, nullptr, 'c'},      {"min-bytes", 1, nullptr, 'b'},
                                   {"max-bytes", 1, nullptr, 'e'}, {"factor", 1, nullptr, 'f'},
                                   {"dtype", 1, nullptr, 'd'},     {"op", 1, nullptr, 'o'},
                                   {"root", 1, nullptr, 'r'},      {"iters", 1, nullptr, 'n'},
                                   {"warmup", 1, nullptr, 'w'},    {"in-place", 0, nullptr, 'i'},
                                   {"no-check", 0, nullptr, 'C'}, {"cache", 0, nullptr, 'k'},  {"help", 0, nullptr, 'h'},
                                   {nullptr, 0, nullptr, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "c:b:e:f:d:o:r:n:w:ikh", longs, nullptr)) != -1) {
        switch (c) {
            case 'c': {
                o.colls.clear();
                std::string s = optarg;
                if (s == "all") s = "allreduce,broadcast,barrier";
                for (size_t p = 0; p <= s.size();) {
                    size_t q = s.find(',', p);
                    if (q == std::string::npos) q = s.size();
                    std::string name = s.substr(p, q - p);
                    if (name != "allreduce" && name != "broadcast" && name != "barrier") {
                        std::fprintf(stderr, "ccl_bench: unknown collective '%s'\n", name.c_str());
                        std::exit(2);
                    }
                    o.colls.push_back(name);
                    p = q + 1;
                }
                break;
            }
            case 'b': o.min_bytes = parse_size(optarg); break;
            case 'e': o.max_bytes = parse_size(optarg); break;
            case 'f': o.factor = std::max(2, std::atoi(optarg)); break;
            case 'd': {
                bool found = false;
                for (auto& x : kTypes)
                    if (std::strcmp(x.name, optarg) == 0) {
                        o.dtype = x.t;
                        found = true;
                    }
                if (!found) {
                    std::fprintf(stderr, "ccl_bench: unknown dtype '%s'\n", optarg);
                    std::exit(2);
                }
                break;
            }
            case 'o': {
                bool found = false;
                for (int i = 0; i < 5; ++i)
                    if (std::strcmp(kOps[i], optarg) == 0) {
                        o.op = ccl_reduction_t(i);
                        found = true;
                    }
                if (!found) {
                    std::fprintf(stderr, "ccl_bench: unknown op '%s'\n", optarg);
                    std::exit(2);
                }
                break;
            }
            case 'r': o.root = std::atoi(optarg); break;
            case 'n': o.iters = std::max(1, std::atoi(optarg)); break;
            case 'w': o.warmup = std::max(0, std::atoi(optarg)); break;
            case 'i': o.in_place = true; break;
            case 'C': o.check = false; break;
            case 'k': o.cache = true; break;
            case 'h': usage(0); break;
            default: usage(2);
        }
    }
    return o;
}

std::string cpu_model() {
    std::ifstream in("/proc/cpuinfo");
    for (std::string line; std::getline(in, line);)
        if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
    return "unknown CPU";
}

// Small integers, exact in every datatype and for every reduction at up to 64 ranks (sum) or with
// product 1 (prod), so the check is exact whatever the summation order.
double input_value(int rank, size_t i, ccl_reduction_t op) {
    if (op == CCL_PROD) return 1;
    return double((size_t(rank) * 7 + i) % 4);
}

void store(void* buf, size_t i, ccl_datatype_t t, double v) {
    char* p = static_cast<char*>(buf) + i * type_size(t);
    switch (t) {
        case CCL_FLOAT16: {
            _Float16 h = _Float16(float(v));
            std::memcpy(p, &h, 2);
            break;
        }
        case CCL_BFLOAT16: {
            float f = float(v);
            uint32_t u;
            std::memcpy(&u, &f, 4);
            uint16_t h = uint16_t(u >> 16);
            std::memcpy(p, &h, 2);
            break;
        }
        case CCL_FLOAT32: {
            float f = float(v);
            std::memcpy(p, &f, 4);
            break;
        }
        case CCL_FLOAT64: std::memcpy(p, &v, 8); break;
        default: {
            int64_t x = int64_t(v);
            std::memcpy(p, &x, type_size(t));
            break;
        }
    }
}

class Bench {
public:
    Bench(ccl_comm_t comm, const Options& o) : comm_(comm), o_(o) {
        CHECK(ccl_comm_rank(comm, &rank_));
        CHECK(ccl_comm_size(comm, &size_));
    }

    void run(const std::string& coll) {
        if (rank_ == 0) {
            std::printf("#\n# %s  dtype %s  op %s  root %d  %s%s\n", coll.c_str(),
                        type_name(o_.dtype), kOps[o_.op], o_.root,
                        o_.in_place ? "in place" : "out of place",
                        o_.cache ? "  match_id cache on" : "");
            std::printf("# %12s %12s %9s %6s %5s %11s %9s %9s %7s\n", "size(B)", "count", "type",
                        "redop", "root", "time(us)", "algbw", "busbw", "#wrong");
        }
        const size_t es = type_size(o_.dtype);
        double busbw_sum = 0;
        int rows = 0;
        size_t first = coll == "barrier" ? 0 : std::max(o_.min_bytes, es);
        size_t last = coll == "barrier" ? 0 : o_.max_bytes;
        for (size_t bytes = first; bytes <= last; bytes = bytes ? bytes * o_.factor : 1) {
            size_t count = bytes / es;
            bytes = count * es;
            send_.resize(bytes);
            recv_.resize(bytes);
            fill(count);
            for (int i = 0; i < o_.warmup; ++i) once(coll, count);
            int iters = o_.iters ? o_.iters : choose_iters(coll, count);
            CHECK(ccl_barrier(comm_, nullptr));
            auto t0 = std::chrono::steady_clock::now();
            for (int i = 0; i < iters; ++i) once(coll, count);
            double us =
                std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                    .count() /
                iters;
            CHECK(ccl_allreduce(&us, &us, 1, CCL_FLOAT64, CCL_MAX, comm_, nullptr, nullptr));
            uint64_t wrong = o_.check ? check(coll, count) : 0;
            double algbw = us > 0 ? double(bytes) / us / 1e3 : 0;
            double factor = coll == "allreduce" ? 2.0 * (size_ - 1) / size_ : 1.0;
            double busbw = algbw * factor;
            if (rank_ == 0) {
                std::printf("  %12zu %12zu %9s %6s %5d %11.2f %9.2f %9.2f %7s\n", bytes, count,
                            type_name(o_.dtype), coll == "allreduce" ? kOps[o_.op] : "none",
                            coll == "broadcast" ? o_.root : -1, us, algbw, busbw,
                            o_.check ? std::to_string(wrong).c_str() : "N/A");
                std::fflush(stdout);
            }
            busbw_sum += busbw;
            ++rows;
            if (bytes == 0) break;
        }
        if (rank_ == 0 && coll != "barrier")
            std::printf("# avg busbw: %.3f GB/s\n", busbw_sum / std::max(rows, 1));
    }

private:
    void once(const std::string& coll, size_t count) {
        // With --cache, each collective and size is one call site with its own match_id.
        ccl_coll_attr_t attr = CCL_COLL_ATTR_INIT;
        std::string match_id = coll + "-" + std::to_string(count);
        attr.to_cache = o_.cache;
        attr.match_id = match_id.c_str();
        if (coll == "allreduce")
            CHECK(ccl_allreduce(send_.data(), o_.in_place ? send_.data() : recv_.data(), count,
                                o_.dtype, o_.op, comm_, &attr, nullptr));
        else if (coll == "broadcast")
            CHECK(ccl_broadcast(send_.data(), count, o_.dtype, o_.root, comm_, &attr, nullptr));
        else
            CHECK(ccl_barrier(comm_, nullptr));
    }

    void fill(size_t count) {
        for (size_t i = 0; i < count; ++i)
            store(send_.data(), i, o_.dtype, input_value(rank_, i, o_.op));
    }

    // Enough iterations for about target_s, agreed by all ranks.
    int choose_iters(const std::string& coll, size_t count) {
        auto t0 = std::chrono::steady_clock::now();
        once(coll, count);
        double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        CHECK(ccl_allreduce(&s, &s, 1, CCL_FLOAT64, CCL_MAX, comm_, nullptr, nullptr));
        return int(std::clamp(o_.target_s / std::max(s, 1e-7), 5.0, 100000.0));
    }

    // Runs the collective once more on fresh input and counts wrong elements over all ranks.
    uint64_t check(const std::string& coll, size_t count) {
        fill(count);
        if (coll == "broadcast" && rank_ != o_.root) std::memset(send_.data(), 0, send_.size());
        once(coll, count);
        const void* out = coll == "allreduce" && !o_.in_place ? recv_.data() : send_.data();
        std::vector<char> want(type_size(o_.dtype));
        uint64_t wrong = 0;
        for (size_t i = 0; coll != "barrier" && i < count; ++i) {
            double v = 0;
            if (coll == "broadcast")
                v = input_value(o_.root, i, o_.op);
            else {
                v = input_value(0, i, o_.op);
                for (int r = 1; r < size_; ++r) {
                    double x = input_value(r, i, o_.op);
                    v = o_.op == CCL_SUM || o_.op == CCL_AVG ? v + x
                        : o_.op == CCL_PROD                  ? v * x
                        : o_.op == CCL_MIN                   ? std::min(v, x)
                                                             : std::max(v, x);
                }
                if (o_.op == CCL_AVG)
                    v = o_.dtype >= CCL_FLOAT16 ? v / size_ : std::trunc(v / size_);
            }
            store(want.data(), 0, o_.dtype, v);
            wrong += std::memcmp(want.data(), static_cast<const char*>(out) + i * want.size(),
                                 want.size()) != 0;
        }
        CHECK(ccl_allreduce(&wrong, &wrong, 1, CCL_UINT64, CCL_SUM, comm_, nullptr, nullptr));
        if (coll == "allreduce" && o_.in_place) fill(count);
        return wrong;
    }

    ccl_comm_t comm_;
    Options o_;
    int rank_ = 0, size_ = 1;
    std::vector<char> send_, recv_;
};

}  // namespace

int main(int argc, char** argv) {
    Options o = parse(argc, argv);
    ccl_comm_t comm;
    CHECK(ccl_comm_create_from_env(&comm));
    int rank, size, major, minor, patch;
    CHECK(ccl_comm_rank(comm, &rank));
    CHECK(ccl_comm_size(comm, &size));
    CHECK(ccl_get_version(&major, &minor, &patch));
    if (o.root < 0 || o.root >= size) {
        if (rank == 0)
            std::fprintf(stderr, "ccl_bench: root %d is not a rank (0..%d)\n", o.root, size - 1);
        return 2;
    }
    if (rank == 0)
        std::printf("# ccl_bench: ccl %d.%d.%d, %d ranks on 1 node, transport shm, %s\n", major,
                    minor, patch, size, cpu_model().c_str());
    Bench bench(comm, o);
    for (const std::string& coll : o.colls) bench.run(coll);
    CHECK(ccl_comm_destroy(comm));
    return 0;
}
