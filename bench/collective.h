// One benchmarked call: a collective with its datatype, reduction and placement, at one size at a
// time. It lays out the buffers, issues the call, and checks what the call left.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "bench.h"
#include "data.h"

namespace bench {

// Page-aligned memory that grows on demand (its contents are not kept).
class Buffer {
public:
    char* get(size_t bytes);

private:
    struct Free {
        void operator()(char* p) const { std::free(p); }
    };
    std::unique_ptr<char, Free> mem_;
    size_t capacity_ = 0;
};

class Case {
public:
    Case(ccl_comm_t comm, int rank, int ranks, const Options& o, Coll coll, ccl_datatype_t dtype,
         ccl_reduction_t op, bool in_place);

    // Lays the buffers out for a message of about `bytes` (rounded down to whole elements per
    // rank, at least one).
    void resize(size_t bytes);
    size_t bytes() const { return bytes_; }  // the row's size, nccl-tests' definition
    size_t count() const { return bytes_ / es_; }

    // The row's labels.
    Coll coll() const { return coll_; }
    bool in_place() const { return in_place_; }
    const char* dtype_name() const;  // "none" for barrier
    const char* op_name() const;     // "none" for collectives that do not reduce
    int root() const;                // -1 for collectives without a root
    std::string title() const;       // "allreduce, float32, sum, out of place"

    // Fresh inputs and poisoned outputs, ready for a checked call.
    void prepare();
    // One call (blocking, or nonblocking then ccl_wait).
    ccl_result_t issue();
    // This rank's wrong elements after a prepared call.
    uint64_t wrong() const;

private:
    size_t off(const std::vector<size_t>& counts, int upto) const;  // counts[0 .. upto-1] summed
    size_t alltoallv_count(int from, int to) const;

    ccl_comm_t comm_;
    int rank_, ranks_;
    const Options& o_;
    Coll coll_;
    ccl_datatype_t dtype_;
    ccl_reduction_t op_;
    bool in_place_;
    size_t es_;
    Pattern pattern_;

    // The layout for the current size.
    size_t bytes_ = 0;
    size_t block_ = 0;                 // elements per rank (count for the rank-less collectives)
    std::vector<size_t> counts_;       // allgatherv: every rank's; alltoallv: sent to each rank
    std::vector<size_t> recv_counts_;  // alltoallv: received from each rank
    size_t send_elems_ = 0, recv_elems_ = 0;
    char* send_ = nullptr;  // where the input is (inside recv_ when in place)
    char* recv_ = nullptr;  // where the output goes (inside send_ for in-place reduce_scatter)
    Buffer send_buf_, recv_buf_;
    std::string match_id_;
    ccl_coll_attr_t attr_ = CCL_COLL_ATTR_INIT;
};

}  // namespace bench
