// The shared-memory arena of a communicator's co-located ranks: per-rank flags and, per rank, two
// data buffers used alternately by successive rounds, plus kLanes small ones used in turn by
// rounds of small messages.
//
// The round protocol. Every collective runs as a sequence of rounds that all ranks go through
// alike (same number, same order). In round e a rank uses buffer half e % 2 of its slot, and its
// flag reads 2e-1 once its data for round e is in place ("ready") and 2e once it no longer touches
// the arena for round e ("done"). A rank writes its half for round e only after every rank is done
// with round e-2, which used the same half; so no call ever needs a trailing barrier, and a rank
// may run ahead of slow readers by a round. Flags only grow, which makes every wait a simple
// "flag >= target" (modulo 2^32).
//
// A round whose data fits kLaneBytes uses lane e % kLanes instead, free once every rank is done
// with round e - kLanes: a rank that only writes (a broadcast's root, a reduce's non-roots)
// finishes up to kLanes small rounds ahead of its slowest reader, the way an eager FIFO lets MPI's
// senders run ahead, which matters most when ranks outnumber cores: there every switch between a
// core's ranks costs microseconds, and with 64 lanes a writer stops for its readers a quarter as
// often as with 16 (broadcast of 8 B, 4 and 8 ranks on 2 cores: 1.0 -> 0.33 and 3.5 -> 1.1 us).
//
// A round whose data fits kEagerBytes (a small broadcast, reduce or allreduce) may instead publish
// it in an eager slot: the round, its size and the signature's tag, then the data, in up to six
// cache lines that the readers wait on, so that the data crosses between the cores with the news
// of it (one cache miss where the flag and then the lane cost two: the first line carries the
// round and 48 bytes, and a reader pulls the slot's further lines while it polls the first, so
// their misses overlap). Eager slots are used like the lanes (slot e % kLanes); every rank still
// publishes its flag (done) at the end of the round, and earlier if a wait drags on (see
// EagerWatch), for a peer that disagrees on the collective and waits on it.
//
// Algorithms are coroutines (base/task.h): they co_await the waiters below, which a blocking call
// resolves by spinning, yielding and then sleeping on a futex, and a progress worker by polling.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "base/task.h"
#include "ccl/ccl.h"
#include "shm/segment.h"
#include "shm/wait.h"

namespace ccl::shm {

// What a round says of the call it belongs to, which every peer that reads the round compares
// with its own, exactly: ranks that disagree on a call fail with a mismatch, never compute on
// each other's data. `what` packs everything but the count (core's CollSignature::round says how),
// `count` is the call's count. The tag stands for both in one word, which a peer reads beside the
// round's flag: while they fit (what < 2^34, count < 2^29) the tag is the two side by side, so
// that equal tags are equal signatures; else it is a mix with its top bit set, and whoever
// compares such a tag compares the whole signatures as well.
class Signature {
public:
    static constexpr int kWhatBits = 34, kCountBits = 29;
    constexpr Signature() = default;
    constexpr explicit Signature(uint64_t what, uint64_t count = 0)
        : what_(what), count_(count), tag_(make_tag(what, count)) {}
    constexpr uint64_t what() const { return what_; }
    constexpr uint64_t count() const { return count_; }
    constexpr uint64_t tag() const { return tag_; }
    constexpr bool exact() const { return !(tag_ >> 63); }  // the tag alone decides
    constexpr bool operator==(const Signature& o) const {
        return what_ == o.what_ && count_ == o.count_;
    }

private:
    static constexpr uint64_t mix(uint64_t x) {  // splitmix64's finaliser
        x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
        x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
        return x ^ (x >> 31);
    }
    static constexpr uint64_t make_tag(uint64_t what, uint64_t count) {
        if (what >> kWhatBits == 0 && count >> kCountBits == 0) return what << kCountBits | count;
        return uint64_t(1) << 63 | mix(what ^ mix(count)) >> 1;
    }
    uint64_t what_ = 0, count_ = 0, tag_ = 0;
};
// Describes a signature for a mismatch's message (core knows what `what` packs).
using DescribeSignature = std::string (*)(const Signature&);

class Arena {
public:
    class Flags;

