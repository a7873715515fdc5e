#include <algorithm>
#include <cstring>
#include <string>

#include "core/error.h"
#include "core/reduce.h"
#include "shm/cma.h"
#include "shm/collectives.h"

namespace ccl::shm {

namespace {

// A rank's buffer: one piece per destination. In the first round each piece starts with a Prefix
// from its sender, so a receiver learns all it needs from the lines it reads for the data anyway
// (a separate header line of counts cost every peer a second miss: 2 ranks, 8 B, 0.2 us).
struct Prefix {
    uint64_t count;     // elements the sender sends to this receiver
    uint64_t largest;   // the sender's largest block, bytes
    const char* block;  // where that block is in the sender's memory (single copy reads it)
    uint64_t digest;    // the sender's share of the count matrix's digest (count_digest)
};

struct Layout {
    // Pieces are whole lines, at least two: the first round's data (after its prefix's line) then
    // moves at least a line per round.
    static constexpr size_t kMinPiece = 128;
    size_t piece;
    static size_t piece_bytes(size_t buffer, int n) {
        size_t room = buffer / size_t(n);
        return room - room % 64;
    }
    Layout(size_t buffer, int n) : piece(piece_bytes(buffer, n)) {
        if (piece < kMinPiece)
            throw Error(CCL_ERROR_UNSUPPORTED, "CCL_SHM_BUFFER_SIZE (" + std::to_string(buffer) +
                                                   " bytes) is too small for an all-to-all among " +
                                                   std::to_string(n) + " ranks (at least " +
                                                   std::to_string(kMinPiece * size_t(n)) + ")");
    }
};

// In the first round a block of at most kBeside bytes follows its prefix in the same line; a
// larger one starts at the next line, so that its copies keep the alignment of the user's buffers
// (a copy whose source and destination are 32 bytes apart ran at half speed).
constexpr size_t kBeside = 64 - sizeof(Prefix);
size_t data_at(size_t round, size_t bytes) {
    return round > 0 ? 0 : bytes <= kBeside ? sizeof(Prefix) : 64;
}

uint64_t mix(uint64_t x) {  // splitmix64's finaliser
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}
uint64_t pair_term(size_t from, size_t to, uint64_t count) {
    return mix(mix(uint64_t(from) << 32 | uint64_t(to)) ^ count);
}

// Rank `me`'s share of a digest of the count matrix: its sends (row) counted in, its receives
// (column) counted out. The shares of all ranks add up to zero when every send matches its
// receive (and to anything else, but for a 2^-64 chance, when one does not), so every rank, which
// sees every share in the first round, reaches the same verdict: all fail alike on a mismatch.
uint64_t count_digest(size_t me, size_t n, const size_t* sendcounts, const size_t* recvcounts) {
    uint64_t d = 0;
    for (size_t r = 0; r < n; ++r)
        d += pair_term(me, r, sendcounts[r]) - pair_term(r, me, recvcounts[r]);
    return d;
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
               const size_t* recvcounts, ccl_datatype_t dtype, size_t cma_min) {
    const int n = arena.nranks(), me = arena.rank();
    const size_t esize = dtype_size(dtype), un = size_t(n), ume = size_t(me);
    const Layout full(arena.buffer_size(), n);
    // The first round goes through a lane when one holds a piece per rank with some data: small
    // exchanges then take one round with nothing to publish after it.
    const bool lane = Layout::piece_bytes(Arena::kLaneBytes, n) >= Layout::kMinPiece;
    const Layout first = lane ? Layout(Arena::kLaneBytes, n) : full;
    const bool single_copy = cma_min != SIZE_MAX;
    const size_t direct_min = single_copy ? std::min(cma_min, full.piece + 1) : SIZE_MAX;
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
    // The first round carries every sender's prefix, and the data too when it fits in one piece or
    // single copy is off. After it every rank knows the largest block and so makes the same
    // choice: done already, single copy, or more rounds of pieces.
    size_t largest = my_largest;
    bool pieces = my_largest < direct_min;
    const uint64_t digest = count_digest(ume, un, sendcounts, recvcounts);
    for (size_t off = 0, round = 0; round == 0 || off < largest; ++round) {
        // What a piece holds of every block this round (the first round's prefix line aside).
        const size_t piece = (round == 0 ? first : full).piece,
                     room = piece - data_at(round, SIZE_MAX);
        // Where rank r's piece for this rank is.
        auto from = [&](size_t r) {
            return static_cast<const char*>(arena.peer_buffer(int(r))) + ume * piece;
        };
        arena.begin_round(sig, round == 0 && lane ? Arena::kLaneBytes : SIZE_MAX);
        co_await arena.buffer_free();
        char* buf = static_cast<char*>(arena.own_buffer());
        for (size_t r = 0; r < un; ++r) {
            if (r == ume) continue;
            char* at = buf + r * piece;
            if (round == 0)
                *reinterpret_cast<Prefix*>(at) = {sendcounts[r], my_largest, in + sdispl[r],
                                                  digest};
            size_t bytes = sdispl[r + 1] - sdispl[r];
            if (pieces && off < bytes)
                std::memcpy(at + data_at(round, bytes), in + sdispl[r] + off,
                            std::min(room, bytes - off));
        }
        arena.ready();
        co_await arena.all_ready();
        if (round == 0) {
            // Every peer's piece for this rank: its prefix, and its data where it has some.
            // Asked for at once, the misses overlap.
            for (size_t r = 0; r < un; ++r)
                if (r != ume) __builtin_prefetch(from(r));
            uint64_t sum = digest;
            for (size_t r = 0; r < un; ++r) {
                if (r == ume) continue;
                const Prefix& p = *reinterpret_cast<const Prefix*>(from(r));
                if (p.count != recvcounts[r])
                    arena.fail(CCL_ERROR_INVALID_USAGE,
                               "alltoallv counts disagree: rank " + std::to_string(r) + " sends " +
                                   std::to_string(p.count) + " elements to rank " +
                                   std::to_string(me) + ", which expects " +
                                   std::to_string(recvcounts[r]));
                largest = std::max<size_t>(largest, p.largest);
                sum += p.digest;
            }
            if (sum != 0)
                arena.fail(
                    CCL_ERROR_INVALID_USAGE,
                    "alltoallv counts disagree: some rank's sendcounts do not match what its "
                    "receiver's recvcounts expect (the ranks concerned name the pair)");
            // My own block never goes through the arena.
            if (in + sdispl[ume] != out + rdispl[ume])
                std::memcpy(out + rdispl[ume], in + sdispl[ume], sdispl[ume + 1] - sdispl[ume]);
            if (largest >= direct_min) {
                for (int i = 1; i < n; ++i) {  // from the next rank on: ranks read different peers
                    size_t r = size_t((me + i) % n);
                    const Prefix& p = *reinterpret_cast<const Prefix*>(from(r));
                    if (size_t bytes = rdispl[r + 1] - rdispl[r])
                        cma_read(arena.peer_pid(int(r)), out + rdispl[r], p.block, bytes);
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
            if (r != ume && off < bytes)
                std::memcpy(out + rdispl[r] + off, from(r) + data_at(round, bytes),
                            std::min(room, bytes - off));
        }
        arena.done();
        pieces = true;
        off += room;
    }
}

}  // namespace ccl::shm
