// Collectives among the co-located ranks of a communicator, over its shared-memory arena. Every
// rank calls the same function with the same count, datatype, reduction, root and signature. Each
// is a coroutine (core/task.h): nothing runs until the task is resumed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ccl/ccl.h"
#include "shm/arena.h"

namespace ccl::shm {

// Small messages: every rank copies its input in, then reduces all ranks' buffers itself.
// One synchronisation per chunk.
Task allreduce_direct(Arena& arena, uint32_t sig, const void* send, void* recv, size_t count,
                      ccl_datatype_t dtype, ccl_reduction_t op);

// Several small allreduces at once: every input packed into the buffer, one synchronisation.
// The parts' packed sizes (packed_size) must add up to at most the arena's buffer size.
struct AllreducePart {
    const void* send;
    void* recv;
    size_t count;
    ccl_datatype_t dtype;
    ccl_reduction_t op;
};
Task allreduce_direct_multi(Arena& arena, uint32_t sig, const std::vector<AllreducePart>& parts);
// Bytes a part of `bytes` takes in the buffer (cache-line aligned, so parts never share a line).
inline size_t packed_size(size_t bytes) { return (bytes + 63) / 64 * 64; }

// Large messages: per chunk, every rank reduces one slice of all ranks' inputs (reduce-scatter),
// then copies every slice out (all-gather); all ranks work at once.
Task allreduce_rsag(Arena& arena, uint32_t sig, const void* send, void* recv, size_t count,
                    ccl_datatype_t dtype, ccl_reduction_t op);

// The root copies chunks in, the others copy them out; a reader can lag the root by a chunk.
Task broadcast(Arena& arena, uint32_t sig, void* buf, size_t bytes, int root);

Task barrier(Arena& arena, uint32_t sig);

}  // namespace ccl::shm
