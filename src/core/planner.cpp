#include "core/planner.h"

#include <cstring>

#include "core/comm.h"
#include "core/config.h"
#include "core/reduce.h"
#include "shm/collectives.h"

namespace ccl {

namespace {

Step local_copy(size_t bytes) {
    return {"local_copy", [bytes](const Buffers& b) {
                if (b.send != b.recv) std::memcpy(b.recv, b.send, bytes);
            }};
}

Step plan_allreduce(const Config& cfg, shm::Arena& arena, const CollSignature& sig) {
    const uint32_t digest = sig.digest();
    const size_t bytes = sig.count * dtype_size(sig.dtype);
    const std::string& choice = cfg.allreduce_algo;
    bool direct = choice == "direct" || (choice == "auto" && bytes <= cfg.allreduce_direct_max);
    if (direct)
        return {"shm/allreduce_direct", [&arena, sig, digest](const Buffers& b) {
                    shm::allreduce_direct(arena, digest, b.send, b.recv, sig.count, sig.dtype,
                                          sig.op);
                }};
    return {"shm/allreduce_rsag", [&arena, sig, digest](const Buffers& b) {
                shm::allreduce_rsag(arena, digest, b.send, b.recv, sig.count, sig.dtype, sig.op);
            }};
}

}  // namespace

Schedule plan(Communicator& comm, const CollSignature& sig) {
    Schedule s{sig, {}};
    const size_t bytes = sig.count * dtype_size(sig.dtype);
    shm::Arena& arena = comm.arena();
    const uint32_t digest = sig.digest();
    switch (sig.coll) {
        case CollType::allreduce:
            if (sig.count == 0) break;
            // One rank: the reduction of one input is that input (AVG divides by 1).
            if (comm.size() == 1)
                s.steps.push_back(local_copy(bytes));
            else
                s.steps.push_back(plan_allreduce(comm.config(), arena, sig));
            break;
        case CollType::broadcast:
            if (sig.count == 0 || comm.size() == 1) break;
            s.steps.push_back(
                {"shm/broadcast", [&arena, bytes, digest, root = sig.root](const Buffers& b) {
                     shm::broadcast(arena, digest, b.recv, bytes, root);
                 }});
            break;
        case CollType::barrier:
            if (comm.size() == 1) break;
            s.steps.push_back(
                {"shm/barrier", [&arena, digest](const Buffers&) { shm::barrier(arena, digest); }});
            break;
    }
    return s;
}

void execute(const Schedule& schedule, const Buffers& bufs) {
    for (const Step& step : schedule.steps) step.run(bufs);
}

}  // namespace ccl
