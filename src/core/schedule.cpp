#include "core/schedule.h"

#include "core/reduce.h"

namespace ccl {

const char* coll_name(CollType coll) {
    switch (coll) {
        case CollType::allreduce: return "allreduce";
        case CollType::broadcast: return "broadcast";
        case CollType::barrier: return "barrier";
        case CollType::reduce: return "reduce";
        case CollType::allgather: return "allgather";
        case CollType::allgatherv: return "allgatherv";
        case CollType::reduce_scatter: return "reduce_scatter";
        case CollType::alltoall: return "alltoall";
        case CollType::alltoallv: return "alltoallv";
        case CollType::send: return "send";
        case CollType::recv: return "recv";
    }
    return "?";
}

uint32_t CollSignature::digest(uint64_t salt) const {
    // FNV-1a over the fields; collisions only weaken a diagnostic, never correctness.
    uint64_t h = 1469598103934665603ull;
    auto mix = [&h](uint64_t v) {
        for (int i = 0; i < 8; ++i) {
            h ^= (v >> (8 * i)) & 0xff;
            h *= 1099511628211ull;
        }
    };
    mix(uint64_t(coll));
    mix(count);
    mix(uint64_t(dtype));
    mix(uint64_t(op));
    mix(uint64_t(int64_t(root)));
    mix(salt);
    return uint32_t(h ^ (h >> 32));
}

std::string CollSignature::describe() const {
    std::string s = std::string(coll_name(coll)) + "(";
    if (coll == CollType::barrier) return s + ")";
    s += "count " + std::to_string(count) + ", " + dtype_name(dtype);
    bool reduces =
        coll == CollType::allreduce || coll == CollType::reduce || coll == CollType::reduce_scatter;
    if (reduces) s += std::string(", ") + op_name(op);
    if (coll == CollType::broadcast || coll == CollType::reduce)
        s += ", root " + std::to_string(root);
    if (coll == CollType::send || coll == CollType::recv) s += ", peer " + std::to_string(root);
    return s + ")";
}

std::string Schedule::algorithm() const {
    std::string s;
    for (const Step& step : steps) s += (s.empty() ? "" : "+") + std::string(step.name);
    return s.empty() ? "none" : s;
}

}  // namespace ccl
