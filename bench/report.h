// What ccl_bench prints: the run's header, one table per collective case, a closing summary, and
// the same rows in the optional CSV and JSON files. Only rank 0's Report writes anything.
#pragma once

#include <cstdio>
#include <string>

#include "bench.h"

namespace bench {

// Facts about the run for the header.
struct RunInfo {
    int ranks = 1;
    int nodes = 1;
    std::string transport = "shm";
    size_t shm_bytes = 0;  // this rank's share of the node's shared memory (ccl_comm_shm_bytes)
    std::string version;   // "0.1.0"
    std::string cpu;       // /proc/cpuinfo's model name
    int cpus = 0;          // online
    std::string affinity;  // the cpus rank 0 may run on (a list like "0" or "0-15")
    int own_cpus = 0;      // how many
    int threads = 1;       // rank 0's team (ccl_comm_threads)
    std::string host, date;
};

class Report {
public:
    Report(const Options& o, bool active);
    ~Report();
    Report(const Report&) = delete;
    Report& operator=(const Report&) = delete;

    // Opens the CSV and JSON files; returns what went wrong ("" when all is well).
    std::string open_files();
    void header(const RunInfo& run);
    // Starts the table of one case of collective `coll`, described by `title`.
    void section(const char* coll, const std::string& title);
    void row(const Row& r);
    void skipped(const std::string& why);  // the case is not supported: no rows
    void section_end();
    // The closing lines; returns the wrong elements of the whole run.
    int64_t finish();

private:
    void json_row(const Row& r);

    const Options& o_;
    bool active_;
    std::FILE* csv_ = nullptr;
    std::FILE* json_ = nullptr;
    bool json_first_row_ = true;
    const char* section_coll_ = "";
    double busbw_sum_ = 0, section_busbw_sum_ = 0;
    int rows_ = 0, section_rows_ = 0;  // rows with a busbw (barrier's have none)
    int64_t wrong_ = 0;
    bool unchecked_ = false;
};

}  // namespace bench