    static constexpr int kLanes = 64;
    static constexpr size_t kLaneBytes = 8192;
    static constexpr size_t kEagerBytes = 368;  // an eager slot's data: 6 lines less a header
    static size_t bytes_needed(int nranks, size_t buffer_size);

    // Attaches to `seg`; `init` is true for the rank that created it (it lays out the header).
    // Records this process (pid and start time) for peer-liveness checks. `policy`: how its waits
    // wait (wait.h); `describe`: how a mismatch's message shows the signatures (null: in hex).
    Arena(Segment seg, int nranks, int rank, size_t buffer_size, double timeout_s, bool init,
          WaitPolicy policy, DescribeSignature describe = nullptr);
    Arena(const Arena&) = delete;
    Arena& operator=(const Arena&) = delete;

    int rank() const { return rank_; }
    int nranks() const { return nranks_; }
    // Rank r as messages name it: its rank in the communicator (set_comm_ranks; else r).
    std::string rank_name(int r) const {
        return "rank " + std::to_string(comm_ranks_.empty() ? r : comm_ranks_[size_t(r)]);
    }
    // The communicator's ranks of the arena's ranks, where they differ (a node of a communicator
    // across nodes).
    void set_comm_ranks(std::vector<int> ranks) { comm_ranks_ = std::move(ranks); }
    // How its waits spin, yield and sleep (shm/wait.h).
    const WaitPolicy& policy() const { return policy_; }
    size_t buffer_size() const { return buffer_size_; }
    Segment& segment() { return seg_; }
    const Segment& segment() const { return seg_; }

