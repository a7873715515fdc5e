#include "core/schedule.h"

#include "base/reduce.h"

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

const char* algo_name(Algo algo) {
    switch (algo) {
        case Algo::none: return "none";
        case Algo::direct: return "allreduce_direct";
        case Algo::rsag: return "allreduce_rsag";
        case Algo::broadcast: return "broadcast";
        case Algo::barrier: return "barrier";
        case Algo::fused: return "allreduce_fused";
        case Algo::reduce_direct: return "reduce_direct";
        case Algo::reduce_split: return "reduce_split";
        case Algo::allgather: return "allgatherv";
        case Algo::reduce_scatter: return "reduce_scatter";
        case Algo::alltoall: return "alltoallv";
        case Algo::allgather_cma: return "allgatherv_cma";
        case Algo::allreduce_cma: return "allreduce_cma";
        case Algo::alltoall_lane: return "alltoall_lane";
        case Algo::reduce_cma: return "reduce_cma";
        case Algo::broadcast_cma: return "broadcast_cma";
        case Algo::reduce_scatter_cma: return "reduce_scatter_cma";
        case Algo::copy_costs: return "copy_costs";
        case Algo::device_ipc: return "device_ipc";
        case Algo::hier_allreduce: return "hier/allreduce";
        case Algo::hier_broadcast: return "hier/broadcast";
        case Algo::hier_reduce: return "hier/reduce";
        case Algo::hier_allgather: return "hier/allgather";
        case Algo::hier_reduce_scatter: return "hier/reduce_scatter";
        case Algo::hier_barrier: return "hier/barrier";
        case Algo::hier_alltoall: return "hier/alltoall";
        case Algo::local_copy: return "local_copy";
        case Algo::p2p: return "p2p";
    }
    return "?";
}

namespace {

// How CollSignature::round packs the fields other than the count into shm::Signature::what: in
// the low 34 bits (where the tag holds them exactly) while the root is below 2^16.
constexpr int kCollAt = 0, kDtypeAt = 4, kOpAt = 8, kAlgoAt = 11, kRootAt = 18;
static_assert(int(CollType::recv) < 16 && CCL_FLOAT64 < 16 && CCL_AVG < 8);
static_assert(kRootAt + 16 == shm::Signature::kWhatBits);

uint64_t field(uint64_t what, int at, int bits) { return what >> at & ((uint64_t(1) << bits) - 1); }

}  // namespace

shm::Signature CollSignature::round(Algo algo) const {
    const uint64_t what = uint64_t(coll) << kCollAt | uint64_t(dtype) << kDtypeAt |
                          uint64_t(op) << kOpAt | uint64_t(algo) << kAlgoAt |
                          uint64_t(uint32_t(root)) << kRootAt;
    return shm::Signature(what, count);
}

std::string describe_round(const shm::Signature& sig) {
    const uint64_t w = sig.what();
    CollSignature c{CollType(field(w, kCollAt, 4)), size_t(sig.count()),
                    ccl_datatype_t(field(w, kDtypeAt, 4)), ccl_reduction_t(field(w, kOpAt, 3)),
                    int(uint32_t(w >> kRootAt))};
    return c.describe() + " [algorithm " + algo_name(Algo(field(w, kAlgoAt, 7))) + "]";
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
    if (coll == CollType::send || coll == CollType::recv) {
        s += root == kAnySource ? std::string(", any peer") : ", peer " + std::to_string(root);
        if (tag != 0) s += ", tag " + std::to_string(tag);
    }
    return s + ")";
}

std::string Schedule::algorithm() const {
    std::string s;
    for (const Step& step : steps) s += (s.empty() ? "" : "+") + std::string(step.name);
    return s.empty() ? "none" : s;
}

}  // namespace ccl
