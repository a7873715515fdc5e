#include "shm/arena.h"

#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "base/error.h"
#include "base/log.h"

namespace ccl::shm {

namespace {

constexpr uint64_t kMagic = 0x63636c2d61726e31ull;  // "ccl-arn1"
constexpr size_t kPage = 4096;
constexpr auto kMaxSleep = std::chrono::milliseconds(50);  // bounds every futex sleep
constexpr auto kLivenessPeriod = std::chrono::milliseconds(100);

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

bool reached(uint32_t value, uint32_t target) { return int32_t(value - target) >= 0; }

}  // namespace

struct Arena::Header {
    uint64_t magic;
    uint64_t buffer_size;
    uint32_t nranks;
    // 0, or (ccl_result_t << 32 | 1 + rank) of the first failed wait: one word, so that whoever
    // sees the rank also sees the code.
    std::atomic<uint64_t> failed;
    // nranks processes follow (see process()), for peer-liveness checks
};

size_t Arena::header_bytes(int nranks) {
    return round_up(sizeof(Arena::Header) + sizeof(Process) * size_t(nranks), kPage);
}
size_t Arena::flags_bytes(int nranks) { return round_up(sizeof(Flag) * size_t(nranks), kPage); }

size_t Arena::bytes_needed(int nranks, size_t buffer_size) {
    return header_bytes(nranks) + flags_bytes(nranks) +
           size_t(nranks) * 2 * round_up(buffer_size, kPage) +
           round_up(size_t(nranks) * kLanes * kLaneBytes, kPage) +
           round_up(size_t(nranks) * kLanes * sizeof(EagerSlot), kPage);
}

Arena::Arena(Segment seg, int nranks, int rank, size_t buffer_size, double timeout_s, bool init,
             WaitPolicy policy, DescribeSignature describe)
    : seg_(std::move(seg)),
      nranks_(nranks),
      rank_(rank),
      buffer_size_(buffer_size),
      timeout_s_(timeout_s),
      policy_(policy),
      flags_offset_(header_bytes(nranks)),
      data_offset_(header_bytes(nranks) + flags_bytes(nranks)),
      lanes_offset_(data_offset_ + size_t(nranks) * 2 * round_up(buffer_size, kPage)),
      eager_offset_(lanes_offset_ + round_up(size_t(nranks) * kLanes * kLaneBytes, kPage)),
      describe_(describe) {
    static_assert(sizeof(Flag) % 128 == 0);
    static_assert(sizeof(EagerSlot) == 384);
    if (seg_.size() != bytes_needed(nranks, buffer_size))
        throw Error(CCL_ERROR_INTERNAL,
                    "shared-memory arena " + seg_.name() + " has the wrong size");
    Header* h = header();
    failed_word_ = &h->failed;
    if (init) {
        // The segment is fresh (zero-filled): flags start at 0, round 0 "done". Peers learn the
        // segment's name through the KVS only after this, which orders these stores before theirs.
        h->buffer_size = buffer_size;
        h->nranks = uint32_t(nranks);
        h->magic = kMagic;
    } else if (h->magic != kMagic || h->nranks != uint32_t(nranks) ||
               h->buffer_size != buffer_size) {
        throw Error(CCL_ERROR_INTERNAL,
                    "shared-memory arena " + seg_.name() + " is not laid out as expected");
    }
    const ProcessId me = this_process();
    process(rank).start.store(me.start, std::memory_order_relaxed);
    process(rank).pid.store(me.pid, std::memory_order_release);
}

Arena::Header* Arena::header() const { return static_cast<Header*>(seg_.data()); }

Arena::Process& Arena::process(int r) const {
    return reinterpret_cast<Process*>(static_cast<char*>(seg_.data()) + sizeof(Header))[r];
}

bool Arena::peer_alive(int r) const {
    const int32_t pid = process(r).pid.load(std::memory_order_acquire);
    return pid <= 0 || process_alive({pid, process(r).start.load(std::memory_order_relaxed)});
}

void Arena::check_failures() {
    check_aborted();
    if (failed())
        throw Error(failure_code(), std::string("communicator failed earlier (") +
                                        result_name(failure_code()) + ")");
    check_peers_failed();
}

void* Arena::peer_buffer(int peer, int ahead) const {
    if (lane_round_ && ahead == 0)
        return static_cast<char*>(seg_.data()) + lanes_offset_ +
               (size_t(peer) * kLanes + round_ % kLanes) * kLaneBytes;
    size_t stride = round_up(buffer_size_, kPage);
    size_t index = size_t(peer) * 2 + (round_ + uint64_t(ahead)) % 2;
    return static_cast<char*>(seg_.data()) + data_offset_ + index * stride;
}

bool Arena::eager_or_mismatch(int peer, EagerSlot* slot) {
    // A peer that ran another collective may wait on this rank's flag, which an eager round
    // publishes only at its end: publish it now (ready: done with the previous round), so that
    // it sees the mismatch too.
    if (!was_ready_) ready();
    const uint32_t seen = flag(peer).seq.load(std::memory_order_acquire);
    if (!reached(seen, uint32_t(2 * round_ - 1))) return false;
    check_signature(peer, seen);  // a collective with another signature: throws
    // The slot is published before the flag: seen now, or never for this round.
    if (reached(slot->round.load(std::memory_order_acquire), uint32_t(round_))) return true;
    fail_mismatch(peer);
}

void Arena::fail_mismatch(int peer) {
    auto show = [this](const Signature& s) {
        if (describe_) return describe_(s);
        char text[64];
        std::snprintf(text, sizeof text, "signature %#llx count %llu",
                      static_cast<unsigned long long>(s.what()),
                      static_cast<unsigned long long>(s.count()));
        return std::string(text);
    };
    Signature theirs;
    const std::string what = peer_signature(peer, &theirs) ? show(theirs) : "a later call";
    fail(CCL_ERROR_INVALID_USAGE, "collective mismatch: " + rank_name(peer) + " called " + what +
                                      " where " + rank_name(rank_) + " called " + show(signature_) +
                                      "; every rank must make the same calls in the same order, "
                                      "with the same count, datatype, reduction and root");
}

bool Arena::peer_signature(int r, Signature* sig) const {
    const Flag& f = flag(r);
    const SigEntry& e = f.sig[round_ % kSigs];
    const uint64_t what = e.what.load(std::memory_order_acquire);
    const uint64_t count = e.count.load(std::memory_order_acquire);
    // Overwritten when r began round round_ + kSigs, after it published in the round before.
    if (reached(f.seq.load(std::memory_order_acquire), uint32_t(2 * (round_ + kSigs - 1) - 1)))
        return false;
    *sig = Signature(what, count);
    return true;
}

Arena::Watch Arena::watch(Word word, uint32_t target) { return Watch(*this, word, target); }

void Arena::ready() {
    publish(flag_word(rank_), uint32_t(2 * round_ - 1));
    was_ready_ = true;
}

void Arena::check_signature(int r, uint32_t seen) {
    // The peer stores its signature for round e before it publishes anything in round e, and
    // overwrites it in a ring of k when it starts round e + k, after it published something for
    // round e + k - 1 (its ready or its done: every round publishes one or both). Check only in
    // between: the tag from the near ring when the peer is not that far ahead (no miss beyond
    // the flag's line), where it decides alone; else the whole signature from the long one.
    if (!reached(seen, uint32_t(2 * round_ - 1))) return;
    Flag& f = flag(r);
    const uint64_t tag = f.near[round_ % kNearSigs].load(std::memory_order_acquire);
    if (!reached(f.seq.load(std::memory_order_acquire),
                 uint32_t(2 * (round_ + kNearSigs - 1) - 1))) {
        if (tag != signature_.tag()) fail_mismatch(r);
        if (signature_.exact()) return;
    }
    check_whole_signature(r);
}

void Arena::check_whole_signature(int r) {
    // No entry to compare only when r began round e + kSigs: it finished round e + kLanes before,
    // whose buffers are free only once every rank, this one included, is done with round e. So
    // nothing of this round is left to go wrong.
    Signature theirs;
    if (peer_signature(r, &theirs) && !(theirs == signature_)) fail_mismatch(r);
}

Arena::Flags Arena::ready_of(int peer) {
    return Flags(*this, peer, peer, uint32_t(2 * round_ - 1), known_done_);
}

// Every rank ready in this round is done with the previous one.
Arena::Flags Arena::all_done() {
    return Flags(*this, 0, nranks_ - 1, uint32_t(2 * round_), round_);
}

Arena::Flags Arena::all_ready() {
    return Flags(*this, 0, nranks_ - 1, uint32_t(2 * round_ - 1), round_ - 1);
}

bool Arena::test_word(const Word& w, uint32_t target, WaitClock& clock) {
    check_aborted();  // before the value: an aborted call stops even if its peers go on
    if (reached(w.value->load(std::memory_order_acquire), target)) return true;
    if (any_failure()) {
        // This thread may have paused between the two loads while the value was published and
        // the peers went on to fail later: what a failure seen now orders after, the value read
        // again sees, and a wait that was met is not failed.
        if (reached(w.value->load(std::memory_order_acquire), target)) return true;
        fail_if_peer_failed();
    }
    auto now = std::chrono::steady_clock::now();
    if (!clock.started) {
        clock.started = true;
        clock.deadline = now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                   std::chrono::duration<double>(timeout_s_));
        clock.next_liveness = now + kLivenessPeriod;
        return false;
    }
    if (now >= clock.deadline)
        fail(CCL_ERROR_TIMEOUT, "timed out after " + std::to_string(timeout_s_) +
                                    " s (CCL_TIMEOUT) waiting for " + rank_name(w.owner));
    if (now >= clock.next_liveness) {
        clock.next_liveness = now + kLivenessPeriod;
        if (!peer_alive(w.owner))
            fail(CCL_ERROR_PEER_FAILURE,
                 rank_name(w.owner) + " (pid " + std::to_string(peer_pid(w.owner)) + ") died");
    }
    return false;
}

