#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/reduce.h"
#include "shm/cma.h"
#include "shm/collectives.h"
#include "shm/copy.h"

namespace ccl::shm {

namespace {

// A rank's part of an allgatherv's rounds: its own block's bytes, with this bit where its counts
// took it to one eager round (ranks whose counts differ may decide differently: the others'
// check_count then fails).
constexpr uint64_t kEagerPart = uint64_t(1) << 63;

// Peer r's own count, as it declared it, against counts[r] (see allgatherv's `given`).
void check_count(Arena& arena, int r, uint64_t declared, size_t expected, size_t esize) {
    if (declared != expected)
        arena.fail(CCL_ERROR_INVALID_USAGE,
                   "allgatherv counts disagree: " + arena.rank_name(r) + " contributes " +
                       std::to_string((declared & ~kEagerPart) / esize) + " elements, where " +
                       arena.rank_name(arena.rank()) + " expects " +
                       std::to_string(expected / esize) + " (its recvcounts)");
}

}  // namespace

void allgatherv_eager(Arena& arena, Signature sig, const void* send, void* recv,
                      const std::vector<size_t>& counts, ccl_datatype_t dtype) {
    const int n = arena.nranks(), me = arena.rank();
    const size_t esize = dtype_size(dtype);
    char* out = static_cast<char*>(recv);
    arena.begin_round(sig, *std::max_element(counts.begin(), counts.end()) * esize);
    wait_now(arena.buffer_free());
    arena.publish_eager(send, counts[size_t(me)] * esize);
    arena.prefetch_eager();
    size_t off = 0;
    for (int r = 0; r < n; ++r) {
        const size_t bytes = counts[size_t(r)] * esize;
        if (r != me) {
            wait_now(arena.eager_ready(r));
            check_count(arena, r, arena.peer_eager_bytes(r), bytes, esize);
            std::memcpy(out + off, arena.peer_eager(r), bytes);
        } else if (send != out + off) {
            std::memcpy(out + off, send, bytes);
        }
        off += bytes;
    }
    arena.done();
}

Task allgatherv(Arena& arena, Signature sig, const void* send, void* recv,
                const std::vector<size_t>& counts, ccl_datatype_t dtype, bool given) {
    const int n = arena.nranks(), me = arena.rank();
    const size_t esize = dtype_size(dtype), piece = arena.buffer_size();
    const std::vector<size_t> offset = byte_offsets(counts.data(), size_t(n), esize);
    const size_t largest = *std::max_element(counts.begin(), counts.end()) * esize;
    char* out = static_cast<char*>(recv);
    const char* mine = static_cast<const char*>(send);
    const size_t my_bytes = offset[size_t(me) + 1] - offset[size_t(me)];
    if (largest > 0 && largest <= Arena::kEagerBytes) {  // as allgatherv_eager
        arena.begin_round(sig, largest, my_bytes | kEagerPart);
        co_await arena.buffer_free();
        arena.publish_eager(send, my_bytes);
        arena.prefetch_eager();
        for (int r = 0; r < n; ++r) {
            const size_t at = offset[size_t(r)], bytes = offset[size_t(r) + 1] - at;
            if (r != me) {
                co_await arena.eager_ready(r);
                check_count(arena, r, arena.peer_eager_bytes(r), bytes, esize);
                std::memcpy(out + at, arena.peer_eager(r), bytes);
            } else if (mine != out + at) {
                std::memcpy(out + at, mine, bytes);
            }
        }
        arena.done();
        co_return;
    }
    // Exchange pieces, not whole buffers: this rank also copies its own block out of its piece,
    // while that is still in its cache.
    const size_t step = std::min(piece, exchange_piece_bytes());
    const bool stream = offset.back() >= kStreamMinBytes;
    char* my_out = out + offset[size_t(me)];
    for (size_t off = 0; off < largest; off += step) {
        arena.begin_round(sig, std::min(step, largest - off), my_bytes);
        const size_t mine_now = off < my_bytes ? std::min(step, my_bytes - off) : 0;
        if (mine_now > 0) {
            co_await arena.buffer_free();
            copy_wide(arena.own_buffer(), mine + off, mine_now);
        }
        arena.ready();
        if (mine_now > 0 && mine != my_out)  // while the peers read it
            copy_wide(my_out + off, arena.own_buffer(), mine_now, stream);
        co_await arena.all_ready();
        for (int r = 0; r < n && given && off == 0; ++r)
            if (r != me)
                check_count(arena, r, arena.peer_part(r), offset[size_t(r) + 1] - offset[size_t(r)],
                            esize);
        PerRank<Copy> theirs(n);
        size_t k = 0;
        for (int i = 1; i < n; ++i) {  // from the next rank on, so that ranks read different peers
            const int r = (me + i) % n;
            const size_t bytes = offset[size_t(r) + 1] - offset[size_t(r)];
            if (off < bytes)
                theirs[k++] = {out + offset[size_t(r)] + off, arena.peer_buffer(r),
                               std::min(step, bytes - off)};
        }
        copy_wide(theirs.data(), k, stream);
        arena.done();
    }
}

Task allgatherv_cma(Arena& arena, Signature sig, const void* send, void* recv,
                    const std::vector<size_t>& counts, ccl_datatype_t dtype, bool given) {
    const int n = arena.nranks(), me = arena.rank();
    const size_t esize = dtype_size(dtype);
    const std::vector<size_t> offset = byte_offsets(counts.data(), size_t(n), esize);
    char* out = static_cast<char*>(recv);
    // My own block: copied while my address crosses to the peers and theirs to me, or, a large
    // one, beside the writes; streamed as an all-to-all's own block (stream_own_block): glibc on
    // AMD copies a block larger than the L2 with a vector loop whose stores read every line first
    // (2-core AMD VM, 2 ranks, 16 MiB: 1286 -> 1073 us, Open MPI 1246).
    const size_t at = offset[size_t(me)], mine = offset[size_t(me) + 1] - at;
    const size_t own = send != out + at ? mine : size_t(0);  // in place: already there
    auto copy_own = [&] { copy_wide(out + at, send, own, stream_own_block(own, offset.back())); };
    const bool beside = cma_beside_pays(own);
    arena.begin_round(sig, SIZE_MAX, mine);
    co_await arena.buffer_free();
    share_extents(arena, {nullptr, 0, out, offset.back()});  // where peers write their blocks
    if (own > 0 && !beside) copy_own();
    co_await arena.all_ready();
    for (int r = 0; r < n && given; ++r)
        if (r != me)
            check_count(arena, r, arena.peer_part(r), offset[size_t(r) + 1] - offset[size_t(r)],
                        esize);
    // Each rank writes its block into the peers' outputs rather than reading theirs from their
    // inputs: the pages the kernel pins are then the n - 1 peers' distinct output ranges, not one
    // input pinned by every reader at once, and the lines written stay with the writer between
    // calls (docs/tuning.md, "Constants of the data path").
    auto write_peers = [&] {
        for (int i = 1; i < n && mine > 0; ++i) {  // from the next rank on
            const int r = (me + i) % n;
            cma_write(arena.peer_process(r), peer_recv(arena, r, at, mine), send, mine);
        }
    };
    if (beside)
        cma_beside(write_peers, copy_own);
    else
        write_peers();
    arena.done();
    co_await arena.all_done();  // until then peers may still write into my output
}

}  // namespace ccl::shm