    // Starts the next round. `signature` identifies the call (collective, count, datatype,
    // reduction, root, algorithm): a peer in the same round with another signature is a usage
    // error, never run. `bytes`: the most any rank puts in its buffer this round; up to
    // kLaneBytes, the round uses a lane (every rank passes the same, as it follows from the
    // signature). `part`: what of the call is this rank's own where ranks' parts differ (an
    // allgatherv's own count), for peers to check with peer_part.
    void begin_round(const Signature& signature, size_t bytes = SIZE_MAX, uint64_t part = 0) {
        if (aborted() || failed() || any_failure()) [[unlikely]]
            check_failures();
        ++round_;
        signature_ = signature;
        lane_round_ = bytes <= kLaneBytes;
        round_bytes_ = bytes;
        was_ready_ = false;
        // Release: after everything this rank published in earlier rounds, as a peer that finds
        // no later publish takes the entries for this round's (check_signature); peers read them
        // after this round's first publish, which orders them before it.
        Flag& f = flag(rank_);
        f.near[round_ % kNearSigs].store(signature.tag(), std::memory_order_release);
        SigEntry& e = f.sig[round_ % kSigs];
        e.what.store(signature.what(), std::memory_order_release);
        e.count.store(signature.count(), std::memory_order_release);
        e.part.store(part, std::memory_order_release);
    }
    // Peer r's `part` of the current round, once it published something in it (a flag or eager
    // data this rank waited for).
    uint64_t peer_part(int r) const {
        return flag(r).sig[round_ % kSigs].part.load(std::memory_order_relaxed);
    }
    // co_await it before writing own_buffer(ahead): every rank is done with the round that used
    // that buffer before (ahead = 0: this round's buffer, 1: the next round's, which must not be
    // a lane round).
    Flags buffer_free(int ahead = 0);
    void* own_buffer(int ahead = 0) const { return peer_buffer(rank_, ahead); }
    // A peer's buffer for the current round; read it only after its ready flag.
    void* peer_buffer(int peer, int ahead = 0) const;
    void ready();  // this rank's data for the current round is in place
    // This rank no longer touches the arena for the current round. In a lane round after ready()
    // it publishes nothing: the next round's flag implies it (see done() below).
    void done() {
        // A lane round's "done" matters only to a writer reusing the lane kLanes rounds later, and
        // whatever this rank publishes next (it does: that writer's later rounds are its rounds
        // too) implies it. Skipping it saves a store that would take the flag's line from the
        // peers that are polling it, on the path of every small call.
        if (lane_round_ && was_ready_) return;
        publish(flag_word(rank_), uint32_t(2 * round_));
    }
    Flags ready_of(int peer);  // co_await: `peer` is ready in this round
    Flags all_ready();         // co_await: every rank is ready in this round
    // co_await: every rank is done with this round. For single-copy algorithms, where peers read
    // this rank's own buffers (not the arena's) until they are done.
    Flags all_done();
    // Eager rounds (see above; begin_round with bytes <= kEagerBytes). The writer co_awaits
    // buffer_free(), publishes its data (publish_eager, instead of ready) and is then done(); a
    // reader co_awaits eager_ready(writer), reads peer_eager(writer) and is done().
    const void* peer_eager(int peer) const { return eager_slot(peer)->data; }
    // How many bytes the peer's slot holds this round (after eager_ready).
    size_t peer_eager_bytes(int peer) const { return eager_slot(peer)->bytes; }
    void publish_eager(const void* data, size_t bytes) {
        std::memcpy(own_eager(), data, bytes);
        publish_eager(bytes);
    }
    // The same for `bytes` written straight into this rank's slot (after buffer_free()).
    void* own_eager() const { return eager_slot(rank_)->data; }
    void publish_eager(size_t bytes) {
        EagerSlot* slot = eager_slot(rank_);
        slot->bytes = uint32_t(bytes);
        slot->tag = signature_.tag();
        // Its sleepers count themselves in this rank's flag's waiters (see EagerWatch).
        publish({&slot->round, &flag(rank_).waiters, rank_}, uint32_t(round_));
    }
    // A reader of every peer's slot calls this first: the slots' first lines then load at once
    // instead of one miss after another (16 ranks: 15 cross-core misses in a row otherwise).
    void prefetch_eager() const {
        // A prefetch, not a load: the writers may be filling the lines (no data race).
        for (int r = 0; r < nranks_; ++r)
            if (r != rank_) __builtin_prefetch(eager_slot(r));
    }
    // A reader of a writer that runs ahead of it (a broadcast's root, a reduce's others) calls this
    // at the end of a round: the writer's slot for the next round, likely written already, then
    // loads while this rank returns and makes its next call, instead of as a miss in that call's
    // wait.
    void prefetch_next_eager(int writer) const { __builtin_prefetch(eager_slot(writer, 1)); }
    class EagerWatch;
    EagerWatch eager_ready(int peer, size_t bytes = SIZE_MAX);  // bytes: see EagerWatch
    int32_t peer_pid(int r) const { return process(r).pid.load(std::memory_order_acquire); }
    // Whether rank r's process still runs (a later process that took its pid does not count).
    bool peer_alive(int r) const;
    ProcessId peer_process(int r) const {
        return {process(r).pid.load(std::memory_order_acquire),
                process(r).start.load(std::memory_order_relaxed)};
    }

    // Once a wait fails (timeout, dead peer, mismatch) the arena is unusable: peers see it too.
    bool failed() const { return failed_.load(std::memory_order_acquire); }
    // The code of this rank's first failure (CCL_SUCCESS while not failed).
    ccl_result_t failure_code() const { return ccl_result_t(failure_code_.load()); }
    // Marks the arena failed (for every rank) and throws: for algorithms that find ranks
    // disagreeing on a call.
    [[noreturn]] void fail(ccl_result_t code, const std::string& message);
    // The same without throwing: for failures found outside the arena's waits (a dead peer seen
    // by a single-copy transfer).
    void mark_failed(ccl_result_t code) noexcept;
    // ccl_comm_abort, from any thread: every wait of this rank (blocking or a worker's) throws
    // CCL_ERROR_ABORTED at its next check, and the peers learn that this rank gave up (they fail
    // with CCL_ERROR_PEER_FAILURE). Wakes every sleeper on this arena's flags, here and in the
    // peers, so that nobody waits for a futex timeout.
    void abort() noexcept;
    bool aborted() const { return aborted_.load(std::memory_order_acquire); }
    // A failure another rank reported through the shared header (CCL_SUCCESS if none), with a
    // description: what ccl_comm_get_async_error sees of the peers.
    // Whether any rank (this one included) marked the arena failed: one load.
    bool any_failure() const { return failed_word_->load(std::memory_order_acquire) != 0; }
    ccl_result_t peer_failure(std::string* message) const {
        // One load on the path of every call; the rest only once something failed.
        if (!any_failure()) return CCL_SUCCESS;
        return failure_in_header(message);
    }

