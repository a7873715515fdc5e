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

namespace ccl {

enum class CollType { allreduce, broadcast, barrier };
const char* coll_name(CollType coll);

// Everything about a call that shapes its plan. Every rank passes the same signature.
struct CollSignature {
    CollType coll = CollType::barrier;
    size_t count = 0;
    ccl_datatype_t dtype = CCL_UINT8;
    ccl_reduction_t op = CCL_SUM;
    int root = 0;
    bool in_place = false;

    bool operator==(const CollSignature&) const = default;
    // A 32-bit digest of the fields every rank must agree on (in_place may differ by rank).
    uint32_t digest() const;
};

// The buffers of one call.
struct Buffers {
    const void* send = nullptr;
    void* recv = nullptr;
};

struct Step {
    std::string name;  // e.g. "shm/allreduce_direct", for logs and ccl_bench
    std::function<void(const Buffers&)> run;
};

struct Schedule {
    CollSignature sig;
    std::vector<Step> steps;
    std::string algorithm() const;  // the steps' names joined with '+'
};

}  // namespace ccl
