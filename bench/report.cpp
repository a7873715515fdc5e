// The table on stdout and the CSV and JSON files; see report.h.
#include "report.h"

#include <cerrno>
#include <cstring>
#include <vector>

namespace bench {

namespace {

const char* const kCsvHeader =
    "collective,ranks,size_bytes,count,dtype,op,root,in_place,time_us,algbw_gbps,busbw_gbps,"
    "wrong,iters,min_us\n";

std::string json_string(const std::string& s) {
    std::string out = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\')
            out += '\\', out += c;
        else if (static_cast<unsigned char>(c) < 0x20)
            out += ' ';
        else
            out += c;
    }
    return out + "\"";
}

std::string join(const std::vector<std::string>& parts, const char* sep) {
    std::string out;
    for (const std::string& p : parts) out += (out.empty() ? "" : sep) + p;
    return out;
}

// The run's lists, as names.
std::vector<std::string> coll_names(const Options& o) {
    std::vector<std::string> out;
    for (Coll c : o.colls) out.push_back(info(c).name);
    return out;
}
std::vector<std::string> dtype_names(const Options& o) {
    std::vector<std::string> out;
    for (ccl_datatype_t t : o.dtypes) out.push_back(dtype_info(t).name);
    return out;
}
std::vector<std::string> op_names(const Options& o) {
    std::vector<std::string> out;
    for (ccl_reduction_t op : o.ops) out.push_back(op_name(op));
    return out;
}
std::vector<std::string> place_names(const Options& o, const char* in, const char* out) {
    std::vector<std::string> names;
    for (bool x : o.in_place) names.push_back(x ? in : out);
    return names;
}
std::vector<std::string> size_names(const std::vector<size_t>& sizes, bool human) {
    std::vector<std::string> out;
    for (size_t s : sizes) out.push_back(human ? format_bytes(s) : std::to_string(s));
    return out;
}

std::string json_strings(const std::vector<std::string>& list) {
    std::vector<std::string> quoted;
    for (const std::string& s : list) quoted.push_back(json_string(s));
    return "[" + join(quoted, ", ") + "]";
}
const char* json_bool(bool b) { return b ? "true" : "false"; }

const char* check_name(Check c) {
    return c == Check::none ? "none" : c == Check::last ? "last" : "all";
}

}  // namespace

Report::Report(const Options& o, bool active) : o_(o), active_(active) {}

Report::~Report() {
    if (csv_) std::fclose(csv_);
    if (json_) std::fclose(json_);
}

std::string Report::open_files() {
    if (!active_) return "";
    if (!o_.csv_path.empty() && !(csv_ = std::fopen(o_.csv_path.c_str(), "w")))
        return "cannot write " + o_.csv_path + ": " + std::strerror(errno);
    if (!o_.json_path.empty() && !(json_ = std::fopen(o_.json_path.c_str(), "w")))
        return "cannot write " + o_.json_path + ": " + std::strerror(errno);
    return "";
}