bool Arena::test_flag(int r, uint32_t target, WaitClock& clock) {
    if (!test_word(flag_word(r), target, clock)) return false;
    check_signature(r, flag(r).seq.load(std::memory_order_acquire));
    return true;
}

template <class Test, class Touch>
void Arena::block_on(Word w, uint32_t target, Test test, Touch touch) {
    auto seen = [&] { return reached(w.value->load(std::memory_order_acquire), target); };
    for (int i = 0; i < policy_.spins; ++i) {
        touch();
        if (seen()) break;
        cpu_relax();
    }
    if (!seen()) {
        const auto until = std::chrono::steady_clock::now() + policy_.poll_time;
        for (int i = 0; !seen() && (i < policy_.yields || std::chrono::steady_clock::now() < until);
             ++i) {
            // Polling may last long (CCL_POLL_TIME_US): its deadline, a dead peer and an abort
            // are looked at on the way, not only once it sleeps.
            if (i >= policy_.yields && i % 64 == 0 && test()) break;
            sched_yield();
        }
    }
    while (!test()) sleep_on_word(w, target, kMaxSleep);
}

void Arena::block_word(Word w, uint32_t target, WaitClock& clock, bool is_flag) {
    block_on(
        w, target,
        [&] { return is_flag ? test_flag(w.owner, target, clock) : test_word(w, target, clock); },
        [] {});
}

