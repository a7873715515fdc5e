// Point-to-point messages between the co-located ranks of a communicator.
//
// Per ordered pair of ranks (from, to) a channel in the mailbox segment: a ring of descriptors the
// sender posts and the receiver consumes in order (tail). Each descriptor carries its message's
// sequence number, which the receiver waits on, so a small message (up to kInlineBytes inside
// its descriptor, up to kSpanMax in consecutive descriptors) crosses between the cores in the
// descriptors' cache lines; the sender looks at the receiver's tail only when the ring may be
// full. Larger data goes into a data segment the sender owns for that pair: made on first use,
// replaced by one twice as large when the unreceived data no longer fits.
//
// A send never waits for its receiver: what no longer fits where it goes moves on to a larger
// place that the sender makes. The descriptors grow as the data does: when every descriptor but
// one of the ring holds an unreceived piece, that last one links to a ring twice as large, in a
// segment of the sender's own, where the pieces continue (and so on). An outgrown data segment or
// ring is kept until the receiver has passed the piece that moved away from it, then freed.
// Memory is the only bound. The receiver maps a segment by name the first time a descriptor names
// it (a piece in a data segment, a link to a ring), and removes the name at once.
//
// A large message goes in up to four pieces, so a receiver that is already waiting copies one
// piece out while the sender copies the next one in.
//
// Tags: the upper 24 bits of a message's signature are its tag (core's p2p_digest puts it there).
// A receive takes the first message from its peer, or from any peer, that carries its tag; a
// message of another tag ahead of it in the channel is copied out into this rank's memory (the
// stash) for the receive of its own tag. So messages of one tag between two ranks match in the
// order they were sent, whatever other tags do.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/task.h"
#include "shm/arena.h"
#include "shm/segment.h"

namespace ccl::shm {

class Mailbox {
public:
    static constexpr uint32_t kSlots = 128;  // descriptors of a channel's own ring
    // A ring larger than this (2^30 unreceived pieces) would break the sequence numbers' order.
    static constexpr uint32_t kMaxSlots = 1u << 30;
    static constexpr size_t kInlineBytes = 104;  // messages this small travel in the descriptor
    // Larger ones up to kSpanMax span further descriptors, kSpanBytes in each (all but the first
    // 8 bytes), while the ring has the room: the data crosses in the descriptors' own lines, not
    // through the data segment.
    static constexpr size_t kSpanBytes = 120;
    // Four descriptors at most: from five on, the data segment was faster (docs/tuning.md,
    // "Constants of the data path").
    static constexpr size_t kSpanMax = kInlineBytes + 3 * kSpanBytes;  // 464
    // Receives this small may be taken without a coroutine (try_recv): one piece, inline or in
    // the data segment the previous one came through.
    static constexpr size_t kQuickBytes = 16u << 10;
    static constexpr int kAnyPeer = -1;  // a receive's peer: whichever sends a matching message
    static uint32_t tag_of(uint32_t sig) { return sig >> 8; }
    static size_t bytes_needed(int nranks);

    // `seg` holds the channels (zero-filled by its creator); `arena` provides the waits, peer
    // liveness and failure reporting. Data segments are named `prefix` + ".<from>.<to>.<gen>".
    Mailbox(Segment seg, std::string prefix, Arena& arena);
    // Names of data segments and rings holding messages not yet received stay for the receiver,
    // which removes them when it receives, or at its own destruction; their headers name it as
    // the heir, so that no scan takes them for stale while it runs. (A message sent to a rank
    // that has already destroyed the communicator leaves its segment in /dev/shm until a scan
    // finds both gone.) Once the arena
    // has failed (a dead peer, a timeout, an abort) nobody receives any more: every name this rank
    // created goes, and so does the next data segment of each dead peer, which it may have
    // (and ring) created before it could post it.
    ~Mailbox();
    Mailbox(const Mailbox&) = delete;
    Mailbox& operator=(const Mailbox&) = delete;

    Segment& segment() { return seg_; }
    const Segment& segment() const { return seg_; }
    // Wakes whoever sleeps on this communicator's channels (ccl_comm_abort): they re-check the
    // arena and fail. Any thread.
    void wake_all() noexcept;