void Report::header(const RunInfo& run) {
    if (!active_) return;
    std::string sizes = !o_.sizes.empty()
                            ? join(size_names(o_.sizes, true), ", ")
                            : format_bytes(o_.min_bytes) + " .. " + format_bytes(o_.max_bytes) +
                                  ", x" + std::to_string(o_.factor);
    char iters[128];
    if (o_.iters)
        std::snprintf(iters, sizeof iters, "%d per size", o_.iters);
    else
        std::snprintf(iters, sizeof iters, "about %g s per size (%d .. %d)", o_.time_s,
                      o_.min_iters, o_.max_iters);
    std::printf("# ccl_bench: ccl %s, %d ranks, nodes %d, transport %s\n", run.version.c_str(),
                run.ranks, run.nodes, run.transport.c_str());
    std::printf("# cpu: %s (%d online; rank 0 on cpus %s), host %s, %s\n", run.cpu.c_str(),
                run.cpus, run.affinity.c_str(), run.host.c_str(), run.date.c_str());
    std::printf(
        "# layout: %d ranks, rank 0 on %d cpus, moving data on %d threads (its team: "
        "CCL_RANK_THREADS)\n",
        run.ranks, run.own_cpus, run.threads);
    std::printf(
        "# shared memory: %.2f MiB per rank (arena and mailbox; point-to-point data apart)\n",
        double(run.shm_bytes) / double(1 << 20));
    std::printf("# collectives: %s; dtype %s; op %s; root %d; %s%s\n",
                join(coll_names(o_), ", ").c_str(), join(dtype_names(o_), ", ").c_str(),
                join(op_names(o_), ", ").c_str(), o_.root,
                join(place_names(o_, "in place", "out of place"), ", ").c_str(),
                o_.uneven ? "; uneven v-counts" : "");
    std::printf("# sizes: %s\n", sizes.c_str());
    std::printf("# iterations: %s, warm-up %d; %s calls; check %s; match_id cache %s\n", iters,
                o_.warmup, o_.nonblocking ? "nonblocking" : "blocking", check_name(o_.check),
                o_.cache ? "on" : "off");
    std::printf("# algorithms: ccl's choice per call (CCL_LOG_LEVEL=info logs them)\n");
    std::printf(
        "# time: the slowest rank's average (min: the fastest rank's; #iters: timed calls per\n"
        "#   rank); algbw = size / time; busbw = algbw x 2(n-1)/n (allreduce), x (n-1)/n\n"
        "#   (allgather(v), reduce_scatter, alltoall(v)), x 1 (others)\n");
    std::fflush(stdout);

    if (csv_) {
        std::fputs(kCsvHeader, csv_);
        std::fflush(csv_);
    }
    if (json_) {
        std::fprintf(json_, "{\n  \"run\": {\n");
        std::fprintf(json_,
                     "    \"tool\": \"ccl_bench\", \"ccl_version\": %s, \"ranks\": %d, "
                     "\"nodes\": %d, \"transport\": %s,\n",
                     json_string(run.version).c_str(), run.ranks, run.nodes,
                     json_string(run.transport).c_str());
        std::fprintf(json_,
                     "    \"cpu\": %s, \"cpus\": %d, \"affinity\": %s, \"host\": %s, "
                     "\"date\": %s,\n",
                     json_string(run.cpu).c_str(), run.cpus, json_string(run.affinity).c_str(),
                     json_string(run.host).c_str(), json_string(run.date).c_str());
        std::fprintf(json_, "    \"own_cpus\": %d, \"threads\": %d,\n", run.own_cpus, run.threads);
        std::fprintf(json_, "    \"shm_bytes_per_rank\": %zu,\n", run.shm_bytes);
        std::fprintf(json_,
                     "    \"collectives\": %s, \"dtypes\": %s, \"ops\": %s, \"root\": %d, "
                     "\"in_place\": [%s], \"uneven\": %s,\n",
                     json_strings(coll_names(o_)).c_str(), json_strings(dtype_names(o_)).c_str(),
                     json_strings(op_names(o_)).c_str(), o_.root,
                     join(place_names(o_, "true", "false"), ", ").c_str(), json_bool(o_.uneven));
        std::fprintf(json_,
                     "    \"sizes\": [%s], \"iters\": %d, \"time_s\": %g, \"min_iters\": %d, "
                     "\"max_iters\": %d, \"warmup\": %d,\n",
                     join(size_names(o_.size_list(), false), ", ").c_str(), o_.iters, o_.time_s,
                     o_.min_iters, o_.max_iters, o_.warmup);
        std::fprintf(json_,
                     "    \"nonblocking\": %s, \"check\": \"%s\", \"cache\": %s\n  },\n"
                     "  \"results\": [",
                     json_bool(o_.nonblocking), check_name(o_.check), json_bool(o_.cache));
        std::fflush(json_);
    }
}

