// Collectives among the co-located ranks of a communicator, over its shared-memory arena. Every
// rank calls the same function with the same count, datatype, reduction, root and signature. Each
// is a coroutine (base/task.h): nothing runs until the task is resumed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "ccl/ccl.h"
#include "shm/arena.h"
#include "shm/copy.h"

namespace ccl::shm {

// A value per rank (a reduction's inputs, block offsets): held in place (in the coroutine's
// frame) up to 17 values, on the heap beyond, so that a small collective allocates nothing.
template <class T>
class PerRank {
public:
    explicit PerRank(size_t n)
        : heap_(n > kInPlace ? n : 0), p_(n > kInPlace ? heap_.data() : in_place_) {}
    PerRank(const PerRank&) = delete;
    PerRank& operator=(const PerRank&) = delete;
    T& operator[](size_t i) { return p_[i]; }
    const T& operator[](size_t i) const { return p_[i]; }
    T* data() { return p_; }
    const T* data() const { return p_; }

private:
    static constexpr size_t kInPlace = 17;  // 16 ranks' offsets and their end
    T in_place_[kInPlace];
    std::vector<T> heap_;
    T* p_;
};

// Single-copy rounds (allreduce_cma, reduce_cma, reduce_scatter_cma, broadcast_cma,
// allgatherv_cma). share_extents puts where this rank's input and output are, and how many bytes of
// each the peers may touch, in its own buffer and says it is ready; once all are, peer_send and
// peer_recv give bytes [at, at + len) of rank r's input and output, after checking that they lie
// within what r declared (else the call fails as a mismatch: ranks that disagree never read or
// write past a buffer). read_peer_parts copies bytes [at, at + len) of each peer's input into this
// rank's scratch pieces (`piece` bytes apart, the next rank first so that ranks read different
// peers) and points srcs at them, srcs[rank] at `mine` + at.
struct Extents {
    const void* send;
    size_t send_bytes;
    void* recv;
    size_t recv_bytes;
};
void share_extents(Arena& arena, const Extents& mine);
const char* peer_send(Arena& arena, int r, size_t at, size_t len);
char* peer_recv(Arena& arena, int r, size_t at, size_t len);
void read_peer_parts(Arena& arena, const void* mine, size_t at, size_t len, char* scratch,
                     size_t piece, PerRank<const void*>& srcs);
// Elements [lo, hi) of every rank's input (this rank's at `send`) reduced into `out` (element lo
// there), read_peer_parts a piece at a time over the rank's team, the second buffer the scratch:
// once share_extents' round is ready everywhere and buffer_free(1).
void reduce_peer_range(Arena& arena, const void* send, char* out, size_t lo, size_t hi,
                       size_t esize, ccl_datatype_t dtype, ccl_reduction_t op);

// Small messages: every rank copies its input in, then reduces all ranks' buffers itself.
// One synchronisation per chunk.
Task allreduce_direct(Arena& arena, Signature sig, const void* send, void* recv, size_t count,
                      ccl_datatype_t dtype, ccl_reduction_t op);

// Several small allreduces at once: every input packed into the buffer, one synchronisation.
// Their description (packed_size(fused_description_bytes)) and the parts' packed sizes
// (packed_size) must fit the arena's buffer. Every rank checks that each peer's parts (count,
// datatype, reduction) are its own: the signature only counts them.
struct AllreducePart {
    const void* send;
    void* recv;
    size_t count;
    ccl_datatype_t dtype;
    ccl_reduction_t op;
};
Task allreduce_direct_multi(Arena& arena, Signature sig, const std::vector<AllreducePart>& parts);
// Bytes a part of `bytes` takes in the buffer (cache-line aligned, so parts never share a line).
inline size_t packed_size(size_t bytes) { return (bytes + 63) / 64 * 64; }
// Bytes the description of n fused parts takes after them.
inline size_t fused_description_bytes(size_t n) { return 16 * n; }

// Large messages: per chunk, every rank reduces one slice of all ranks' inputs (reduce-scatter),
// then copies every slice out (all-gather); all ranks work at once.
Task allreduce_rsag(Arena& arena, Signature sig, const void* send, void* recv, size_t count,
                    ccl_datatype_t dtype, ccl_reduction_t op);

// Large messages, single copy (shm/cma.h): every rank reduces its slice of all ranks' inputs,
// read straight from their memory, into its output; then copies the other slices from their
// owners' outputs. Two synchronisations whatever the size. Needs the arena's buffer size divided
// by (ranks - 1) to be at least 64 bytes.
Task allreduce_cma(Arena& arena, Signature sig, const void* send, void* recv, size_t count,
                   ccl_datatype_t dtype, ccl_reduction_t op);

// The root copies chunks in, the others copy them out; a reader can lag the root by a chunk.
Task broadcast(Arena& arena, Signature sig, void* buf, size_t bytes, int root);
// Two ranks, single copy (shm/cma.h): the root writes one half straight into the other rank's
// buffer while that rank reads the other half straight from the root's.
Task broadcast_cma(Arena& arena, Signature sig, void* buf, size_t bytes, int root);

Task barrier(Arena& arena, Signature sig);

// Reduction to `root` only. Small messages: every rank copies in, the root reduces. Large ones:
// every rank reduces a slice of each chunk, then the root gathers the slices.
Task reduce_direct(Arena& arena, Signature sig, const void* send, void* recv, size_t count,
                   ccl_datatype_t dtype, ccl_reduction_t op, int root);
Task reduce_split(Arena& arena, Signature sig, const void* send, void* recv, size_t count,
                  ccl_datatype_t dtype, ccl_reduction_t op, int root);
// Large messages, single copy (shm/cma.h): every rank reduces its slice of all inputs, read
// straight from their memory, and writes it into the root's output. One synchronisation whatever
// the size; needs the arena's buffer size divided by the ranks to be at least 64 bytes.
Task reduce_cma(Arena& arena, Signature sig, const void* send, void* recv, size_t count,
                ccl_datatype_t dtype, ccl_reduction_t op, int root);

// The blocking forms of the small cases (Step::run): the same rounds as the coroutines above, as
// plain functions that block in their waits, so that a blocking call makes no coroutine frame.
// broadcast, reduce_direct and allreduce_direct of 1 to Arena::kEagerBytes bytes, allgather(v)
// whose largest block is that small, and barrier.
void broadcast_eager(Arena& arena, Signature sig, void* buf, size_t bytes, int root);
void reduce_eager(Arena& arena, Signature sig, const void* send, void* recv, size_t count,
                  ccl_datatype_t dtype, ccl_reduction_t op, int root);
void allreduce_eager(Arena& arena, Signature sig, const void* send, void* recv, size_t count,
                     ccl_datatype_t dtype, ccl_reduction_t op);
void allgatherv_eager(Arena& arena, Signature sig, const void* send, void* recv,
                      const std::vector<size_t>& counts, ccl_datatype_t dtype);
void barrier_now(Arena& arena, Signature sig);

// Rank r contributes counts[r] elements; recv gets every block, packed in rank order. Per round
// every rank copies up to a buffer of its block in and every peer's piece out; where the largest
// block fits an eager slot, one eager round (each rank's block crosses with the news of it).
// `given`: the counts came with the call (an allgatherv; else all are the signature's count):
// every rank then checks each peer's own count (and its choice of an eager round, which follows
// from the counts) against its own counts in the first round.
Task allgatherv(Arena& arena, Signature sig, const void* send, void* recv,
                const std::vector<size_t>& counts, ccl_datatype_t dtype, bool given);

// send holds nranks blocks of `count` elements; recv gets the reduction of block `rank`. Per
// round every rank copies a piece of each peer's block in and reduces its own block's pieces.
Task reduce_scatter(Arena& arena, Signature sig, const void* send, void* recv, size_t count,
                    ccl_datatype_t dtype, ccl_reduction_t op);
// The same single-copy: every rank reads its block of each peer's input straight from the peer's
// memory (a piece at a time, into its scratch) and reduces it into recv: allreduce_cma's first
// round, with the blocks as its slices.
Task reduce_scatter_cma(Arena& arena, Signature sig, const void* send, void* recv, size_t count,
                        ccl_datatype_t dtype, ccl_reduction_t op);

// Block j of send (sendcounts[j] elements) to rank j. In the first round every rank publishes a
// record (in its eager slot where it fits, with the blocks too when they fit beside it): per
// destination the count, and its share of a digest of the whole count matrix, so a receiver checks
// its own column exactly and every rank the whole matrix: all fail alike on a mismatch. If any
// rank's largest block reaches `cma_min` bytes (shm/cma.h; SIZE_MAX: never), or is larger than a
// round's share and single copy is allowed, and is below `cma_max`, every block goes straight from
// sender to receiver; else through the arena, in pieces.
Task alltoallv(Arena& arena, Signature sig, const void* send, const size_t* sendcounts, void* recv,
               const size_t* recvcounts, ccl_datatype_t dtype, size_t cma_min, size_t cma_max);

// alltoall with every block `block` bytes, all of them fitting one lane (n x block <= kLaneBytes):
// one round, every rank's whole send buffer in its lane.
Task alltoall_lane(Arena& arena, Signature sig, const void* send, void* recv, size_t block);

// Single-copy variants (shm/cma.h): every rank publishes its output's extent and writes its
// block straight into every peer's; it returns once every rank is done writing. `given`: as
// allgatherv's.
Task allgatherv_cma(Arena& arena, Signature sig, const void* send, void* recv,
                    const std::vector<size_t>& counts, ccl_datatype_t dtype, bool given);

// Where each of n packed blocks of counts[r] elements starts, in bytes, and (entry n) where they
// end.
inline void byte_offsets(const size_t* counts, size_t n, size_t esize, size_t* at) {
    at[0] = 0;
    for (size_t r = 0; r < n; ++r) at[r + 1] = at[r] + counts[r] * esize;
}
inline std::vector<size_t> byte_offsets(const size_t* counts, size_t n, size_t esize) {
    std::vector<size_t> at(n + 1);
    byte_offsets(counts, n, esize, at.data());
    return at;
}

// Rank r's slice [begin, end) of a chunk of n elements, cut at cache-line boundaries so that no
// two ranks write the same line.
inline std::pair<size_t, size_t> slice(size_t n, size_t esize, int r, int nranks) {
    size_t granule = 64 / esize ? 64 / esize : 1;
    size_t blocks = (n + granule - 1) / granule;
    size_t b0 = blocks * size_t(r) / size_t(nranks), b1 = blocks * size_t(r + 1) / size_t(nranks);
    return {n < b0 * granule ? n : b0 * granule, n < b1 * granule ? n : b1 * granule};
}

// Copies a chunk of c elements into this rank's buffer, at their places, but for its own slice:
// only the peers read the buffer, and this rank reduces its slice from its input directly.
inline void copy_peer_slices(void* buf, const void* chunk, size_t c, size_t esize, int me,
                             int nranks) {
    const auto [lo, hi] = slice(c, esize, me, nranks);
    const Copy around[2] = {{buf, chunk, lo * esize},
                            {static_cast<char*>(buf) + hi * esize,
                             static_cast<const char*>(chunk) + hi * esize, (c - hi) * esize}};
    copy_wide(around, 2);
}

}  // namespace ccl::shm
