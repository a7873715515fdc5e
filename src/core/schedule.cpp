#include "core/schedule.h"

#include "core/reduce.h"

namespace ccl {

const char* coll_name(CollType coll) {
    switch (coll) {
        case CollType::allreduce: return "allreduce";
        case CollType::broadcast: return "broadcast";
        case CollType::barrier: return "barrier";
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
    if (coll == CollType::allreduce) s += std::string(", ") + op_name(op);
    if (coll == CollType::broadcast) s += ", root " + std::to_string(root);
    return s + ")";
}

std::string Schedule::algorithm() const {
    std::string s;
    for (const Step& step : steps) s += (s.empty() ? "" : "+") + std::string(step.name);
    return s.empty() ? "none" : s;
}

}  // namespace ccl
