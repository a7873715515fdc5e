#include "shm/mailbox.h"

#include <sched.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <optional>
#include <thread>

#include "base/error.h"
#include "base/log.h"
#include "base/wait.h"
#include "shm/cma.h"
#include "shm/copy.h"

namespace ccl::shm {

namespace {

constexpr size_t kMinData = 1u << 20;           // the first data segment of a pair
constexpr size_t kMinPiece = 256u << 10;        // messages up to this go in one piece
constexpr uint64_t kWritten = ~uint64_t(0);     // a descriptor's offset: written into the receive
constexpr uint64_t kInline = ~uint64_t(0) - 1;  // a descriptor's offset: the data is in it
constexpr uint64_t kLink = ~uint64_t(0) - 2;    // a descriptor's offset: the next piece is in a
                                                // new ring (seg.capacity slots, seg.gen)
constexpr size_t kHeadBytes = 24;               // a descriptor's seq, sig, offset and total
constexpr size_t kFirstLineBytes = 40;          // inline data in a descriptor's first line

bool before(uint32_t a, uint32_t b) { return int32_t(a - b) < 0; }

// Descriptors a message of `bytes` takes when it travels inline.
uint32_t span_of(size_t bytes) {
    constexpr size_t first = Mailbox::kInlineBytes, more = Mailbox::kSpanBytes;
    return bytes <= first ? 1 : 1 + uint32_t((bytes - first + more - 1) / more);
}
size_t page_round(size_t n) { return (n + 4095) / 4096 * 4096; }

}  // namespace

struct alignas(64) Mailbox::Desc {
    // Piece i goes in descriptor i of its ring (Ring::at) and is posted when its seq becomes
    // i + 1 (written last; the receiver waits on it).
    std::atomic<uint32_t> seq;
    uint32_t sig;
    uint64_t offset;  // of the piece in data segment `seg.gen` (or kInline, kWritten, kLink)
    uint64_t total;   // of the whole message
    // An inline message's data starts in the first line (40 bytes of it): a message of up to
    // 40 bytes crosses as one line. The rest describes a piece that is not inline.
    union {
        char data[Mailbox::kInlineBytes];
        struct {
            uint64_t bytes;     // of the piece
            uint64_t capacity;  // of data segment `gen` (a link: slots of ring `gen`)
            uint32_t gen;
        } seg;
    };
};

struct alignas(64) Mailbox::Channel {
    std::atomic<uint32_t> head_waiters;    // receivers asleep on a descriptor's seq
    std::atomic<uint32_t> awaiting_offer;  // the sender waits for its receive's offer (see send)
    char pad0[56];
    std::atomic<uint32_t> tail;  // pieces consumed, advanced by the receiver (nobody waits on it)
    // A receive waiting for message `posted_index` (set last) into the receiver's memory, where
    // the sender may write it directly.
    std::atomic<uint32_t> posted_index;
    std::atomic<uint32_t> posted_sig;
    std::atomic<uint64_t> posted_addr;
    std::atomic<uint64_t> posted_bytes;
    char pad1[32];
    Desc ring[kSlots];
};
Mailbox::Desc& Mailbox::Ring::at(uint32_t index) const { return desc[index & mask]; }

// A further descriptor of an inline message holds data after its seq and sig, which stay: a
// receiver waiting on that descriptor for a later message must not see its number in the data.
constexpr size_t kSpanSkip = 8;
static_assert(kSpanSkip + Mailbox::kSpanBytes == 128);

namespace {

// f(desc, offset, at, n) for each run of an inline message's data whose first descriptor is
// `index`: n > 0 bytes at `at` of the message go at `offset` of descriptor `desc`. No run crosses
// a cache line: a copy whose moves straddle two lines, one of them on its way from the other core,
// was much slower (sendrecv ring, us, before -> after: 2-core Xeon VM, 2 ranks, 48 B 0.54 -> 0.49,
// 64 B 0.67 -> 0.50, 100 B 0.67 -> 0.48; 16-core host, 64 B 0.83 -> 0.66 at 2 ranks and 0.94 ->
// 0.64 at 4, 464 B 0.95 -> 0.89 and 1.12 -> 0.96).
template <typename F>
void inline_runs(uint32_t index, size_t bytes, F&& f) {
    size_t at = 0;
    auto run = [&](uint32_t desc, size_t offset, size_t end) {
        const size_t n = std::min(end - offset, bytes - at);
        if (n > 0) f(desc, offset, at, n);
        at += n;
    };
    run(index, kHeadBytes, 64);
    if (at < bytes) run(index, 64, 128);
    while (at < bytes) {
        run(++index, kSpanSkip, 64);
        if (at < bytes) run(index, 64, 128);
    }
}

}  // namespace

void Mailbox::put_inline(const Ring& ring, uint32_t index, const void* buf, size_t bytes) {
    ring.at(index).offset = kInline;
    inline_runs(index, bytes, [&](uint32_t desc, size_t offset, size_t at, size_t n) {
        std::memcpy(reinterpret_cast<char*>(&ring.at(desc)) + offset,
                    static_cast<const char*>(buf) + at, n);
    });
}

void Mailbox::copy_inline(const Ring& ring, uint32_t index, void* buf, size_t bytes) {
    inline_runs(index, bytes, [&](uint32_t desc, size_t offset, size_t at, size_t n) {
        std::memcpy(static_cast<char*>(buf) + at,
                    reinterpret_cast<const char*>(&ring.at(desc)) + offset, n);
    });
}

size_t Mailbox::bytes_needed(int nranks) {
    static_assert(sizeof(Desc) == 128, "a descriptor is two cache lines");
    static_assert(offsetof(Channel, ring) == 128, "the channel's words take two lines");
    static_assert(offsetof(Desc, data) == kHeadBytes && kHeadBytes + kFirstLineBytes == 64,
                  "inline data starts in the first line");
    return page_round(sizeof(Channel) * size_t(nranks) * size_t(nranks));
}

Mailbox::Mailbox(Segment seg, std::string prefix, Arena& arena)
    : seg_(std::move(seg)),
      prefix_(std::move(prefix)),
      arena_(arena),
      out_(size_t(arena.nranks())),
      in_(size_t(arena.nranks())),
      stash_(size_t(arena.nranks())) {
    if (seg_.size() != bytes_needed(arena.nranks()))
        throw Error(CCL_ERROR_INTERNAL, "mailbox segment " + seg_.name() + " has the wrong size");
    const int me = arena.rank();
    for (int peer = 0; peer < arena.nranks(); ++peer) {
        out_[size_t(peer)].ring = {channel(me, peer).ring, kSlots - 1};
        in_[size_t(peer)].ring = {channel(peer, me).ring, kSlots - 1};
    }
}

Mailbox::~Mailbox() {
    const int me = arena_.rank(), n = arena_.nranks();
    const bool failed = arena_.failed() || arena_.peer_failure(nullptr) != CCL_SUCCESS;
    for (int peer = 0; peer < n; ++peer) {
        // Outgoing: keep the names the receiver may still open, unless it never will.
        Outbox& out = out_[size_t(peer)];
        if (!failed) {
            forget_received(out, channel(me, peer));
            const ProcessId heir = arena_.peer_process(peer);  // opens and removes them
            for (const Piece& p : out.unreceived)
                if (p.gen == out.gen) out.data.disown(heir);
            for (auto& [seg, head] : out.retired) seg.disown(heir);  // not all received yet
            if (before(out.seen_tail, out.ring_start)) out.ring_seg.disown(heir);  // nor its link
        }
        // Incoming: remove the names of sent messages this rank never received, following the
        // links to further rings.
        const Channel& in = channel(peer, me);
        uint32_t last_gen = in_[size_t(peer)].gen, last_ring_gen = in_[size_t(peer)].ring_gen;
        Ring ring = in_[size_t(peer)].ring;
        Segment followed;
        for (uint32_t t = in.tail.load(std::memory_order_relaxed);
             ring.at(t).seq.load(std::memory_order_acquire) == t + 1;) {
            const Desc& d = ring.at(t);
            if (d.offset == kInline) {
                t += span_of(d.total);
                continue;
            }
            ++t;
            if (d.offset == kLink) {
                const uint64_t slots = d.seg.capacity;
                const uint32_t gen = last_ring_gen = d.seg.gen;
                const std::string name = ring_name(peer, me, gen);
                Segment next;
                try {
                    if (std::has_single_bit(slots) && slots <= kMaxSlots)
                        next = Segment::open(name, slots * sizeof(Desc), seg_.job());
                } catch (const Error&) {
                }
                Segment::remove(name);
                if (!next.data()) break;
                next.unlink();
                followed = std::move(next);  // (d was in the one it replaces)
                ring = {static_cast<Desc*>(followed.data()), uint32_t(slots - 1)};
                continue;
            }
            last_gen = std::max(last_gen, d.seg.gen);
            if (d.seg.bytes > 0 && d.offset != kWritten)
                Segment::remove(data_name(peer, me, d.seg.gen));
        }
        // A peer killed between creating a data segment or ring and posting into it (or its link)
        // left a name that only this rank can know: the generation after the last it posted.
        if (failed && peer != me) {
            if (arena_.peer_pid(peer) > 0 && !arena_.peer_alive(peer)) {
                Segment::remove(data_name(peer, me, last_gen + 1));
                Segment::remove(ring_name(peer, me, last_ring_gen + 1));
            }
        }
    }
}

void Mailbox::wake_all() noexcept {
    const int n = arena_.nranks();
    for (int from = 0; from < n; ++from)
        for (int to = 0; to < n; ++to) {
            Channel& ch = channel(from, to);
            if (ch.head_waiters.load(std::memory_order_seq_cst) != 0)
                for (Desc& d : ch.ring) futex_wake_all(&d.seq);
        }
    // This rank's receives may sleep in a further ring, on the descriptor at their tail.
    const int me = arena_.rank();
    for (int from = 0; from < n; ++from) {
        Inbox& in = in_[size_t(from)];
        const Channel& ch = channel(from, me);
        std::lock_guard<std::mutex> lock(in.ring_mu);
        if (in.ring_seg.data())
            futex_wake_all(&in.ring.at(ch.tail.load(std::memory_order_acquire)).seq);
    }
}

Mailbox::Channel& Mailbox::channel(int from, int to) const {
    return static_cast<Channel*>(seg_.data())[size_t(from) * size_t(arena_.nranks()) + size_t(to)];
}

std::string Mailbox::data_name(int from, int to, uint32_t gen) const {
    return prefix_ + "." + std::to_string(from) + "." + std::to_string(to) + "." +
           std::to_string(gen);
}

std::string Mailbox::ring_name(int from, int to, uint32_t gen) const {
    return prefix_ + "." + std::to_string(from) + "." + std::to_string(to) + ".r" +
           std::to_string(gen);
}

void Mailbox::forget_received(Outbox& out, const Channel& ch) {
    const uint32_t tail = out.seen_tail = ch.tail.load(std::memory_order_acquire);
    while (!out.unreceived.empty() && before(out.unreceived.front().index, tail))
        out.unreceived.pop_front();
    while (!out.retired.empty() && !before(tail, out.retired.front().second))
        out.retired.pop_front();
}

bool Mailbox::ring_room(Outbox& out, const Channel& ch, uint32_t need) {
    const uint32_t slots = out.ring.slots();
    if (!before(out.seen_tail, out.head + need - slots)) return true;
    out.seen_tail = ch.tail.load(std::memory_order_acquire);
    return !before(out.seen_tail, out.head + need - slots);
}

void Mailbox::make_room(Outbox& out, Channel& ch, int peer, uint32_t need) {
    if (ring_room(out, ch, need + 1)) return;
    // Every descriptor but one holds a piece the receiver has not consumed: that one links to a
    // ring twice as large, where the pieces continue (the unreceived ones, at most all the old
    // ring's, and `need` more fit). It stays the ring of this channel, as an outgrown data
    // segment's successor stays its data segment.
    const uint32_t slots = 2 * out.ring.slots();
    if (slots > kMaxSlots)
        throw Error(CCL_ERROR_OUT_OF_MEMORY,
                    "messages to rank " + std::to_string(peer) + " fill all " +
                        std::to_string(kMaxSlots) +
                        " descriptors of the largest ring a channel may have: receive some");
    const int me = arena_.rank();
    Segment seg =
        Segment::create(ring_name(me, peer, out.ring_gen + 1), slots * sizeof(Desc), seg_.job());
    const Ring next{static_cast<Desc*>(seg.data()), slots - 1};
    // No descriptor may look posted before it is: each starts as if it held the piece a lap
    // before the first it will hold.
    const uint32_t first = out.head + 1;
    for (uint32_t i = first; i != first + slots; ++i)
        next.at(i).seq.store(i + 1 - slots, std::memory_order_relaxed);
    Desc& link = out.ring.at(out.head);
    link.offset = kLink;
    link.sig = 0;
    link.total = 0;
    link.seg = {0, slots, out.ring_gen + 1};
    Arena::publish({&link.seq, &ch.head_waiters, me}, first);
    ++out.ring_gen;
    log().debug("rank {}: mailbox to rank {}: ring {} of {} descriptors", me, peer, out.ring_gen,
                slots);
    if (out.ring_seg.data()) out.retired.emplace_back(std::move(out.ring_seg), first);
    out.ring_seg = std::move(seg);
    out.ring = next;
    out.ring_start = first;
    out.head = first;
}

void Mailbox::follow(Inbox& in, int peer, uint64_t slots, uint32_t gen) {
    if (!std::has_single_bit(slots) || slots <= in.ring.slots() || slots > kMaxSlots)
        throw Error(CCL_ERROR_INTERNAL, "rank " + std::to_string(peer) +
                                            " linked its messages to a ring of " +
                                            std::to_string(slots) + " descriptors");
    const std::string name = ring_name(peer, arena_.rank(), gen);
    Segment seg = Segment::open(name, slots * sizeof(Desc), seg_.job());
    seg.unlink();
    std::lock_guard<std::mutex> lock(in.ring_mu);
    in.ring = {static_cast<Desc*>(seg.data()), uint32_t(slots - 1)};
    in.ring_seg = std::move(seg);  // the old one is done with: every piece in it was consumed
    in.ring_gen = gen;
}

std::optional<uint64_t> Mailbox::room(const Outbox& out, size_t bytes) {
    const size_t cap = out.data.size();
    if (cap == 0) return std::nullopt;
    // Positions count up without wrapping; the room is what the oldest unreceived piece of this
    // segment leaves. With nothing unreceived, start again at the front (it is warm in cache).
    auto oldest = std::find_if(out.unreceived.begin(), out.unreceived.end(),
                               [&](const Piece& p) { return p.gen == out.gen; });
    const uint64_t pos = oldest == out.unreceived.end() ? 0 : out.pos;
    const uint64_t from = oldest == out.unreceived.end() ? 0 : oldest->start;
    const uint64_t skip = pos % cap + bytes > cap ? cap - pos % cap : 0;  // no piece wraps
    if (pos + skip + bytes - from > cap) return std::nullopt;
    return pos + skip;
}

uint64_t Mailbox::place(Outbox& out, int peer, size_t bytes, uint32_t head) {
    if (const auto at = room(out, bytes)) {
        out.pos = *at + bytes;
        return *at % out.data.size();
    }
    if (out.data.size() > 0)
        out.retired.emplace_back(std::move(out.data), head);  // freed once `head` is received
    // Room for two such messages: one unreceived while the next goes in, as in rings and
    // exchanges, without growing again.
    size_t want = std::max({kMinData, 2 * out.data.size(), 2 * page_round(bytes)});
    if (!out.retired.empty()) want = std::max(want, 2 * out.retired.back().first.size());
    ++out.gen;
    log().debug("rank {}: mailbox to rank {}: data segment {} of {} KiB", arena_.rank(), peer,
                out.gen, want >> 10);
    out.data = Segment::create(data_name(arena_.rank(), peer, out.gen), want, seg_.job());
    out.pos = bytes;
    return 0;
}

bool Mailbox::try_send(const void* buf, size_t bytes, uint32_t sig, int peer) {
    if (bytes > kSpanMax) return false;
    const int me = arena_.rank();
    Channel& ch = channel(me, peer);
    Outbox& out = out_[size_t(peer)];
    const uint32_t span = span_of(bytes);
    if (!ring_room(out, ch, span + 1)) return false;  // one more for a link (make_room)
    Desc& d = out.ring.at(out.head);
    put_inline(out.ring, out.head, buf, bytes);
    d.sig = sig;
    d.total = bytes;
    Arena::publish({&d.seq, &ch.head_waiters, me}, out.head + 1);
    out.head += span;
    return true;
}

Task Mailbox::send(const void* buf, size_t bytes, uint32_t sig, int peer, size_t cma_min) {
    if (bytes < cma_min && try_send(buf, bytes, sig, peer)) co_return;
    const int me = arena_.rank();
    Channel& ch = channel(me, peer);
    Outbox& out = out_[size_t(peer)];
    // How the message goes: in its descriptors, straight into the posted receive (single copy),
    // or through the data segment (at `offset`, in pieces).
    uint64_t offset = kInline;
    size_t piece = bytes;
    uint32_t pieces = 1;
    const uint32_t span = bytes <= kSpanMax ? span_of(bytes) : 0;
    bool direct = false;
    if (span == 0) {
        // The receive of this very message is posted: copy once, straight into it. The receiver
        // has consumed everything before it, so a descriptor is free.
        auto offered = [&] {
            return ch.posted_index.load(std::memory_order_acquire) == out.head &&
                   ch.posted_bytes.load(std::memory_order_relaxed) == bytes &&
                   ch.posted_sig.load(std::memory_order_relaxed) == sig;
        };
        direct = bytes >= cma_min && offered();
        if (bytes >= cma_min && !direct) {
            // Its receive is likely moments away (rings, exchanges), also when the receiver has
            // not yet taken the previous message (it offers this one's buffer right after), or is
            // not running (more ranks than cores): worth a wait of about what the extra copy would
            // cost (at 4 GB/s, at most 20 ms). Not waiting makes the sender run a message ahead,
            // and then every later message finds no offer and is copied twice. A peer that waits
            // in turn for this rank's receive (both sending first) will not offer: then the wait
            // would only delay both.
            // Where the copy would need a new data segment, its pages cost more than the copy
            // (on the 2-core VM a first touch of fresh memory ran at 0.37 GB/s, 45 ms for
            // 16 MiB, and the receiver faults them in again): then wait the longest.
            const Channel& back = channel(peer, me);
            ch.awaiting_offer.store(1, std::memory_order_relaxed);
            forget_received(out, ch);
            constexpr size_t kLongest = 20000000;  // ns
            auto until = std::chrono::steady_clock::now() +
                         std::chrono::nanoseconds(room(out, bytes) ? std::min(bytes / 4, kLongest)
                                                                   : kLongest);
            // Where every rank has a core of its own, poll it (a yield is a system call, and the
            // offer then waits for it to return); else lend the core to the receiver.
            const bool own_core = arena_.policy().own_core;
            while (!(direct = offered()) && std::chrono::steady_clock::now() < until &&
                   back.awaiting_offer.load(std::memory_order_relaxed) == 0) {
                if (own_core)
                    for (int k = 0; k < 16; ++k) cpu_relax();
                else
                    sched_yield();
            }
            ch.awaiting_offer.store(0, std::memory_order_relaxed);
        }
        if (direct) {
            cma_write(arena_.peer_process(peer),
                      reinterpret_cast<void*>(ch.posted_addr.load(std::memory_order_relaxed)), buf,
                      bytes);
            offset = kWritten;
        } else {
            piece = std::max(kMinPiece, (bytes + 3) / 4);
            pieces = uint32_t((bytes + piece - 1) / piece);
        }
    }
    // The descriptors first (a link, if it takes one, moves the head), then the data's place:
    // room for the whole message before anything of it is posted, so that a failure here posts
    // nothing of it.
    make_room(out, ch, peer, span ? span : pieces);
    if (span == 0 && !direct) {
        // What the receiver has taken is learnt from its tail, a line it writes at every
        // receive (a cross-core miss): for small messages only when the segment has no room
        // left (they go round it; 2 ranks, 4 KiB ring: 1.56 -> 1.24 us), for larger ones
        // every time (their place then is the front, warm in cache, with nothing unreceived).
        if ((!out.unreceived.empty() || !out.retired.empty()) &&
            (bytes > kQuickBytes || !room(out, bytes)))
            forget_received(out, ch);
        offset = place(out, peer, bytes, out.head);
        out.unreceived.push_back({out.head + pieces - 1, out.gen, out.pos - bytes});
    }
    for (uint32_t i = 0; i < pieces; ++i) {
        Desc& d = out.ring.at(out.head);
        const size_t off = size_t(i) * piece, b = std::min(piece, bytes - off);
        if (offset == kInline) {
            put_inline(out.ring, out.head, buf, bytes);
        } else if (offset == kWritten) {
            d.offset = kWritten;
        } else {
            d.offset = offset + off;
            char* to = static_cast<char*>(out.data.data()) + d.offset;
            std::memcpy(to, static_cast<const char*>(buf) + off, b);
            if (b <= kDemoteMaxBytes) demote(to, b);  // the receiver reads it from another core
        }
        d.sig = sig;
        d.total = bytes;
        if (offset != kInline) d.seg = {b, out.data.size(), out.gen};
        Arena::publish({&d.seq, &ch.head_waiters, me}, out.head + 1);
        out.head += offset == kInline ? span : 1;
    }
    co_return;
}

bool Mailbox::try_recv(void* buf, size_t bytes, uint32_t sig, int peer) {
    if (stashed_ != 0) return false;  // the message may be there (recv looks)
    const int me = arena_.rank();
    Channel& ch = channel(peer, me);
    Inbox& in = in_[size_t(peer)];
    const uint32_t tail = ch.tail.load(std::memory_order_relaxed);  // only this rank advances it
    const Desc& d = in.ring.at(tail);
    if (d.seq.load(std::memory_order_acquire) != tail + 1) {
        // Not there yet: ask for the further lines it will come in, so that their misses overlap
        // the first one's (a prefetch, not a load: the sender may be writing them).
        if (bytes > kFirstLineBytes && bytes <= kSpanMax)
            for (uint32_t i = 0, span = span_of(bytes); i < span; ++i) {
                const char* desc = reinterpret_cast<const char*>(&in.ring.at(tail + i));
                if (i > 0) __builtin_prefetch(desc);
                __builtin_prefetch(desc + 64);
            }
        return false;
    }
    if (d.total != bytes || d.sig != sig || d.offset == kWritten || d.offset == kLink) return false;
    uint32_t span = 1;
    if (d.offset == kInline) {
        copy_inline(in.ring, tail, buf, bytes);
        span = span_of(bytes);
    } else {
        // One piece, in the segment the last one came through (recv maps a new one).
        if (d.seg.bytes != bytes || !in.data.data() || in.gen != d.seg.gen) return false;
        copy_message(buf, static_cast<const char*>(in.data.data()) + d.offset, bytes);
    }
    ch.tail.store(tail + span, std::memory_order_release);
    return true;
}

// Waits until a message from any peer is posted: polls every channel, and checks each peer's
// deadline and liveness as a wait on that peer would (any-source receives are rare: no futex).
class Mailbox::AnyPosted final : public Waiter {
public:
    explicit AnyPosted(Mailbox& box) {
        const int me = box.arena_.rank();
        watches_.reserve(size_t(box.arena_.nranks()));
        for (int p = 0; p < box.arena_.nranks(); ++p) {
            Channel& ch = box.channel(p, me);
            const uint32_t tail = ch.tail.load(std::memory_order_relaxed);
            watches_.emplace_back(
                box.arena_, Arena::Word{&box.in_[size_t(p)].ring.at(tail).seq, &ch.head_waiters, p},
                tail + 1);
        }
    }
    int peer() const { return peer_; }