void Arena::sleep_on_word(Word w, uint32_t target, std::chrono::nanoseconds max) {
    w.waiters->fetch_add(1, std::memory_order_seq_cst);
    heavy_fence();  // orders the publishers that skipped their fence (see publish)
    uint32_t v = w.value->load(std::memory_order_seq_cst);
    if (!reached(v, target)) futex_wait(w.value, v, max);
    w.waiters->fetch_sub(1, std::memory_order_seq_cst);
}

bool Arena::Flags::ready() {
    for (; next_ <= last_; ++next_) {
        if (next_ == arena_.rank_) continue;
        if (!arena_.test_flag(next_, target_, clock_)) return false;
        if (learn_)
            ahead_ =
                std::min(ahead_, arena_.flag(next_).seq.load(std::memory_order_relaxed) - target_);
    }
    return true;
}

void Arena::Flags::block() {
    while (!ready()) arena_.block_word(arena_.flag_word(next_), target_, clock_, true);
}

Waiter::Sleeper Arena::Flags::sleeper() {
    if (next_ > last_) return [](std::chrono::microseconds) {};
    return [w = arena_.flag_word(next_), t = target_](std::chrono::microseconds max) {
        sleep_on_word(w, t, max);
    };
}

bool Arena::EagerWatch::poll(bool look_at_flag) {
    touch();
    if (arena_.test_word(word_, target_, clock_)) {
        if (slot_->tag != arena_.signature_.tag()) arena_.fail_mismatch(peer_);
        if (!arena_.signature_.exact()) arena_.check_whole_signature(peer_);
        return true;
    }
    return look_at_flag && arena_.eager_or_mismatch(peer_, slot_) && poll(false);
}