void Report::section(const char* coll, const std::string& title) {
    section_coll_ = coll;
    section_busbw_sum_ = 0;
    section_rows_ = 0;
    if (!active_) return;
    std::printf("#\n# %s", title.c_str());
    std::printf("\n#%12s %12s %9s %6s %5s %11s %8s %8s %7s %8s %11s\n", "size", "count", "type",
                "redop", "root", "time", "algbw", "busbw", "#wrong", "#iters", "min");
    std::printf("#%12s %12s %9s %6s %5s %11s %8s %8s %7s %8s %11s\n", "(B)", "(elements)", "", "",
                "", "(us)", "(GB/s)", "(GB/s)", "", "", "(us)");
    std::fflush(stdout);
}

void Report::row(const Row& r) {
    if (r.wrong > 0) wrong_ += r.wrong;
    if (r.wrong < 0) unchecked_ = true;
    if (r.size_bytes > 0) {
        busbw_sum_ += r.busbw_gbps, ++rows_;
        section_busbw_sum_ += r.busbw_gbps, ++section_rows_;
    }
    if (!active_) return;
    std::printf(" %12zu %12zu %9s %6s %5d %11.2f %8.2f %8.2f %7s %8d %11.2f\n", r.size_bytes,
                r.count, r.dtype, r.op, r.root, r.time_us, r.algbw_gbps, r.busbw_gbps,
                r.wrong < 0 ? "N/A" : std::to_string(r.wrong).c_str(), r.iters, r.min_us);
    std::fflush(stdout);
    if (csv_) {
        std::fprintf(csv_, "%s,%d,%zu,%zu,%s,%s,%d,%d,%.3f,%.4f,%.4f,%s,%d,%.3f\n", r.coll, r.ranks,
                     r.size_bytes, r.count, r.dtype, r.op, r.root, int(r.in_place), r.time_us,
                     r.algbw_gbps, r.busbw_gbps, r.wrong < 0 ? "" : std::to_string(r.wrong).c_str(),
                     r.iters, r.min_us);
        std::fflush(csv_);
    }
    if (json_) json_row(r);
}

void Report::json_row(const Row& r) {
    std::fprintf(json_,
                 "%s\n    {\"collective\": \"%s\", \"ranks\": %d, \"size_bytes\": %zu, \"count\": "
                 "%zu, \"dtype\": \"%s\", \"op\": \"%s\", \"root\": %d, \"in_place\": %s, "
                 "\"time_us\": %.3f, \"algbw_gbps\": %.4f, \"busbw_gbps\": %.4f, \"wrong\": %s, "
                 "\"iters\": %d, \"min_us\": %.3f}",
                 json_first_row_ ? "" : ",", r.coll, r.ranks, r.size_bytes, r.count, r.dtype, r.op,
                 r.root, json_bool(r.in_place), r.time_us, r.algbw_gbps, r.busbw_gbps,
                 r.wrong < 0 ? "null" : std::to_string(r.wrong).c_str(), r.iters, r.min_us);
    json_first_row_ = false;
    std::fflush(json_);
}

void Report::skipped(const std::string& why) {
    if (active_) std::printf("# skipped: %s\n", why.c_str());
}

void Report::section_end() {
    if (active_ && section_rows_ > 0)
        std::printf("# %s avg busbw: %.3f GB/s\n", section_coll_,
                    section_busbw_sum_ / section_rows_);
}

int64_t Report::finish() {
    if (active_) {
        std::printf("#\n# wrong values: %lld%s\n", static_cast<long long>(wrong_),
                    wrong_       ? " (FAILED)"
                    : unchecked_ ? " (some not checked)"
                                 : " (OK)");
        // The closing line as nccl-tests writes it, for the scrapers that read it; GB/s, the mean
        // over the rows (barrier's have no bandwidth).
        if (rows_ > 0)
            std::printf(
                "# busbw below: GB/s, the mean over %d rows (barrier excluded)\n"
                "# Avg bus bandwidth    : %g \n",
                rows_, busbw_sum_ / rows_);
        std::fflush(stdout);
        if (json_) std::fprintf(json_, "\n  ]\n}\n");
    }
    return wrong_;
}

}  // namespace bench
