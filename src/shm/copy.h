// Copies out of the arena into a caller's buffer.
#pragma once

#include <cstddef>

namespace ccl::shm {

// Messages at least this large are copied out with non-temporal stores (see copy_out).
inline constexpr size_t kStreamMinBytes = size_t(8) << 20;

// Whether a reduction's copies out to the caller stream, from what the call touches of the
// caller's memory on each of the node's `ranks` (input and output; once where in place): from
// what kStreamMinBytes of output out of place touches, and only where that, over all ranks, would
// not stay in half the L3 anyway. Else the next call's input (in place: the very lines just
// streamed out) and whoever reads the result read them back from memory: 2 ranks of 8 cpus,
// 16 MiB in place took 1097 us streamed against 782 out of place (docs/tuning.md, "Constants of
// the data path").
bool streams_result(size_t touched, int ranks);

// memcpy (rep movsb from the L2 size on AMD, where glibc would not), or with `stream` a copy whose
// stores bypass the caches: a message far larger than the caches is not read back from them anyway,
// and a normal store first reads each destination line (read for ownership), a third of a copy's
// memory traffic.
void copy_out(void* dst, const void* src, size_t n, bool stream);
// copy_out split over the rank's team (base/team.h) where it is large enough, at cache-line
// multiples: the form the data path calls for its copies in and out of the arena.
void copy_wide(void* dst, const void* src, size_t n, bool stream = false);

// One copy of several (a block from each peer, the pieces around a rank's own slice).
struct Copy {
    void* dst;
    const void* src;
    size_t n;
};
// The copies as one job for the team, cut over their bytes together: one start and one join for
// all of them rather than one each (a job's join waits for its slowest part).
void copy_wide(const Copy* copies, size_t count, bool stream = false);

// Whether a rank's own block of an exchange (allgather, all-to-all), copied from its input to its
// output beside the transfers, streams: where the whole output is kStreamMinBytes or more, or where
// the block alone fills a cache piece (half the L2), so that it and where it goes fill the L2 and
// ordinary stores would read every line from beyond it first.
bool stream_own_block(size_t block, size_t output);

// A message that the peer has just written, out of the data segment of a mailbox: from 2 KiB to
// 16 KiB, sizes that glibc copies with a vector loop, with rep movsb where the cpu has ERMS (2-core
// AMD VM, 2 ranks, 4 KiB sendrecv: 0.380 -> 0.345 us, MPICH 0.345); else memcpy.
void copy_message(void* dst, const void* src, size_t n);

// Asks the cpu to move the cache lines of [p, p + n), just written for a reader on another core,
// from this core's caches out to the shared L3 (CLDEMOTE, a hint; nothing where the cpu lacks it),
// so that the reader's misses are served from there rather than by a snoop into this core each.
// For small messages only (up to kDemoteMaxBytes): larger ones went slower with it
// (docs/tuning.md, "Constants of the data path").
inline constexpr size_t kDemoteMaxBytes = size_t(4) << 10;
void demote(const void* p, size_t n);

// The most a pipelined copy through the arena (a broadcast's, a reduce's) moves per round: half of
// a core's L2 cache, so that a piece and where it goes fit in it together (512 KiB where the size
// is unknown). With pieces of a whole 1 MiB buffer on a core with 1 MiB of L2, a 2 MiB broadcast
// took 3.5x as long.
size_t cache_piece_bytes();

// The same for exchanges, where every rank writes a piece each round and reads the others' (an
// allgather's, an all-to-all's): a quarter of an L2, so that a piece is still in the writer's cache
// when the peers read it, the next one beside it. 2 ranks, 8 MiB blocks: in 1 MiB pieces 2.5 ms on
// the Xeon host, in 512 KiB 1.8; on the AMD VM 1 MiB pieces took twice as long as 128-512 KiB.
inline size_t exchange_piece_bytes() { return cache_piece_bytes() / 2; }

}  // namespace ccl::shm
