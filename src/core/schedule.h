// A schedule: the planned form of one collective call, a short list of steps. The planner builds
// it from the call's signature (never from its buffers), so one schedule can run many times with
// new buffers; the executor runs it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/task.h"
#include "ccl/ccl.h"
#include "shm/arena.h"

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

// The algorithms: what core/tuning chooses for a call, and what the rounds of the call's signature
// name (CollSignature::round), so that ranks that chose differently fail with a mismatch instead
// of mixing algorithms. Under 128 (7 bits).
enum class Algo : uint8_t {
    none = 0,
    direct,
    rsag,
    broadcast,
    barrier,
    fused,
    reduce_direct,
    reduce_split,
    allgather,
    reduce_scatter,
    alltoall,
    allgather_cma,
    allreduce_cma,
    alltoall_lane,
    reduce_cma,
    broadcast_cma,
    reduce_scatter_cma,
    copy_costs,  // the communicator's probe of copy costs (Communicator::probe_single_copy)
    device_ipc,  // device buffers through IPC handles (core/device_coll.h)
    hier_allreduce,
    hier_broadcast,
    hier_reduce,
    hier_allgather,
    hier_reduce_scatter,
    hier_barrier,
    hier_alltoall,
    local_copy,  // a reduction on one rank: the copy of its input (no rounds)
    p2p,         // sends and receives: the mailbox, or the fabric to another node (no rounds)
};
const char* algo_name(Algo algo);

// Everything about a call that shapes its plan. Every rank passes the same signature.
struct CollSignature {
    CollType coll = CollType::barrier;
    size_t count = 0;
    ccl_datatype_t dtype = CCL_UINT8;
    ccl_reduction_t op = CCL_SUM;
    int root = 0;  // the root, or the peer of send / recv (kAnySource: any peer's message)
    int tag = 0;   // send / recv: the message's tag (0 to kMaxTag)

    static constexpr int kAnySource = -1;
    static constexpr int kMaxTag = (1 << 24) - 1;  // what p2p_digest has room for

    bool operator==(const CollSignature&) const = default;
    // What the rounds of this call by `algo` say of it (shm::Signature): every field exactly.
    shm::Signature round(Algo algo) const;
    // What a send and its receive must share besides their byte size (which the transports
    // compare): the datatype, which with the size gives the count exactly, and the tag, which
    // receives match by (in the upper 24 bits: shm::Mailbox::tag_of).
    uint32_t p2p_digest() const { return uint32_t(tag) << 8 | (uint32_t(dtype) + 1); }
    std::string describe() const;  // e.g. "allreduce(count 5, float32, sum)"
};

// The buffers of one call. `counts` holds the v-collectives' per-rank counts: allgatherv's
// recvcounts, alltoallv's sendcounts then recvcounts (copied, so the caller's arrays may go).
// A round's signature as a mismatch's message shows it: the call, and the algorithm.
std::string describe_round(const shm::Signature& sig);

struct Buffers {
    const void* send = nullptr;
    void* recv = nullptr;
    std::vector<size_t> counts;
    int* source = nullptr;  // a receive: where the sender's rank goes (kAnySource needs it)
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
