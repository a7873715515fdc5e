#include <algorithm>
#include <cstring>
#include <vector>

#include "core/reduce.h"
#include "shm/cma.h"
#include "shm/collectives.h"

namespace ccl::shm {

Task allgatherv(Arena& arena, uint32_t sig, const void* send, void* recv,
                const std::vector<size_t>& counts, ccl_datatype_t dtype) {
    const int n = arena.nranks(), me = arena.rank();
    const size_t esize = dtype_size(dtype), piece = arena.buffer_size();
    std::vector<size_t> offset(size_t(n) + 1, 0);  // bytes
    for (int r = 0; r < n; ++r)
        offset[size_t(r) + 1] = offset[size_t(r)] + counts[size_t(r)] * esize;
    size_t largest = 0;
    for (int r = 0; r < n; ++r) largest = std::max(largest, counts[size_t(r)] * esize);
    char* out = static_cast<char*>(recv);
    const char* mine = static_cast<const char*>(send);
    const size_t my_bytes = offset[size_t(me) + 1] - offset[size_t(me)];
    if (mine != out + offset[size_t(me)]) std::memcpy(out + offset[size_t(me)], mine, my_bytes);
    for (size_t off = 0; off < largest; off += piece) {
        arena.begin_round(sig);
        if (off < my_bytes) {
            co_await arena.buffer_free();
            std::memcpy(arena.own_buffer(), mine + off, std::min(piece, my_bytes - off));
        }
        arena.ready();
        co_await arena.all_ready();
        for (int r = 0; r < n; ++r) {
            size_t bytes = offset[size_t(r) + 1] - offset[size_t(r)];
            if (r == me || off >= bytes) continue;
            std::memcpy(out + offset[size_t(r)] + off, arena.peer_buffer(r),
                        std::min(piece, bytes - off));
        }
        arena.done();
    }
}

Task allgatherv_cma(Arena& arena, uint32_t sig, const void* send, void* recv,
                    const std::vector<size_t>& counts, ccl_datatype_t dtype) {
    const int n = arena.nranks(), me = arena.rank();
    const size_t esize = dtype_size(dtype);
    std::vector<size_t> offset(size_t(n) + 1, 0);  // bytes
    for (int r = 0; r < n; ++r)
        offset[size_t(r) + 1] = offset[size_t(r)] + counts[size_t(r)] * esize;
    char* out = static_cast<char*>(recv);
    if (send != out + offset[size_t(me)])
        std::memcpy(out + offset[size_t(me)], send, offset[size_t(me) + 1] - offset[size_t(me)]);
    arena.begin_round(sig);
    co_await arena.buffer_free();
    *static_cast<const void**>(arena.own_buffer()) = send;  // where peers read my block
    arena.ready();
    co_await arena.all_ready();
    for (int i = 1; i < n; ++i) {  // starting at the next rank, so that ranks read different peers
        int r = (me + i) % n;
        size_t bytes = offset[size_t(r) + 1] - offset[size_t(r)];
        if (bytes > 0)
            cma_read(arena.peer_pid(r), out + offset[size_t(r)],
                     *static_cast<const void* const*>(arena.peer_buffer(r)), bytes);
    }
    arena.done();
    co_await arena.all_done();  // until then peers may still read my send buffer
}

Task reduce_scatter(Arena& arena, uint32_t sig, const void* send, void* recv, size_t count,
                    ccl_datatype_t dtype, ccl_reduction_t op) {
    const int n = arena.nranks(), me = arena.rank();
    const size_t esize = dtype_size(dtype);
    // Elements of each block per round: the buffer split n ways, in whole cache lines when it can.
    size_t per_peer = arena.buffer_size() / size_t(n);
    if (per_peer >= 64) per_peer -= per_peer % 64;
    const size_t piece = std::max<size_t>(1, per_peer / esize);
    const char* in = static_cast<const char*>(send);
    std::vector<const void*> srcs(static_cast<size_t>(n));
    for (size_t off = 0; off < count; off += piece) {
        size_t c = std::min(piece, count - off);
        arena.begin_round(sig);
        co_await arena.buffer_free();
        char* buf = static_cast<char*>(arena.own_buffer());
        // Peers read my pieces of their blocks; my own block I reduce from `send` directly.
        for (int r = 0; r < n; ++r)
            if (r != me)
                std::memcpy(buf + size_t(r) * piece * esize, in + (size_t(r) * count + off) * esize,
                            c * esize);
        arena.ready();
        co_await arena.all_ready();
        for (int r = 0; r < n; ++r)
            srcs[size_t(r)] = r == me ? in + (size_t(me) * count + off) * esize
                                      : static_cast<const char*>(arena.peer_buffer(r)) +
                                            size_t(me) * piece * esize;
        reduce(static_cast<char*>(recv) + off * esize, srcs.data(), n, c, dtype, op, n);
        arena.done();
    }
}

}  // namespace ccl::shm