    bool ready() override {
        for (size_t i = 0; i < watches_.size(); ++i)
            if (watches_[i].ready()) {
                peer_ = int(i);
                return true;
            }
        return false;
    }
    void block() override {
        for (int i = 0; !ready(); ++i) {
            if (i < 64)
                cpu_relax();
            else
                std::this_thread::sleep_for(kNap);
        }
    }
    Sleeper sleeper() override {
        return
            [](std::chrono::microseconds max) { std::this_thread::sleep_for(std::min(max, kNap)); };
    }
    bool await_ready() { return ready(); }
    void await_suspend(Task::Handle h) { h.promise().waiting = this; }
    void await_resume() {}

private:
    static constexpr std::chrono::microseconds kNap{50};
    std::vector<Arena::Watch> watches_;  // one per peer, on the descriptor at its tail
    int peer_ = -1;
};

void Mailbox::mismatch(size_t bytes, int peer, size_t total) {
    throw Error(CCL_ERROR_INVALID_USAGE,
                "a receive of " + std::to_string(bytes) + " bytes from rank " +
                    std::to_string(peer) + " met a send of " + std::to_string(total) +
                    " bytes or of another datatype; a send and its receive must agree on count "
                    "and datatype (the message was dropped)");
}

bool Mailbox::take_stashed(void* buf, size_t bytes, uint32_t sig, int peer, int* source) {
    if (stashed_ == 0) return false;
    const int first = peer == kAnyPeer ? 0 : peer;
    const int last = peer == kAnyPeer ? arena_.nranks() - 1 : peer;
    for (int p = first; p <= last; ++p) {
        auto& q = stash_[size_t(p)];
        auto it = std::find_if(q.begin(), q.end(),
                               [&](const Stashed& m) { return tag_of(m.sig) == tag_of(sig); });
        if (it == q.end()) continue;
        Stashed m = std::move(*it);
        q.erase(it);
        --stashed_;
        if (source) *source = p;
        if (m.bytes != bytes || m.sig != sig) mismatch(bytes, p, m.bytes);
        if (bytes > 0) std::memcpy(buf, m.data.get(), bytes);
        return true;
    }
    return false;
}

Task Mailbox::recv(void* buf, size_t bytes, uint32_t sig, int peer, size_t cma_min, int* source) {
    if (take_stashed(buf, bytes, sig, peer, source)) co_return;
    const int me = arena_.rank();
    for (;;) {
        // The next message of the peer's channel, or of the first channel with one.
        int from = peer;
        if (peer == kAnyPeer) {
            AnyPosted any(*this);
            co_await any;
            from = any.peer();
        }
        Channel& ch = channel(from, me);
        Inbox& in = in_[size_t(from)];
        uint32_t tail = ch.tail.load(std::memory_order_relaxed);  // only this rank advances it
        const Desc& d = in.ring.at(tail);
        if (peer != kAnyPeer) {
            if (bytes >= cma_min && d.seq.load(std::memory_order_acquire) != tail + 1) {
                // Not sent yet: offer the sender this buffer (see send); it writes straight into
                // it only a message of this size and signature, this tag's.
                ch.posted_addr.store(reinterpret_cast<uint64_t>(buf), std::memory_order_relaxed);
                ch.posted_bytes.store(bytes, std::memory_order_relaxed);
                ch.posted_sig.store(sig, std::memory_order_relaxed);
                ch.posted_index.store(tail, std::memory_order_release);
            }
            co_await arena_.watch(
                {const_cast<std::atomic<uint32_t>*>(&d.seq), &ch.head_waiters, from}, tail + 1);
        }
        if (d.offset == kLink) {  // the messages continue in a larger ring
            follow(in, from, d.seg.capacity, d.seg.gen);
            ch.tail.store(++tail, std::memory_order_release);
            continue;
        }
        if (tag_of(d.sig) == tag_of(sig)) {
            Task t = take(buf, bytes, sig, from);
            while (!co_await Nested{t}) {
            }
            if (source) *source = from;
            co_return;
        }
        // Another tag's: kept for the receive of that tag.
        Stashed m{d.sig, d.total, std::unique_ptr<char[]>(new char[std::max<size_t>(d.total, 1)])};
        Task t = take(m.data.get(), m.bytes, m.sig, from);
        while (!co_await Nested{t}) {
        }
        stash_[size_t(from)].push_back(std::move(m));
        ++stashed_;
    }
}

Task Mailbox::take(void* buf, size_t bytes, uint32_t sig, int peer) {
    const int me = arena_.rank();
    Channel& ch = channel(peer, me);
    Inbox& in = in_[size_t(peer)];
    uint32_t tail = ch.tail.load(std::memory_order_relaxed);
    size_t got = 0, total = 0;
    bool match = true, started = false;
    while (!started || got < total) {
        const Desc& d = in.ring.at(tail);
        co_await arena_.watch({const_cast<std::atomic<uint32_t>*>(&d.seq), &ch.head_waiters, peer},
                              tail + 1);
        if (d.offset == kLink) {  // the pieces continue in a larger ring
            follow(in, peer, d.seg.capacity, d.seg.gen);
            ch.tail.store(++tail, std::memory_order_release);
            continue;
        }
        started = true;
        total = d.total;
        match = match && d.total == bytes && d.sig == sig;
        uint32_t span = 1;
        if (d.offset == kWritten) {
            // already in buf
        } else if (d.offset == kInline) {
            if (match) copy_inline(in.ring, tail, static_cast<char*>(buf) + got, d.total);
            span = span_of(d.total);
        } else if (d.seg.bytes > 0) {
            if (!in.data.data() || in.gen != d.seg.gen) {
                // The first piece in a new data segment: every earlier one was received.
                std::string name = data_name(peer, me, d.seg.gen);
                in.data = Segment::open(name, d.seg.capacity, seg_.job());
                in.data.unlink();
                in.gen = d.seg.gen;
            }
            if (match)
                copy_message(static_cast<char*>(buf) + got,
                             static_cast<const char*>(in.data.data()) + d.offset, d.seg.bytes);
        }
        got += d.offset == kInline ? d.total : d.seg.bytes;
        tail += span;
        ch.tail.store(tail, std::memory_order_release);
    }
    if (!match) mismatch(bytes, peer, total);
}

}  // namespace ccl::shm
