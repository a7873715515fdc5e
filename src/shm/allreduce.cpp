#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/reduce.h"
#include "shm/cma.h"
#include "shm/collectives.h"
#include "shm/copy.h"
#include "shm/reduce_peers.h"

namespace ccl::shm {

namespace {

// Elements per chunk: a whole buffer's worth.
size_t chunk_elems(const Arena& arena, size_t esize) { return arena.buffer_size() / esize; }

// A reduction into `out`, then a copy of it to `copy_to`, both split over the team in the same
// parts: each part's copy reads what its own thread has just written.
void reduce_and_copy(void* out, void* copy_to, const void* const* srcs, int n, size_t count,
                     ccl_datatype_t dtype, ccl_reduction_t op, bool stream) {
    const size_t esize = dtype_size(dtype);
    team_for(count, esize, 64 / esize, [&](size_t b, size_t e) {
        reduce_range(out, srcs, n, b, e, dtype, op, n);
        copy_out(static_cast<char*>(copy_to) + b * esize, static_cast<const char*>(out) + b * esize,
                 (e - b) * esize, stream);
    });
}

}  // namespace

void allreduce_eager(Arena& arena, Signature sig, const void* send, void* recv, size_t count,
                     ccl_datatype_t dtype, ccl_reduction_t op) {
    const int n = arena.nranks(), me = arena.rank();
    const size_t bytes = count * dtype_size(dtype);
    arena.begin_round(sig, bytes);
    wait_now(arena.buffer_free());
    arena.publish_eager(send, bytes);
    arena.prefetch_eager();
    for (int r = 0; r < n; ++r)
        if (r != me) wait_now(arena.eager_ready(r));
    PerRank<const void*> srcs(n);  // here, not live across the waits: fewer spills
    reduce_eager_slots(arena, srcs, send, recv, count, dtype, op);
    arena.done();
}

Task allreduce_direct(Arena& arena, Signature sig, const void* send, void* recv, size_t count,
                      ccl_datatype_t dtype, ccl_reduction_t op) {
    const int n = arena.nranks(), me = arena.rank();
    const size_t esize = dtype_size(dtype), chunk = chunk_elems(arena, esize);
    PerRank<const void*> srcs(n);
    if (count > 0 && count * esize <= Arena::kEagerBytes) {  // as allreduce_eager
        arena.begin_round(sig, count * esize);
        co_await arena.buffer_free();
        arena.publish_eager(send, count * esize);
        arena.prefetch_eager();
        for (int r = 0; r < n; ++r)
            if (r != me) co_await arena.eager_ready(r);
        reduce_eager_slots(arena, srcs, send, recv, count, dtype, op);
        arena.done();
        co_return;
    }
    for (size_t off = 0; off < count; off += chunk) {
        size_t c = std::min(chunk, count - off);
        const char* in = static_cast<const char*>(send) + off * esize;
        arena.begin_round(sig, c * esize);
        co_await arena.buffer_free();
        copy_wide(arena.own_buffer(), in, c * esize);
        arena.ready();
        co_await arena.all_ready();
        // My part from my input: not my line the peers read.
        point_at_buffers(arena, 0, in, srcs);
        reduce_wide(static_cast<char*>(recv) + off * esize, srcs.data(), n, c, dtype, op, n);
        arena.done();
    }
}

Task allreduce_direct_multi(Arena& arena, Signature sig, const std::vector<AllreducePart>& parts) {
    const int n = arena.nranks(), me = arena.rank();
    arena.begin_round(sig);
    co_await arena.buffer_free();
    // The parts' description first, where every peer finds it whatever its parts' sizes, and
    // compares it with its own; then the parts.
    char* mine = static_cast<char*>(arena.own_buffer());
    const size_t described = fused_description_bytes(parts.size());
    for (size_t i = 0; i < parts.size(); ++i) {
        const uint64_t d[2] = {parts[i].count,
                               uint64_t(parts[i].dtype) << 32 | uint32_t(parts[i].op)};
        std::memcpy(mine + 16 * i, d, sizeof d);
    }
    size_t off = packed_size(described);
    for (const AllreducePart& p : parts) {
        size_t bytes = p.count * dtype_size(p.dtype);
        if (bytes) std::memcpy(mine + off, p.send, bytes);
        off += packed_size(bytes);
    }
    arena.ready();
    co_await arena.all_ready();
    for (int r = 0; r < n; ++r)
        if (r != me && std::memcmp(arena.peer_buffer(r), mine, described) != 0)
            arena.fail(CCL_ERROR_INVALID_USAGE,
                       "collective mismatch in a group: " + arena.rank_name(r) +
                           "'s allreduces differ from " + arena.rank_name(me) +
                           "'s in count, datatype or reduction; every rank must make the same "
                           "calls in the same order");
    PerRank<const void*> srcs(n);
    off = packed_size(described);
    for (const AllreducePart& p : parts) {
        point_at_buffers(arena, off, mine + off, srcs);
        reduce(p.recv, srcs.data(), n, p.count, p.dtype, p.op, n);
        off += packed_size(p.count * dtype_size(p.dtype));
    }
    arena.done();
}

Task allreduce_rsag(Arena& arena, Signature sig, const void* send, void* recv, size_t count,
                    ccl_datatype_t dtype, ccl_reduction_t op) {
    const int n = arena.nranks(), me = arena.rank();
    const size_t esize = dtype_size(dtype), chunk = chunk_elems(arena, esize);
    const bool stream = streams_result((send == recv ? 1 : 2) * count * esize, n);
    PerRank<const void*> srcs(n);
    for (size_t off = 0; off < count; off += chunk) {
        size_t c = std::min(chunk, count - off);
        auto [lo, hi] = slice(c, esize, me, n);
        // Round 1: inputs in; reduce my slice of everyone's input into my buffer of round 2.
        const char* in = static_cast<const char*>(send) + off * esize;
        arena.begin_round(sig);
        co_await arena.buffer_free();
        copy_peer_slices(arena.own_buffer(), in, c, esize, me, n);
        arena.ready();
        co_await arena.all_ready();
        co_await arena.buffer_free(1);
        char* reduced = static_cast<char*>(arena.own_buffer(1)) + lo * esize;
        point_at_buffers(arena, lo * esize, in + lo * esize, srcs);
        char* own_out = static_cast<char*>(recv) + (off + lo) * esize;
        // My own slice out now, each part by the thread that reduced it, from its cache, before
        // the peers read it.
        reduce_and_copy(reduced, own_out, srcs.data(), n, hi - lo, dtype, op, stream);
        arena.done();
        // Round 2: every other reduced slice out.
        arena.begin_round(sig);
        arena.ready();
        co_await arena.all_ready();
        PerRank<Copy> theirs(n);
        size_t k = 0;
        for (int r = 0; r < n; ++r) {
            if (r == me) continue;
            auto [b, e] = slice(c, esize, r, n);
            theirs[k++] =
                Copy{static_cast<char*>(recv) + (off + b) * esize,
                     static_cast<const char*>(arena.peer_buffer(r)) + b * esize, (e - b) * esize};
        }
        copy_wide(theirs.data(), k, stream);
        arena.done();
    }
}

void share_extents(Arena& arena, const Extents& mine) {
    *static_cast<Extents*>(arena.own_buffer()) = mine;
    arena.ready();
}

namespace {

// Bytes [at, at + len) of a region of `size` bytes at `base` in peer r, or a mismatch.
char* within(Arena& arena, int r, const void* base, size_t size, size_t at, size_t len,
             const char* what) {
    if (at > size || len > size - at)
        arena.fail(CCL_ERROR_INVALID_USAGE,
                   "collective mismatch: a single-copy transfer of bytes [" + std::to_string(at) +
                       ", " + std::to_string(at + len) + ") of " + arena.rank_name(r) + "'s " +
                       what + " buffer, which it declared " + std::to_string(size) +
                       " bytes long: the ranks disagree on the call");
    return static_cast<char*>(const_cast<void*>(base)) + at;
}

const Extents& extents_of(const Arena& arena, int r) {
    return *static_cast<const Extents*>(arena.peer_buffer(r));
}

}  // namespace

const char* peer_send(Arena& arena, int r, size_t at, size_t len) {
    const Extents& e = extents_of(arena, r);
    return within(arena, r, e.send, e.send_bytes, at, len, "send");
}

char* peer_recv(Arena& arena, int r, size_t at, size_t len) {
    const Extents& e = extents_of(arena, r);
    return within(arena, r, e.recv, e.recv_bytes, at, len, "receive");
}

void read_peer_parts(Arena& arena, const void* mine, size_t at, size_t len, char* scratch,
                     size_t piece, PerRank<const void*>& srcs) {
    const int n = arena.nranks(), me = arena.rank();
    for (int i = 1; i < n; ++i) {
        const int r = (me + i) % n;
        char* into = scratch + size_t(i - 1) * piece;
        cma_read(arena.peer_process(r), into, peer_send(arena, r, at, len), len);
        srcs[size_t(r)] = into;
    }
    srcs[size_t(me)] = static_cast<const char*>(mine) + at;
}

void reduce_peer_range(Arena& arena, const void* send, char* out, size_t lo, size_t hi,
                       size_t esize, ccl_datatype_t dtype, ccl_reduction_t op) {
    const int n = arena.nranks();
    // In parts over the rank's team, each reading a piece of every peer's part at a time into
    // its share of the second buffer.
    split_over_scratch(
        static_cast<char*>(arena.own_buffer(1)), arena.buffer_size(), size_t(std::max(n - 1, 1)),
        lo, hi, esize, [&](char* pieces, size_t piece, size_t begin, size_t end) {
            PerRank<const void*> srcs(n);
            for (size_t at = begin; at < end; at += piece) {
                const size_t len = std::min(piece, end - at);
                read_peer_parts(arena, send, at, len, pieces, piece, srcs);
                // In rank order, as rsag.
                reduce(out + (at - lo * esize), srcs.data(), n, len / esize, dtype, op, n);
            }
        });
}

Task allreduce_cma(Arena& arena, Signature sig, const void* send, void* recv, size_t count,
                   ccl_datatype_t dtype, ccl_reduction_t op) {
    const int n = arena.nranks(), me = arena.rank();
    const size_t esize = dtype_size(dtype);
    const auto [lo, hi] = slice(count, esize, me, n);
    // Round 1: every rank publishes where its input and output are, then reduces its slice of
    // all inputs, reading the peers' parts straight from their memory (a piece of each at a
    // time, into this rank's second buffer) and writing straight into its own output.
    arena.begin_round(sig);
    co_await arena.buffer_free();
    share_extents(arena, {send, count * esize, recv, count * esize});
    co_await arena.all_ready();
    // Round 2 reads the peers' outputs: their extents, kept from round 1's buffer.
    PerRank<Extents> theirs(n);
    for (int r = 0; r < n; ++r) theirs[r] = *static_cast<const Extents*>(arena.peer_buffer(r));
    co_await arena.buffer_free(1);
    char* out = static_cast<char*>(recv);
    reduce_peer_range(arena, send, out + lo * esize, lo, hi, esize, dtype, op);
    arena.done();
    // Round 2: once every slice is reduced (no one reads an input any more), every rank copies
    // the other slices from their owners' outputs, and waits until no one reads its own.
    arena.begin_round(sig);
    arena.ready();
    co_await arena.all_ready();
    for (int i = 1; i < n; ++i) {
        const int r = (me + i) % n;
        const auto [b, e] = slice(count, esize, r, n);
        if (e > b)
            cma_read(arena.peer_process(r), out + b * esize,
                     within(arena, r, theirs[size_t(r)].recv, theirs[size_t(r)].recv_bytes,
                            b * esize, (e - b) * esize, "receive"),
                     (e - b) * esize);
    }
    arena.done();
    co_await arena.all_done();
}

}  // namespace ccl::shm
