#include <algorithm>
#include <cstring>
#include <vector>

#include "core/reduce.h"
#include "shm/collectives.h"
#include "shm/copy.h"

namespace ccl::shm {

namespace {

// Elements per chunk: a whole buffer's worth.
size_t chunk_elems(const Arena& arena, size_t esize) { return arena.buffer_size() / esize; }

}  // namespace

Task allreduce_direct(Arena& arena, uint32_t sig, const void* send, void* recv, size_t count,
                      ccl_datatype_t dtype, ccl_reduction_t op) {
    const int n = arena.nranks();
    const size_t esize = dtype_size(dtype), chunk = chunk_elems(arena, esize);
    std::vector<const void*> srcs(static_cast<size_t>(n));
    for (size_t off = 0; off < count; off += chunk) {
        size_t c = std::min(chunk, count - off);
        arena.begin_round(sig);
        co_await arena.buffer_free();
        std::memcpy(arena.own_buffer(), static_cast<const char*>(send) + off * esize, c * esize);
        arena.ready();
        co_await arena.all_ready();
        for (int r = 0; r < n; ++r) srcs[size_t(r)] = arena.peer_buffer(r);
        reduce(static_cast<char*>(recv) + off * esize, srcs.data(), n, c, dtype, op, n);
        arena.done();
    }
}

Task allreduce_direct_multi(Arena& arena, uint32_t sig, const std::vector<AllreducePart>& parts) {
    const int n = arena.nranks();
    arena.begin_round(sig);
    co_await arena.buffer_free();
    char* mine = static_cast<char*>(arena.own_buffer());
    size_t off = 0;
    for (const AllreducePart& p : parts) {
        size_t bytes = p.count * dtype_size(p.dtype);
        if (bytes) std::memcpy(mine + off, p.send, bytes);
        off += packed_size(bytes);
    }
    arena.ready();
    co_await arena.all_ready();
    std::vector<const void*> srcs(static_cast<size_t>(n));
    off = 0;
    for (const AllreducePart& p : parts) {
        for (int r = 0; r < n; ++r)
            srcs[size_t(r)] = static_cast<const char*>(arena.peer_buffer(r)) + off;
        reduce(p.recv, srcs.data(), n, p.count, p.dtype, p.op, n);
        off += packed_size(p.count * dtype_size(p.dtype));
    }
    arena.done();
}

Task allreduce_rsag(Arena& arena, uint32_t sig, const void* send, void* recv, size_t count,
                    ccl_datatype_t dtype, ccl_reduction_t op) {
    const int n = arena.nranks(), me = arena.rank();
    const size_t esize = dtype_size(dtype), chunk = chunk_elems(arena, esize);
    const bool stream = count * esize >= kStreamMinBytes;
    std::vector<const void*> srcs(static_cast<size_t>(n));
    for (size_t off = 0; off < count; off += chunk) {
        size_t c = std::min(chunk, count - off);
        auto [lo, hi] = slice(c, esize, me, n);
        // Round 1: inputs in; reduce my slice of everyone's input into my buffer of round 2.
        arena.begin_round(sig);
        co_await arena.buffer_free();
        std::memcpy(arena.own_buffer(), static_cast<const char*>(send) + off * esize, c * esize);
        arena.ready();
        co_await arena.all_ready();
        for (int r = 0; r < n; ++r)
            srcs[size_t(r)] = static_cast<const char*>(arena.peer_buffer(r)) + lo * esize;
        co_await arena.buffer_free(1);
        reduce(static_cast<char*>(arena.own_buffer(1)) + lo * esize, srcs.data(), n, hi - lo, dtype,
               op, n);
        arena.done();
        // Round 2: every reduced slice out.
        arena.begin_round(sig);
        arena.ready();
        co_await arena.all_ready();
        for (int r = 0; r < n; ++r) {
            auto [b, e] = slice(c, esize, r, n);
            copy_out(static_cast<char*>(recv) + (off + b) * esize,
                     static_cast<const char*>(arena.peer_buffer(r)) + b * esize, (e - b) * esize,
                     stream);
        }
        arena.done();
    }
}

}  // namespace ccl::shm