    // `sig` identifies count and datatype: a receive expecting another fails with
    // CCL_ERROR_INVALID_USAGE (the message is consumed). Sends come from one thread at a time,
    // receives from one thread at a time (which may differ from the sender's). From `cma_min`
    // bytes (shm/cma.h; SIZE_MAX: never), a receive that waits offers its buffer, and a send that
    // finds its receive offered writes straight into it.
    // `peer` of a receive may be kAnyPeer; `source` (may be null) gets the sender's rank.
    Task send(const void* buf, size_t bytes, uint32_t sig, int peer, size_t cma_min);
    Task recv(void* buf, size_t bytes, uint32_t sig, int peer, size_t cma_min,
              int* source = nullptr);
    // A receive at once, without a coroutine, when its message has arrived and matches, in its
    // descriptor or in one piece in the data segment already mapped. False: nothing happened
    // (call recv).
    bool try_recv(void* buf, size_t bytes, uint32_t sig, int peer);
    // The same for a send that goes inline (up to kSpanMax): done at once where the ring has the
    // room (else send makes it). False: nothing happened (call send). Only inline ones: sends
    // through the data segment this way were slower on the 16-core Xeon host (a sendrecv ring, 2
    // ranks, us: 512 B 0.85 against 0.77, 4 KiB 2.01 against 1.91; the AMD VM gained 13 ns at 512
    // B).
    bool try_send(const void* buf, size_t bytes, uint32_t sig, int peer);

private:
    struct Channel;
    struct Desc;
    class AnyPosted;
    struct Stashed {  // a message received ahead of the receive of its tag
        uint32_t sig;
        size_t bytes;
        std::unique_ptr<char[]> data;
    };
    // Where a channel's pieces are announced: the channel's own ring, or a larger one in a segment
    // of the sender's. Piece i is in descriptor i & mask.
    struct Ring {
        Desc* desc = nullptr;
        uint32_t mask = 0;  // slots - 1, a power of two
        Desc& at(uint32_t index) const;
        uint32_t slots() const { return mask + 1; }
    };
    struct Piece {       // a posted message the receiver may not have consumed yet
        uint32_t index;  // of its last piece
        uint32_t gen;
        uint64_t start;
    };
    struct Outbox {              // this rank's side of the channel to one peer
        uint32_t head = 0;       // pieces posted
        uint32_t seen_tail = 0;  // pieces the receiver had consumed when last looked at
        Ring ring;
        Segment ring_seg;         // the ring, once the channel's own was outgrown
        uint32_t ring_gen = 0;    // of ring_seg (0: the channel's own ring)
        uint32_t ring_start = 0;  // the first piece in ring_seg
        Segment data;
        uint32_t gen = 0;
        uint64_t pos = 0;  // where the next piece goes, before wrapping at data.size()
        std::deque<Piece> unreceived;
        // Outgrown data segments and rings, until the receiver has consumed the pieces before the
        // index (the first piece that went elsewhere).
        std::deque<std::pair<Segment, uint32_t>> retired;
    };
    struct Inbox {  // this rank's side of the channel from one peer
        Ring ring;
        Segment ring_seg;
        uint32_t ring_gen = 0;
        Segment data;
        uint32_t gen = 0;
        std::mutex ring_mu;  // ring and ring_seg change under it, for wake_all's look from afar
    };

    Channel& channel(int from, int to) const;
    // An inline message of `bytes` whose first descriptor is `index` of `ring`: written from buf
    // (all but the first descriptor's header and seq), read into buf.
    static void put_inline(const Ring& ring, uint32_t index, const void* buf, size_t bytes);
    static void copy_inline(const Ring& ring, uint32_t index, void* buf, size_t bytes);
    std::string data_name(int from, int to, uint32_t gen) const;
    std::string ring_name(int from, int to, uint32_t gen) const;
    // Where a message of `bytes` would go in the outbox's data segment: nothing if it has no room.
    static std::optional<uint64_t> room(const Outbox& out, size_t bytes);
    // Where a message of `bytes` goes in the outbox to `peer`, moving to a larger data segment if
    // the unreceived ones leave no room (the old one is freed once piece `head` - 1 is received).
    uint64_t place(Outbox& out, int peer, size_t bytes, uint32_t head);
    // Reads the receiver's tail (into seen_tail) and drops what it has taken.
    void forget_received(Outbox& out, const Channel& ch);
    // Whether `need` more descriptors are free: the receiver's tail is read only when the one
    // last seen leaves too few, so its line stays with the receiver.
    static bool ring_room(Outbox& out, const Channel& ch, uint32_t need);
    // Room for `need` pieces in the outbox's ring, and one descriptor beyond: where that would
    // take the last one, it links to a new ring twice as large (the old one is freed once the
    // link is received).
    void make_room(Outbox& out, Channel& ch, int peer, uint32_t need);
    // The receiver's side of a link: maps ring `gen` of `slots` descriptors from `peer`.
    void follow(Inbox& in, int peer, uint64_t slots, uint32_t gen);
    // Receives the next message from `peer` into buf (every piece of it), whatever its tag.
    Task take(void* buf, size_t bytes, uint32_t sig, int peer);
    // A stashed message for this receive (the oldest of its tag from its peer): copied into buf.
    bool take_stashed(void* buf, size_t bytes, uint32_t sig, int peer, int* source);
    [[noreturn]] static void mismatch(size_t bytes, int peer, size_t total);

    Segment seg_;
    std::string prefix_;
    Arena& arena_;
    std::vector<Outbox> out_;
    std::vector<Inbox> in_;
    std::vector<std::deque<Stashed>> stash_;  // per peer, in the order they arrived
    size_t stashed_ = 0;                      // in all of stash_ (receives look at it first)
};

}  // namespace ccl::shm
