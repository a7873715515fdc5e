#include <algorithm>
#include <cstring>
#include <vector>

#include "base/reduce.h"
#include "shm/cma.h"
#include "shm/collectives.h"
#include "shm/copy.h"
#include "shm/reduce_peers.h"

namespace ccl::shm {

namespace {

// The root's end of an eager round, once every peer's slot carries it. The others run ahead of
// the root: their slots of the next round load meanwhile.
inline void root_reduce_eager(const Arena& arena, PerRank<const void*>& srcs, const void* send,
                              void* recv, size_t count, ccl_datatype_t dtype, ccl_reduction_t op) {
    reduce_eager_slots(arena, srcs, send, recv, count, dtype, op);
    for (int r = 0; r < arena.nranks(); ++r)
        if (r != arena.rank()) arena.prefetch_next_eager(r);
}

}  // namespace

void reduce_eager(Arena& arena, Signature sig, const void* send, void* recv, size_t count,
                  ccl_datatype_t dtype, ccl_reduction_t op, int root) {
    const int n = arena.nranks();
    const size_t bytes = count * dtype_size(dtype);
    arena.begin_round(sig, bytes);
    if (arena.rank() != root) {
        wait_now(arena.buffer_free());
        arena.publish_eager(send, bytes);
    } else {
        PerRank<const void*> srcs(n);
        arena.prefetch_eager();
        for (int r = 0; r < n; ++r)
            if (r != root) wait_now(arena.eager_ready(r));
        root_reduce_eager(arena, srcs, send, recv, count, dtype, op);
    }
    arena.done();
}

Task reduce_direct(Arena& arena, Signature sig, const void* send, void* recv, size_t count,
                   ccl_datatype_t dtype, ccl_reduction_t op, int root) {
    const int n = arena.nranks();
    const size_t esize = dtype_size(dtype),
                 chunk = std::min(arena.buffer_size(), cache_piece_bytes()) / esize;
    PerRank<const void*> srcs(n);
    if (count > 0 && count * esize <= Arena::kEagerBytes) {  // as reduce_eager
        arena.begin_round(sig, count * esize);
        if (arena.rank() != root) {
            co_await arena.buffer_free();
            arena.publish_eager(send, count * esize);
        } else {
            arena.prefetch_eager();
            for (int r = 0; r < n; ++r)
                if (r != root) co_await arena.eager_ready(r);
            root_reduce_eager(arena, srcs, send, recv, count, dtype, op);
        }
        arena.done();
        co_return;
    }
    for (size_t off = 0; off < count; off += chunk) {
        size_t c = std::min(chunk, count - off);
        const char* in = static_cast<const char*>(send) + off * esize;
        arena.begin_round(sig, c * esize);
        if (arena.rank() != root) {
            co_await arena.buffer_free();
            copy_wide(arena.own_buffer(), in, c * esize);
            arena.done();  // nothing to read: ready and done at once
            continue;
        }
        // The root's input never goes through the arena: nobody else reads it.
        arena.ready();
        co_await arena.all_ready();
        point_at_buffers(arena, 0, in, srcs);
        reduce_wide(static_cast<char*>(recv) + off * esize, srcs.data(), n, c, dtype, op, n);
        arena.done();
    }
}

Task reduce_split(Arena& arena, Signature sig, const void* send, void* recv, size_t count,
                  ccl_datatype_t dtype, ccl_reduction_t op, int root) {
    const int n = arena.nranks(), me = arena.rank();
    const size_t esize = dtype_size(dtype),
                 chunk = std::min(arena.buffer_size(), cache_piece_bytes()) / esize;
    PerRank<const void*> srcs(n);
    for (size_t off = 0; off < count; off += chunk) {
        size_t c = std::min(chunk, count - off);
        auto [lo, hi] = slice(c, esize, me, n);
        // Round 1: inputs in; every rank reduces its slice into its buffer of round 2 (as
        // allreduce_rsag's round 1).
        const char* in = static_cast<const char*>(send) + off * esize;
        arena.begin_round(sig);
        co_await arena.buffer_free();
        copy_peer_slices(arena.own_buffer(), in, c, esize, me, n);
        arena.ready();
        co_await arena.all_ready();
        // The root's slice goes straight out: nobody else reads it.
        char* out = static_cast<char*>(recv) + (off + lo) * esize;
        if (me != root) {
            co_await arena.buffer_free(1);
            out = static_cast<char*>(arena.own_buffer(1)) + lo * esize;
        }
        point_at_buffers(arena, lo * esize, in + lo * esize, srcs);
        reduce_wide(out, srcs.data(), n, hi - lo, dtype, op, n);
        arena.done();
        // Round 2: the root gathers the reduced slices.
        arena.begin_round(sig);
        if (me != root) {
            arena.done();
            continue;
        }
        arena.ready();
        co_await arena.all_ready();
        PerRank<Copy> theirs(n);
        size_t k = 0;
        for (int r = 0; r < n; ++r) {
            if (r == root) continue;
            auto [b, e] = slice(c, esize, r, n);
            theirs[k++] = {static_cast<char*>(recv) + (off + b) * esize,
                           static_cast<const char*>(arena.peer_buffer(r)) + b * esize,
                           (e - b) * esize};
        }
        copy_wide(theirs.data(), k);
        arena.done();
    }
}

Task reduce_cma(Arena& arena, Signature sig, const void* send, void* recv, size_t count,
                ccl_datatype_t dtype, ccl_reduction_t op, int root) {
    const int n = arena.nranks(), me = arena.rank();
    const size_t esize = dtype_size(dtype);
    const auto [lo, hi] = slice(count, esize, me, n);
    // One round: every rank publishes where its input is (the root also its output), reduces its
    // slice of all inputs, reading the peers' parts straight from their memory, and writes the
    // result into the root's output: straight there on the root, through a scratch piece and one
    // system call elsewhere.
    arena.begin_round(sig);
    co_await arena.buffer_free();
    share_extents(arena, {send, count * esize, recv, me == root ? count * esize : 0});
    co_await arena.all_ready();
    co_await arena.buffer_free(1);
    // The slice in parts over the rank's team; in each part's share of the second buffer, n - 1
    // pieces for the peers' parts and, off the root, one for the result.
    split_over_scratch(static_cast<char*>(arena.own_buffer(1)), arena.buffer_size(), size_t(n), lo,
                       hi, esize, [&](char* pieces, size_t piece, size_t begin, size_t end) {
                           char* result = pieces + size_t(n - 1) * piece;
                           PerRank<const void*> srcs(n);
                           for (size_t at = begin; at < end; at += piece) {
                               const size_t len = std::min(piece, end - at);
                               read_peer_parts(arena, send, at, len, pieces, piece, srcs);
                               if (me == root) {
                                   reduce(static_cast<char*>(recv) + at, srcs.data(), n,
                                          len / esize, dtype, op, n);
                               } else {
                                   reduce(result, srcs.data(), n, len / esize, dtype, op, n);
                                   cma_write(arena.peer_process(root),
                                             peer_recv(arena, root, at, len), result, len);
                               }
                           }
                       });
    arena.done();
    // Until every rank is done, peers may still read this rank's input, and the root's output
    // is not complete.
    co_await arena.all_done();
}

}  // namespace ccl::shm
