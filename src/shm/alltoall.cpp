#include <algorithm>
#include <cstring>
#include <string>

#include "base/error.h"
#include "base/reduce.h"
#include "shm/cma.h"
#include "shm/collectives.h"
#include "shm/copy.h"

namespace ccl::shm {

namespace {

// What a sender tells its receivers in the first round: its share of the count matrix's digest,
// where its send buffer is (single copy reads from there) and its count for every destination
// (4 bytes each where every count fits, else 8; its largest block follows from them); then, when
// they fit (`inlines`), its blocks for its peers, packed in destination order. Each receiver learns
// all it needs from one record per peer: at 2 ranks a record (24 bytes) and a 64 B exchange's
// block share one cache line of an eager slot.
struct Head {
    uint64_t digest;   // its share of the digest (count_digest: even) | 1 if its counts are wide
    const char* base;  // its send buffer
};
size_t record_bytes(size_t n, bool wide) {
    return sizeof(Head) + n * (wide ? sizeof(uint64_t) : sizeof(uint32_t));
}
bool wide_counts(const size_t* counts, size_t n) {
    return std::any_of(counts, counts + n, [](size_t c) { return c > UINT32_MAX; });
}
// Writes a record's counts (after its Head), as Record::count reads them.
void put_counts(char* record, const size_t* counts, size_t n, bool wide) {
    for (size_t r = 0; r < n; ++r) {
        if (wide)
            reinterpret_cast<uint64_t*>(record + sizeof(Head))[r] = counts[r];
        else
            reinterpret_cast<uint32_t*>(record + sizeof(Head))[r] = uint32_t(counts[r]);
    }
}
// A record as its receivers read it.
struct Record {
    const char* p;
    const Head& head() const { return *reinterpret_cast<const Head*>(p); }
    bool wide() const { return head().digest & 1; }
    uint64_t digest() const { return head().digest & ~uint64_t(1); }
    size_t bytes(size_t n) const { return record_bytes(n, wide()); }
    uint64_t count(size_t to) const {
        uint64_t c;
        if (wide()) return std::memcpy(&c, p + sizeof(Head) + to * 8, 8), c;
        uint32_t narrow;
        std::memcpy(&narrow, p + sizeof(Head) + to * 4, 4);
        return narrow;
    }
};
// A record with blocks of up to this many bytes fills the first two lines of an eager slot (its
// data, six lines less the slot's header, less the last four lines). More went faster through the
// lane, beside a record alone: the slot's further lines cost a miss each that the lane's copy
// overlaps (docs/tuning.md, "Constants of the data path").
constexpr size_t kInlineBytes = Arena::kEagerBytes - 4 * 64;
static_assert(kInlineBytes == 112);
// Whether a sender's blocks travel in its record: the sender and its receivers decide alike, from
// what the record says. Blocks that fit are smaller than a first-round piece, so rounds after the
// first never see them.
bool inlines(bool eager, size_t record, size_t to_peers, size_t largest, size_t first_piece) {
    return eager && record + to_peers <= kInlineBytes && largest <= first_piece;
}

// A round's buffer: `reserve` bytes (the first round's record, where it is not in an eager slot),
// then one piece per peer (a rank's own block never goes through the arena), from the writer's
// next rank on.
struct Layout {
    // Pieces are whole lines, at least two: rounds then move at least two lines of every block.
    static constexpr size_t kMinPiece = 128;
    size_t reserve, piece;
    int n;
    static size_t slots(int n) { return size_t(std::max(n - 1, 1)); }  // one per peer
    static size_t piece_bytes(size_t buffer, size_t reserve, int n) {
        size_t room = buffer > reserve ? (buffer - reserve) / slots(n) : 0;
        return room - room % 64;
    }
    Layout(size_t buffer, size_t reserve, int n)
        : reserve(reserve), piece(piece_bytes(buffer, reserve, n)), n(n) {
        if (piece < kMinPiece)
            throw Error(CCL_ERROR_UNSUPPORTED, "CCL_SHM_BUFFER_SIZE (" + std::to_string(buffer) +
                                                   " bytes) is too small for an all-to-all among " +
                                                   std::to_string(n) + " ranks (at least " +
                                                   std::to_string(reserve + kMinPiece * slots(n)) +
                                                   ")");
    }
    // The piece from rank `from` to rank `to` in `from`'s buffer.
    char* at(void* buffer, size_t from, size_t to) const {
        const size_t slot = (to + size_t(n) - from - 1) % size_t(n);
        return static_cast<char*>(buffer) + reserve + slot * piece;
    }
};

// The bytes of a round's buffer that rounds use: those of an exchange piece (copy.h) where that
// leaves every rank a piece, else the whole buffer.
size_t round_bytes(const Arena& arena, size_t reserve, int n) {
    const size_t bytes = std::min(arena.buffer_size(), exchange_piece_bytes());
    return Layout::piece_bytes(bytes, reserve, n) >= Layout::kMinPiece ? bytes
                                                                       : arena.buffer_size();
}

uint64_t mix(uint64_t x) {  // splitmix64's finaliser
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}
// Even, so that shares and their sums are even and a share's lowest bit is free (Head::digest).
// One mix of the count and the pair: the pair times an odd constant is one-to-one, so two counts
// of one pair never mix alike.
uint64_t pair_term(size_t from, size_t to, uint64_t count) {
    return mix(count ^ (uint64_t(from) << 32 | uint64_t(to)) * 0x9e3779b97f4a7c15ull) &
           ~uint64_t(1);
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

Task alltoall_lane(Arena& arena, Signature sig, const void* send, void* recv, size_t block) {
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

Task alltoallv(Arena& arena, Signature sig, const void* send, const size_t* sendcounts, void* recv,
               const size_t* recvcounts, ccl_datatype_t dtype, size_t cma_min, size_t cma_max) {
    const int n = arena.nranks(), me = arena.rank();
    const size_t esize = dtype_size(dtype), un = size_t(n), ume = size_t(me);
    // The first round's records go in eager slots where they fit at any width (up to 45 ranks):
    // each crosses between the cores with the news of it, and small blocks with it (2 ranks, 8 B:
    // one miss per call where a flag and then a lane line took two). Else they head the round's
    // buffer, in room for the widest.
    const bool wide = wide_counts(sendcounts, un);
    const size_t record = record_bytes(un, wide);
    const bool eager = record_bytes(un, true) <= Arena::kEagerBytes;
    const size_t reserve = eager ? 0 : (record_bytes(un, true) + 63) / 64 * 64;
    // The first round goes through a lane when one holds a piece per rank: small exchanges then
    // take one round with nothing to publish after it.
    const bool lane = Layout::piece_bytes(Arena::kLaneBytes, reserve, n) >= Layout::kMinPiece;
    const Layout first(lane ? Arena::kLaneBytes : round_bytes(arena, reserve, n), reserve, n),
        full(round_bytes(arena, 0, n), 0, n);
    const bool single_copy = cma_min != SIZE_MAX;
    const size_t direct_min = single_copy ? std::min(cma_min, full.piece + 1) : SIZE_MAX;
    // Whether a rank whose largest block is `largest` sends single copy: it then leaves its blocks
    // out of the first round, and every rank goes single copy if any does.
    auto sends_direct = [&](size_t largest) { return largest >= direct_min && largest < cma_max; };
    PerRank<size_t> sdispl(un + 1), rdispl(un + 1);
    byte_offsets(sendcounts, un, esize, sdispl.data());
    byte_offsets(recvcounts, un, esize, rdispl.data());
    const char* in = static_cast<const char*>(send);
    char* out = static_cast<char*>(recv);
    size_t my_largest = 0;
    for (size_t r = 0; r < un; ++r) my_largest = std::max(my_largest, sdispl[r + 1] - sdispl[r]);
    // In place, peers reading single-copy would see blocks this rank already overwrote. Only an
    // alltoall runs in place (ccl.h), where every rank's blocks are alike: this rank's choice is
    // every rank's, and through the arena each round copies its pieces in before any out.
    std::vector<char> staged;
    if (in == out && sends_direct(my_largest) && sdispl[un] > 0) {
        staged.assign(in, in + sdispl[un]);
        in = staged.data();
    }
    const size_t to_peers = sdispl[un] - (sdispl[ume + 1] - sdispl[ume]);
    // My own block never goes through the arena: copied while the first round's news crosses
    // between the ranks, or, a large one where threads may copy beside single-copy reads, once
    // the round tells whether they do.
    const bool stream = rdispl[un] >= kStreamMinBytes;
    const size_t own =
        in + sdispl[ume] != out + rdispl[ume] ? sdispl[ume + 1] - sdispl[ume] : size_t(0);
    auto copy_own = [&] {
        copy_wide(out + rdispl[ume], in + sdispl[ume], own, stream_own_block(own, rdispl[un]));
    };
    const bool may_beside = cma_beside_pays(own);
    const uint64_t digest = count_digest(ume, un, sendcounts, recvcounts);
    const bool inlined = inlines(eager, record, to_peers, my_largest, first.piece);

    // The first round: every sender's record, and its data where it fits in a piece (or in the
    // record) and single copy will not take it. After it every rank knows the largest block, so
    // all make the same choice: done already, single copy, or more rounds of pieces.
    arena.begin_round(sig, lane ? Arena::kLaneBytes : SIZE_MAX);
    co_await arena.buffer_free();
    {
        // The pieces first, the record last: readers poll the eager slot's first line, which
        // should move to them once, with the news.
        char* buf = static_cast<char*>(arena.own_buffer());
        for (size_t r = 0; r < un && !inlined && !sends_direct(my_largest); ++r)
            if (const size_t bytes = sdispl[r + 1] - sdispl[r]; r != ume && bytes > 0)
                std::memcpy(first.at(buf, ume, r), in + sdispl[r], std::min(first.piece, bytes));
        char* rec = eager ? static_cast<char*>(arena.own_eager()) : buf;
        *reinterpret_cast<Head*>(rec) = {digest | uint64_t(wide), in};
        put_counts(rec, sendcounts, un, wide);
        char* packed = rec + record;
        for (size_t r = 0; r < un && inlined; ++r) {
            // (No copy of nothing: the buffers of an empty exchange may be null.)
            if (const size_t bytes = sdispl[r + 1] - sdispl[r]; r != ume && bytes > 0) {
                std::memcpy(packed, in + sdispl[r], bytes);
                packed += bytes;
            }
        }
    }
    auto record_of = [&](size_t r) {
        return Record{
            static_cast<const char*>(eager ? arena.peer_eager(int(r)) : arena.peer_buffer(int(r)))};
    };
    if (eager) {
        arena.publish_eager(record + (inlined ? to_peers : 0));
        arena.prefetch_eager();
        if (own > 0 && !may_beside) copy_own();
    } else {
        arena.ready();
        if (own > 0 && !may_beside) copy_own();
        co_await arena.all_ready();
    }
    size_t largest = my_largest;
    bool direct = sends_direct(my_largest);
    PerRank<size_t> largest_of(un);  // each peer's largest block, from its record
    uint64_t sum = digest;
    for (size_t r = 0; r < un; ++r) {
        if (r == ume) continue;
        // Its record, and its blocks if it sends every rank as much as this one.
        if (eager) {
            const size_t narrow = record_bytes(un, false),
                         guess = narrow + (un - 1) * (rdispl[r + 1] - rdispl[r]);
            co_await arena.eager_ready(int(r), guess <= kInlineBytes ? guess : narrow);
        }
        const Record rec = record_of(r);
        if (const uint64_t count = rec.count(ume); count != recvcounts[r])
            arena.fail(CCL_ERROR_INVALID_USAGE,
                       "alltoallv counts disagree: " + arena.rank_name(int(r)) + " sends " +
                           std::to_string(count) + " elements to " + arena.rank_name(me) +
                           ", which expects " + std::to_string(recvcounts[r]));
        uint64_t most = 0;
        for (size_t d = 0; d < un; ++d) most = std::max(most, rec.count(d));
        largest_of[r] = size_t(most) * esize;
        largest = std::max(largest, largest_of[r]);
        direct = direct || sends_direct(largest_of[r]);
        sum += rec.digest();
    }
    if (sum != 0)
        arena.fail(CCL_ERROR_INVALID_USAGE,
                   "alltoallv counts disagree: some rank's sendcounts do not match what its "
                   "receiver's recvcounts expect (the ranks concerned name the pair)");
    // A large own block single copy is copied beside the reads (below).
    const bool beside = direct && may_beside;
    if (own > 0 && may_beside && !beside) copy_own();
    PerRank<CmaRead> reads(direct ? un : 0);  // single-copy blocks, read together below
    size_t nreads = 0;
    for (int i = 1; i < n; ++i) {  // from the next rank on: ranks read different peers
        const size_t r = size_t((me + i) % n), bytes = rdispl[r + 1] - rdispl[r];
        if (bytes == 0) continue;
        const Record rec = record_of(r);
        // Its block for this rank follows its blocks for the ranks before this one: `at` bytes
        // into its send buffer, and (its own block not being packed) `before` into its record.
        size_t at = 0, to_peers = 0;
        for (size_t d = 0; d < un; ++d) {
            const size_t block = rec.count(d) * esize;
            if (d < ume) at += block;
            if (d != r) to_peers += block;
        }
        const size_t before = at - (r < ume ? rec.count(r) * esize : 0);
        if (inlines(eager, rec.bytes(un), to_peers, largest_of[r], first.piece)) {
            std::memcpy(out + rdispl[r], rec.p + rec.bytes(un) + before, bytes);
        } else if (direct) {
            reads[nreads++] = {arena.peer_process(int(r)), out + rdispl[r], rec.head().base + at,
                               bytes};
        } else {
            std::memcpy(out + rdispl[r], first.at(arena.peer_buffer(int(r)), r, ume),
                        std::min(first.piece, bytes));
        }
    }
    if (beside)
        cma_beside([&] { cma_read_all(reads.data(), nreads); }, copy_own);
    else if (nreads > 0)
        cma_read_all(reads.data(), nreads);
    arena.done();
    if (direct) {
        // Until every peer is done, it may still read my send buffer. A lane round need not
        // publish its "done": a round of its own says it.
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
    // The rest of the blocks larger than a first-round piece, a piece of each per round.
    for (size_t off = first.piece; off < largest; off += full.piece) {
        arena.begin_round(sig);
        co_await arena.buffer_free();
        void* buf = arena.own_buffer();
        for (size_t r = 0; r < un; ++r) {
            const size_t bytes = sdispl[r + 1] - sdispl[r];
            if (r != ume && off < bytes)
                copy_wide(full.at(buf, ume, r), in + sdispl[r] + off,
                          std::min(full.piece, bytes - off));
        }
        arena.ready();
        co_await arena.all_ready();
        for (size_t r = 0; r < un; ++r) {
            const size_t bytes = rdispl[r + 1] - rdispl[r];
            if (r != ume && off < bytes)
                copy_wide(out + rdispl[r] + off, full.at(arena.peer_buffer(int(r)), r, ume),
                          std::min(full.piece, bytes - off), stream);
        }
        arena.done();
    }
}

}  // namespace ccl::shm