    // A counter in shared memory that rank `owner` advances, with the count of ranks asleep on it;
    // the mailbox waits on these. Any thread may wait on one (each its own Watch).
    struct Word {
        std::atomic<uint32_t>* value;
        std::atomic<uint32_t>* waiters;
        int owner;
    };
    class Watch;
    Watch watch(Word word, uint32_t target);  // co_await: word.value reaches target
    // Advances a word this rank owns and wakes its sleepers. The word by reference: passed by
    // value it went through the stack as three small stores read back by one wide load, which
    // the cpu cannot forward, so the call waited for every older store to reach the cache, the
    // eager data among them, whose line the reader was polling (a cross-core miss per call).
    static void publish(const Word& w, uint32_t value) {
        // Store then load, ordered: either a sleeper sees the new value before sleeping, or we see
        // it registered and wake it (the futex itself rechecks the value atomically). The order
        // costs a full fence here, or, with asymmetric fences, the sleeper's heavy_fence (wait.h).
        w.value->store(value, std::memory_order_release);
        light_fence();
        if (w.waiters->load(std::memory_order_seq_cst) != 0) futex_wake_all(w.value);
    }

private:
    struct Header;
    // Signatures kept per rank: more than the rounds a rank may begin while a peer is still in
    // round e (kLanes: it may begin round e + kLanes, then waits for the peer), so that a rank in
    // round e always finds a peer's entry for e; the last kNearSigs tags also beside the flag, in
    // its cache line, which a peer reads anyway.
    static constexpr int kSigs = kLanes + 1, kNearSigs = 7;
    struct alignas(32) SigEntry {  // never across two lines
        std::atomic<uint64_t> what, count, part;
    };
    // Whole cache-line pairs per rank, so that a rank's stores never disturb another rank's flag.
    struct alignas(128) Flag {
        std::atomic<uint32_t> seq;              // 2e-1: ready in round e, 2e: done with e
        std::atomic<uint64_t> near[kNearSigs];  // the tag of round e at [e % kNearSigs]
        alignas(64) SigEntry sig[kSigs];        // round e's signature at [e % kSigs]
        // Peers sleeping on seq's futex (or on this rank's eager slots). On a line of its own:
        // every publish loads it right after storing seq, and while a peer polls seq that store
        // waits for the line to come back, which a load from the same line would wait for too.
        alignas(64) std::atomic<uint32_t> waiters;
    };
    struct alignas(64) EagerSlot {
        std::atomic<uint32_t> round;  // the low bits of the round that published it
        uint32_t bytes;               // of data
        uint64_t tag;                 // the round's Signature::tag
        char data[kEagerBytes];
    };
    EagerSlot* eager_slot(int r, uint64_t ahead = 0) const {  // rank r's slot, this round + ahead
        return reinterpret_cast<EagerSlot*>(static_cast<char*>(seg_.data()) + eager_offset_) +
               size_t(r) * kLanes + (round_ + ahead) % kLanes;
    }
    // The peer published its flag in this round but no eager data: a mismatch (throws), unless
    // the data is there after all (true). Publishes this rank's flag first.
    bool eager_or_mismatch(int peer, EagerSlot* slot);
    [[noreturn]] void fail_mismatch(int peer);  // `peer` ran another collective in this round
    // Rank r's whole signature for the current round; false if r ran so far ahead that its entry
    // may hold a later round's (only a rank done with the round can see that).
    bool peer_signature(int r, Signature* sig) const;
    // When a wait started and when to look at the peer's pid next.
    struct WaitClock {
        bool started = false;
        std::chrono::steady_clock::time_point deadline, next_liveness;
    };