void Arena::EagerWatch::block() {
    arena_.block_on(
        word_, target_, [this] { return poll(true); }, [this] { touch(); });
}

void Arena::Flags::await_resume() {
    // A flag at 2e (done with e) or 2e + 1 (ready in e + 1, so done with e): done with e. (Flags
    // run at most a few rounds apart, far from wrapping; test_flag saw each at target_ or beyond.)
    uint64_t done = implies_done_;
    if (learn_ && ahead_ != UINT32_MAX)
        done = std::max(done, std::min(implies_done_ + ahead_ / 2, arena_.round_ - 1));
    arena_.known_done_ = std::max(arena_.known_done_, done);
}

void Arena::check_aborted() {
    if (aborted()) throw Error(CCL_ERROR_ABORTED, "the communicator was aborted (ccl_comm_abort)");
}

ccl_result_t Arena::failure_in_header(std::string* message) const {
    uint64_t f = failed_word_->load(std::memory_order_acquire);
    const int who = int(uint32_t(f) - 1);
    if (f == 0 || who == rank_) return CCL_SUCCESS;
    // A peer's abort is, seen from here, a peer that gave up.
    const auto code = ccl_result_t(f >> 32);
    if (message)
        *message = rank_name(who) + (code == CCL_ERROR_ABORTED
                                         ? std::string(" aborted the communicator (ccl_comm_abort)")
                                         : std::string(" of this communicator failed first (") +
                                               result_name(code) + ")");
    return code == CCL_ERROR_ABORTED ? CCL_ERROR_PEER_FAILURE : code;
}

void Arena::fail_if_peer_failed() {
    std::string message;
    if (ccl_result_t code = peer_failure(&message); code != CCL_SUCCESS) fail(code, message);
}

void Arena::mark_failed(ccl_result_t code) noexcept {
    int expected_code = CCL_SUCCESS;
    failure_code_.compare_exchange_strong(expected_code, code);
    failed_.store(true, std::memory_order_release);
    uint64_t expected = 0;
    header()->failed.compare_exchange_strong(expected, uint64_t(code) << 32 | uint32_t(rank_ + 1));
}

void Arena::fail(ccl_result_t code, const std::string& message) {
    mark_failed(code);
    throw Error(code, message);
}

void Arena::abort() noexcept {
    aborted_.store(true, std::memory_order_seq_cst);
    mark_failed(CCL_ERROR_ABORTED);
    // Sleepers re-check at their next wake (a futex sleep lasts at most kMaxSleep anyway): wake
    // them now, in this process and the peers, which then see the failed header.
    auto* slots = reinterpret_cast<EagerSlot*>(static_cast<char*>(seg_.data()) + eager_offset_);
    for (int r = 0; r < nranks_; ++r) {
        futex_wake_all(flag_word(r).value);
        for (int l = 0; l < kLanes; ++l) futex_wake_all(&slots[r * kLanes + l].round);
    }
}

}  // namespace ccl::shm
