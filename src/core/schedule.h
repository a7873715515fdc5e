// A schedule: the planned form of one collective call, a short list of steps. The planner builds
// it from the call's signature (never from its buffers), so one schedule can run many times with
// new buffers; the executor runs it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ccl/ccl.h"
#include "core/task.h"

namespace ccl {

enum class CollType {
    allreduce,
    broadcast,
    barrier,
    reduce,
    allgather,
    allgatherv,
    reduce_scatter,
    alltoall,
    alltoallv,
    send,
    recv
};
const char* coll_name(CollType coll);
inline bool is_p2p(CollType coll) { return coll == CollType::send || coll == CollType::recv; }

// Everything about a call that shapes its plan. Every rank passes the same signature.
struct CollSignature {
    CollType coll = CollType::barrier;
    size_t count = 0;
    ccl_datatype_t dtype = CCL_UINT8;
    ccl_reduction_t op = CCL_SUM;
    int root = 0;  // the root, or the peer of send / recv

    bool operator==(const CollSignature&) const = default;
    // A 32-bit digest of the fields, mixed with `salt` (the algorithm, so that ranks configured to
    // pick different algorithms fail with a mismatch instead of computing garbage).
    uint32_t digest(uint64_t salt = 0) const;
    // The digest a send and its receive share: count and datatype.
    uint32_t p2p_digest() const { return CollSignature{CollType::send, count, dtype}.digest(); }
    std::string describe() const;  // e.g. "allreduce(count 5, float32, sum)"
};

// The buffers of one call. `counts` holds the v-collectives' per-rank counts: allgatherv's
// recvcounts, alltoallv's sendcounts then recvcounts (copied, so the caller's arrays may go).
struct Buffers {
    const void* send = nullptr;
    void* recv = nullptr;
    std::vector<size_t> counts;
};

struct Step {
    const char* name;                           // a literal, e.g. "shm/allreduce_direct", for logs
    std::function<Task(const Buffers&)> start;  // the step's coroutine, not started yet
    // Optional: the same step as a plain function that blocks in its waits, which a blocking call
    // runs instead. For small messages, where the coroutine's frame and resumptions are a large
    // part of the call (see shm::broadcast_eager).
    std::function<void(const Buffers&)> run = nullptr;
};

struct Schedule {
    CollSignature sig;
    std::vector<Step> steps;
    std::string algorithm() const;  // the steps' names joined with '+'
};

}  // namespace ccl