    static size_t header_bytes(int nranks);
    static size_t flags_bytes(int nranks);
    Header* header() const;
    struct Process {  // a rank's process, told apart from a later one with its pid
        std::atomic<int32_t> pid;
        std::atomic<uint64_t> start;  // ProcessId::start
    };
    Process& process(int r) const;
    Flag& flag(int r) const {
        return reinterpret_cast<Flag*>(static_cast<char*>(seg_.data()) + flags_offset_)[r];
    }
    std::atomic<uint32_t>& flag_waiters(int r) const { return flag(r).waiters; }
    Word flag_word(int r) const {
        Flag& f = flag(r);
        return {&f.seq, &f.waiters, r};
    }
    // Whether the word reached `target`; throws ccl::Error when the wait must stop (deadline, its
    // owner dead, the arena failed).
    bool test_word(const Word& w, uint32_t target, WaitClock& clock);
    bool test_flag(int r, uint32_t target, WaitClock& clock);  // test_word + signature check
    // Blocks until the word reaches `target` (spin, yield, futex) or test_word throws.
    void block_word(Word w, uint32_t target, WaitClock& clock, bool is_flag);
    // The same with `test` deciding (it may throw); `touch` runs with every spin.
    template <class Test, class Touch>
    void block_on(Word w, uint32_t target, Test test, Touch touch);
    static void sleep_on_word(Word w, uint32_t target, std::chrono::nanoseconds max);
    void check_peers_failed() {  // throws if another rank marked the arena failed
        if (any_failure()) fail_if_peer_failed();
    }
    void fail_if_peer_failed();
    ccl_result_t failure_in_header(std::string* message) const;
    void check_aborted();  // throws CCL_ERROR_ABORTED after abort()
    // begin_round's checks, out of line: throws if aborted, failed, or a peer failed.
    [[gnu::cold, gnu::noinline]] void check_failures();
    void check_signature(int r, uint32_t seen);
    void check_whole_signature(int r);  // fails unless r's whole signature is this round's

    Segment seg_;
    int nranks_;
    int rank_;
    size_t buffer_size_;
    double timeout_s_;
    WaitPolicy policy_;
    size_t flags_offset_;
    size_t data_offset_;
    size_t lanes_offset_;
    size_t eager_offset_;
    std::atomic<uint64_t>* failed_word_;  // the shared header's "failed"
    uint64_t round_ = 0;                  // the current round (1-based once started)
    bool lane_round_ = false;             // the current round uses a lane
    size_t round_bytes_ = 0;              // begin_round's `bytes`
    bool was_ready_ = false;              // this rank published ready in the current round
    uint64_t known_done_ = 0;             // every rank is known to be done with rounds <= this
    Signature signature_;
    DescribeSignature describe_;
    std::vector<int> comm_ranks_;
    std::atomic<bool> failed_{false};
    std::atomic<int> failure_code_{CCL_SUCCESS};
    std::atomic<bool> aborted_{false};  // set by abort(), from any thread
};

// Waits until every rank in [first, last] but this one has its flag at `target`; once satisfied,
// every rank is known to be done with rounds <= `implies_done`. A wait for "done" flags
// (`learn`: target 2 x implies_done, every rank) also learns how far beyond the slowest rank is,
// so that a rank that only writes (a broadcast's root) looks at its readers' flags only every
// few rounds rather than at every call.
class Arena::Flags final : public Waiter {
public:
    Flags(Arena& arena, int first, int last, uint32_t target, uint64_t implies_done,
          bool learn = false)
        : arena_(arena),
          next_(first),
          last_(last),
          target_(target),
          implies_done_(implies_done),
          learn_(learn) {}

