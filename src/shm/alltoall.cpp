#include <algorithm>
#include <cstring>
#include <string>

#include "core/error.h"
#include "core/reduce.h"
#include "shm/cma.h"
#include "shm/collectives.h"

namespace ccl::shm {

namespace {

// A rank's buffer: a header (n sendcounts, n recvcounts, the send address; read in the first
// round only), then one piece per destination.
struct Layout {
    size_t header, piece;
    static size_t header_bytes(int n) { return (16 * size_t(n) + 8 + 63) / 64 * 64; }
    static size_t piece_bytes(size_t buffer, int n) {
        size_t room = buffer > header_bytes(n) ? (buffer - header_bytes(n)) / size_t(n) : 0;
        return room >= 64 ? room - room % 64 : room - room % 8;
    }
    Layout(size_t buffer, int n) : header(header_bytes(n)), piece(piece_bytes(buffer, n)) {
        if (piece == 0)
            throw Error(CCL_ERROR_UNSUPPORTED, "CCL_SHM_BUFFER_SIZE (" + std::to_string(buffer) +
                                                   " bytes) is too small for an all-to-all among " +
                                                   std::to_string(n) + " ranks");
    }
};

// After the first round's all_ready: checks every rank's sendcounts against the receivers'
// recvcounts (header of n sendcounts then n recvcounts at the start of every buffer) and returns
// the largest block in bytes. Every rank checks the whole matrix, so all fail alike on a mismatch
// (which breaks the communicator, like any disagreement between ranks). This rank's own counts
// come from its arguments, not its header: the peers are reading that line, and reading it too
// cost as much as a miss (2 ranks, 8 B: 0.15 us of a 0.7 us call).
size_t check_count_matrix(Arena& arena, size_t esize, const size_t* sendcounts,
                          const size_t* recvcounts) {
    const size_t un = size_t(arena.nranks()), me = size_t(arena.rank());
    PerRank<const uint64_t*> header(un);
    for (size_t j = 0; j < un; ++j)
        header[j] = j == me ? nullptr : static_cast<const uint64_t*>(arena.peer_buffer(int(j)));
    size_t largest = 0;
    for (size_t j = 0; j < un; ++j) {
        for (size_t k = 0; k < un; ++k) {
            const uint64_t sends = j == me ? sendcounts[k] : header[j][k];
            const uint64_t expects = k == me ? recvcounts[j] : header[k][un + j];
            if (sends != expects)
                arena.fail(CCL_ERROR_INVALID_USAGE,
                           "alltoallv counts disagree: rank " + std::to_string(j) + " sends " +
                               std::to_string(sends) + " elements to rank " + std::to_string(k) +
                               ", which expects " + std::to_string(expects));
            largest = std::max<size_t>(largest, sends * esize);
        }
    }
    return largest;
}

void write_counts(void* buf, const size_t* sendcounts, const size_t* recvcounts, size_t n) {
    auto* h = static_cast<uint64_t*>(buf);
    for (size_t r = 0; r < n; ++r) {
        h[r] = sendcounts[r];
        h[n + r] = recvcounts[r];
    }
}

// Before the first round's reads: every peer's header (the count check reads them all) and the
// line where the peer's piece for this rank starts (a hint: it may have written none). Asked for
// at once, their cache misses overlap instead of following one another (a small gain: 2 ranks,
// 8-64 B, 0.68-0.71 -> 0.65-0.68 us).
void prefetch_first_round(const Arena& arena, const Layout& layout) {
    const int n = arena.nranks(), me = arena.rank();
    for (int r = 0; r < n; ++r) {
        if (r == me) continue;
        const char* peer = static_cast<const char*>(arena.peer_buffer(r));
        for (size_t at = 0; at < layout.header; at += 64) __builtin_prefetch(peer + at);
        __builtin_prefetch(peer + layout.header + size_t(me) * layout.piece);
    }
}

}  // namespace

Task alltoall_lane(Arena& arena, uint32_t sig, const void* send, void* recv, size_t block) {
    const int n = arena.nranks(), me = arena.rank();
    arena.begin_round(sig, size_t(n) * block);
    co_await arena.buffer_free();
    std::memcpy(arena.own_buffer(), send, size_t(n) * block);
    arena.ready();
    co_await arena.all_ready();
    char* out = static_cast<char*>(recv);
    for (int r = 0; r < n; ++r) {
        const char* from = r == me ? static_cast<const char*>(send)
                                   : static_cast<const char*>(arena.peer_buffer(r));
        if (from + size_t(me) * block != out + size_t(r) * block)
            std::memcpy(out + size_t(r) * block, from + size_t(me) * block, block);
    }
    arena.done();
}

Task alltoallv(Arena& arena, uint32_t sig, const void* send, const size_t* sendcounts, void* recv,
               const size_t* recvcounts, ccl_datatype_t dtype, bool single_copy) {
    const int n = arena.nranks(), me = arena.rank();
    const size_t esize = dtype_size(dtype), un = size_t(n);
    const Layout full(arena.buffer_size(), n);
    // The first round goes through a lane when one holds the header and a piece per rank: small
    // exchanges then take one round with nothing to publish after it.
    const bool lane = Layout::piece_bytes(Arena::kLaneBytes, n) > 0;
    const Layout first = lane ? Layout(Arena::kLaneBytes, n) : full;
    PerRank<size_t> sdispl(un + 1), rdispl(un + 1);
    byte_offsets(sendcounts, un, esize, sdispl.data());
    byte_offsets(recvcounts, un, esize, rdispl.data());
    const char* in = static_cast<const char*>(send);
    char* out = static_cast<char*>(recv);
    // In place, peers reading single-copy would see blocks this rank already overwrote.
    std::vector<char> staged;
    if (single_copy && in == out && sdispl[un] > 0) {
        staged.assign(in, in + sdispl[un]);
        in = staged.data();
    }
    size_t my_largest = 0;
    for (size_t r = 0; r < un; ++r) my_largest = std::max(my_largest, sdispl[r + 1] - sdispl[r]);
    // The first round carries every rank's counts and send address, and the data too when it
    // fits in one piece or single copy is off. After it every rank knows the largest block and
    // so makes the same choice: done already, single copy, or more rounds of pieces.
    size_t largest = 0;
    bool pieces = !single_copy || my_largest <= full.piece;
    for (size_t off = 0, round = 0; round == 0 || off < largest; ++round) {
        const Layout& layout = round == 0 ? first : full;
        arena.begin_round(sig, round == 0 && lane ? Arena::kLaneBytes : SIZE_MAX);
        co_await arena.buffer_free();
        char* buf = static_cast<char*>(arena.own_buffer());
        if (round == 0) {
            write_counts(buf, sendcounts, recvcounts, un);
            *reinterpret_cast<const char**>(buf + 16 * un) = in;
        }
        for (size_t r = 0; r < un && pieces; ++r) {
            size_t bytes = sdispl[r + 1] - sdispl[r];
            if (int(r) != me && off < bytes)
                std::memcpy(buf + layout.header + r * layout.piece, in + sdispl[r] + off,
                            std::min(layout.piece, bytes - off));
        }
        arena.ready();
        co_await arena.all_ready();
        if (round == 0) {
            prefetch_first_round(arena, layout);
            largest = check_count_matrix(arena, esize, sendcounts, recvcounts);
            // My own block never goes through the arena.
            if (in + sdispl[size_t(me)] != out + rdispl[size_t(me)])
                std::memcpy(out + rdispl[size_t(me)], in + sdispl[size_t(me)],
                            sdispl[size_t(me) + 1] - sdispl[size_t(me)]);
            if (single_copy && largest > full.piece) {
                for (int i = 1; i < n; ++i) {  // from the next rank on: ranks read different peers
                    size_t r = size_t((me + i) % n);
                    const char* peer = static_cast<const char*>(arena.peer_buffer(int(r)));
                    auto* counts = reinterpret_cast<const uint64_t*>(peer);
                    size_t from = 0;  // where my block starts in r's send
                    for (int k = 0; k < me; ++k) from += counts[size_t(k)] * esize;
                    const char* base = *reinterpret_cast<const char* const*>(peer + 16 * un);
                    if (size_t bytes = rdispl[r + 1] - rdispl[r])
                        cma_read(arena.peer_pid(int(r)), out + rdispl[r], base + from, bytes);
                }
                arena.done();
                // Until every peer is done, it may still read my send buffer. A lane round
                // publishes no "done": a round of its own says it.
                if (!lane) {
                    co_await arena.all_done();
                    co_return;
                }
                arena.begin_round(sig, 0);
                arena.ready();
                co_await arena.all_ready();
                arena.done();
                co_return;
            }
        }
        for (size_t r = 0; r < un; ++r) {
            size_t bytes = rdispl[r + 1] - rdispl[r];
            if (int(r) != me && off < bytes)
                std::memcpy(out + rdispl[r] + off,
                            static_cast<const char*>(arena.peer_buffer(int(r))) + layout.header +
                                size_t(me) * layout.piece,
                            std::min(layout.piece, bytes - off));
        }
        arena.done();
        pieces = true;
        off += layout.piece;
    }
}

}  // namespace ccl::shm
