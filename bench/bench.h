// ccl_bench's shared declarations: the collectives it knows, its options, and one result row.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ccl/ccl.h"

namespace bench {

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

// Which buffer placements a collective has: out of place and in place, out of place only, or one
// buffer (broadcast) or none (barrier), reported as out of place.
enum class Places { both, out_only, one_buffer, none };

// busbw = algbw * factor; nccl-tests' definitions.
enum class BusFactor { one, ring /* (n-1)/n */, allreduce /* 2(n-1)/n */ };

struct CollInfo {
    Coll coll;
    const char* name;
    bool reduces;  // takes a reduction
    bool rooted;   // takes a root
    Places places;
    BusFactor bus;
};

const CollInfo& info(Coll c);
double bus_factor(Coll c, int ranks);

struct DType {
    ccl_datatype_t type;
    const char* name;
    size_t size;
};
const DType& dtype_info(ccl_datatype_t t);
const char* op_name(ccl_reduction_t op);

enum class Check { none, last, all };

struct Options {
    std::vector<Coll> colls{Coll::allreduce, Coll::broadcast, Coll::barrier};
    std::vector<size_t> sizes;  // explicit sizes (--sizes); empty: min_bytes .. max_bytes
    size_t min_bytes = 8, max_bytes = 64u << 20, factor = 2;
    std::vector<ccl_datatype_t> dtypes{CCL_FLOAT32};
    std::vector<ccl_reduction_t> ops{CCL_SUM};
    std::vector<bool> in_place{false};  // the placements to run, in order
    int root = 0;
    int iters = 0;  // 0: chosen per size for about `time_s` of timing
    int min_iters = 5, max_iters = 100000;
    int warmup = 5;
    double time_s = 0.2;
    Check check = Check::last;
    bool cache = false;  // match_id caching (attr.to_cache)
    bool nonblocking = false;
    bool uneven = false;  // uneven counts for allgatherv / alltoallv
    std::string csv_path, json_path;

    // The message sizes to sweep, in bytes (before each collective rounds them to whole blocks).
    std::vector<size_t> size_list() const;
};

// Parses the command line; prints the help or an error and exits when it must.
Options parse_options(int argc, char** argv);

// The rank this process has according to its launcher (0 when none says): lets one process of a
// job print the help or an option error before any communicator exists.
int launcher_rank();

// One line of the results: the columns of the CSV file, in order.
struct Row {
    const char* coll;
    int ranks;
    size_t size_bytes, count;
    const char* dtype;
    const char* op;
    int root;
    bool in_place;
    double time_us, algbw_gbps, busbw_gbps;
    int64_t wrong;  // summed over ranks; -1 when not checked (empty in CSV, null in JSON)
    int iters;      // timed calls per rank
    double min_us;  // the fastest rank's average (time_us: the slowest's)
};

// "64 MiB", "8 B".
std::string format_bytes(size_t bytes);

}  // namespace bench
