#include <algorithm>
#include <cstring>
#include <vector>

#include "base/reduce.h"
#include "shm/collectives.h"
#include "shm/copy.h"
#include "shm/reduce_peers.h"

namespace ccl::shm {

Task reduce_scatter(Arena& arena, Signature sig, const void* send, void* recv, size_t count,
                    ccl_datatype_t dtype, ccl_reduction_t op) {
    const int n = arena.nranks(), me = arena.rank();
    const size_t esize = dtype_size(dtype);
    // Elements of each block per round: the buffer split n ways, in whole cache lines when it can.
    // Small ones in one round through the lanes.
    size_t per_peer = arena.buffer_size() / size_t(n);
    if (per_peer >= 64) per_peer -= per_peer % 64;
    const bool lane = size_t(n) * count * esize <= Arena::kLaneBytes;
    const size_t piece = lane ? count : std::max<size_t>(1, per_peer / esize);
    const char* in = static_cast<const char*>(send);
    PerRank<const void*> srcs(n);
    for (size_t off = 0; off < count; off += piece) {
        size_t c = std::min(piece, count - off);
        arena.begin_round(sig, lane ? size_t(n) * count * esize : SIZE_MAX);
        co_await arena.buffer_free();
        char* buf = static_cast<char*>(arena.own_buffer());
        // Peers read my pieces of their blocks; my own block I reduce from `send` directly.
        PerRank<Copy> blocks(n);
        size_t k = 0;
        for (int r = 0; r < n; ++r)
            if (r != me)
                blocks[k++] = {buf + size_t(r) * piece * esize,
                               in + (size_t(r) * count + off) * esize, c * esize};
        copy_wide(blocks.data(), k);
        arena.ready();
        co_await arena.all_ready();
        point_at_buffers(arena, size_t(me) * piece * esize, in + (size_t(me) * count + off) * esize,
                         srcs);
        reduce_wide(static_cast<char*>(recv) + off * esize, srcs.data(), n, c, dtype, op, n);
        arena.done();
    }
}

Task reduce_scatter_cma(Arena& arena, Signature sig, const void* send, void* recv, size_t count,
                        ccl_datatype_t dtype, ccl_reduction_t op) {
    const int n = arena.nranks(), me = arena.rank();
    const size_t esize = dtype_size(dtype);
    arena.begin_round(sig);
    co_await arena.buffer_free();
    share_extents(arena, {send, size_t(n) * count * esize, recv, count * esize});
    co_await arena.all_ready();
    co_await arena.buffer_free(1);
    // My block sits at the same offset of every rank's input.
    reduce_peer_range(arena, send, static_cast<char*>(recv), size_t(me) * count,
                      size_t(me + 1) * count, esize, dtype, op);
    arena.done();
    co_await arena.all_done();  // no peer reads my input any more
}

}  // namespace ccl::shm