    bool ready() override;
    void block() override;
    Sleeper sleeper() override;

    bool await_ready() { return next_ > last_ || ready(); }  // inline: nothing to wait for
    void await_suspend(Task::Handle h) { h.promise().waiting = this; }
    void await_resume();

private:
    Arena& arena_;
    int next_, last_;
    uint32_t target_;
    uint64_t implies_done_;
    bool learn_;
    uint32_t ahead_ = UINT32_MAX;  // least flag value beyond target_ seen (with learn_)
    WaitClock clock_;
};

// Waits until one word reaches a target.
class Arena::Watch : public Waiter {
public:
    Watch(Arena& arena, Word word, uint32_t target) : arena_(arena), word_(word), target_(target) {}

    bool ready() override { return arena_.test_word(word_, target_, clock_); }
    void block() override { arena_.block_word(word_, target_, clock_, false); }
    Sleeper sleeper() override {
        return
            [w = word_, t = target_](std::chrono::microseconds max) { sleep_on_word(w, t, max); };
    }

    bool await_ready() { return ready(); }
    void await_suspend(Task::Handle h) { h.promise().waiting = this; }
    void await_resume() {}

protected:
    Arena& arena_;
    Word word_;
    uint32_t target_;
    WaitClock clock_;
};

// Waits until a peer's eager slot carries this round. While it waits, it also looks at the peer's
// flag now and then: a peer that ran another collective in this round publishes its flag but no
// eager data, which is a mismatch (an error) rather than a wait until the deadline.
class Arena::EagerWatch final : public Watch {
public:
    // `bytes`: how much of the slot the reader expects the peer to fill (at most the round's
    // bytes): the lines it pulls while it polls.
    EagerWatch(Arena& arena, int peer, size_t bytes)
        : Watch(arena, {&arena.eager_slot(peer)->round, &arena.flag_waiters(peer), peer},
                uint32_t(arena.round_)),
          peer_(peer),
          slot_(arena.eager_slot(peer)),
          lines_(int((std::min({bytes, arena.round_bytes_, kEagerBytes}) +
                      offsetof(EagerSlot, data) + 63) /
                     64)) {}

    // The peer's flag is looked at on every 64th poll only: its line would otherwise bounce
    // between the cores.
    bool ready() override { return poll(++polls_ % 64 == 0); }
    // Inline, the common case of a small call: the slot already carries this round (a writer may
    // be up to kLanes - 1 rounds ahead, never a whole ring), with this call's signature.
    bool await_ready() {
        touch();  // first: the misses on the slot's lines overlap
        if (!arena_.aborted() && slot_->round.load(std::memory_order_acquire) == target_ &&
            slot_->tag == arena_.signature_.tag() && arena_.signature_.exact()) [[likely]]
            return true;
        return ready();
    }
    void block() override;

private:
    bool poll(bool look_at_flag);
    void touch() const {  // pulls the slot's further lines (their misses overlap the first's)
        // A prefetch, not a load: the writer may be filling the line (no data race).
        for (int l = 1; l < lines_; ++l)
            __builtin_prefetch(reinterpret_cast<const char*>(slot_) + 64 * l);
    }

    int peer_;
    EagerSlot* slot_;
    int lines_;  // cache lines the round's data spans
    uint32_t polls_ = 0;
};

inline Arena::Flags Arena::buffer_free(int ahead) {
    // The half this round uses was last used in round (round_ + ahead - 2) at the latest; a lane,
    // in round (round_ - kLanes).
    int64_t previous =
        lane_round_ && ahead == 0 ? int64_t(round_) - kLanes : int64_t(round_) + ahead - 2;
    if (previous <= int64_t(known_done_)) return Flags(*this, 0, -1, 0, known_done_);  // ready
    return Flags(*this, 0, nranks_ - 1, uint32_t(2 * previous), uint64_t(previous), true);
}

inline Arena::EagerWatch Arena::eager_ready(int peer, size_t bytes) {
    return EagerWatch(*this, peer, bytes);
}

}  // namespace ccl::shm
