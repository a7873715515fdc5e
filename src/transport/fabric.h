// Messages between the ranks of a communicator on different nodes: the transport's interface.
// A process opens one endpoint of its transport, which every communicator with ranks on other
// nodes shares; a Fabric is one communicator's view of it: tagged messages to and from every rank
// of that communicator. Two transports implement it: libfabric (transport/ofi.h: RDMA providers,
// and tcp;ofi_rxm) and plain TCP sockets (transport/socket.h); Fabric::open picks one
// (CCL_TRANSPORT). Endpoint names travel through the communicator's bootstrap; every wait has the
// communicator's deadline.
//
// Messages are matched by tag: a channel (collectives, point to point, the further parts of a
// point-to-point message, or failure notices), the receiving communicator's id on its own endpoint
// (exchanged with the names), the sender's rank and a per-pair, per-channel sequence number. Both
// sides of a pair issue their messages of a channel in the same order (collectives are called in
// the same order everywhere; point-to-point messages between two ranks match in order), so the
// numbers agree without any handshake.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/task.h"
#include "ccl/ccl.h"

namespace ccl::transport {

// An allocator whose new elements are left uninitialised: copies and temporaries are written
// before they are read, and zeroing a fresh buffer costs as much as its page faults.
template <class T>
struct Uninitialised : std::allocator<T> {
    template <class U>
    struct rebind {
        using other = Uninitialised<U>;
    };
    Uninitialised() = default;
    template <class U>
    Uninitialised(const Uninitialised<U>&) noexcept {}
    template <class U, class... Args>
    void construct(U* p, Args&&... args) {
        if constexpr (sizeof...(Args) == 0)
            ::new (static_cast<void*>(p)) U;
        else
            ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
    }
};
// Memory for a send's copy or a call's temporaries.
using Bytes = std::vector<char, Uninitialised<char>>;

// Collectives, point to point, and failure notices (a rank whose communicator broke tells the
// other nodes' ranks, so that they fail at once with its error instead of at their deadline).
// `part`: the second and later parts of a long point-to-point message, all under that message's
// sequence number (send_message): they have no numbers of their own to get out of step.
enum class Channel : uint64_t { coll = 0, p2p = 1, notice = 2, part = 3 };

// Buffers kept for sends' copies and calls' temporaries, by an endpoint: fresh memory for every
// large copy cost more than the transfer (page faults are dear on virtual machines: a 1 MiB send
// across two fake nodes took 4.4 ms with fresh copies, 1.3 ms without any).
class Spares {
public:
    // At least `bytes` (not zeroed), and its return (kept, or freed when small or too many are).
    Bytes take(size_t bytes);
    void give(Bytes buf);

private:
    // At least kMin bytes each, kMax in all.
    static constexpr size_t kMin = size_t(64) << 10, kMax = size_t(256) << 20;
    std::mutex mu_;
    std::vector<Bytes> kept_;
    size_t bytes_ = 0;
};

// The tag of a message: channel (bits 62-63) | receiving communicator's id (46-61) | sender
// (28-45) | sequence. A sequence number wraps after 2^28 messages of a channel between two ranks,
// long after the first of them matched.
inline constexpr int kTagIdShift = 46, kTagSenderShift = 28;
inline constexpr uint64_t kTagSeqMask = (uint64_t(1) << kTagSenderShift) - 1;
inline constexpr int kMaxRanks = 1 << (kTagIdShift - kTagSenderShift);
inline constexpr int kCommIds = 1 << (62 - kTagIdShift);
inline uint64_t make_tag(Channel ch, uint16_t id, int sender, uint64_t seq) {
    return uint64_t(ch) << 62 | uint64_t(id) << kTagIdShift | uint64_t(sender) << kTagSenderShift |
           (seq & kTagSeqMask);
}

// The ids of an endpoint's communicators (the tag's receiving id), counting up so that an id comes
// back only after kCommIds others: a late message of a destroyed communicator is never taken for
// the next one's. Not locked: its endpoint's lock guards it.
class CommIds {
public:
    // Throws CCL_ERROR_OUT_OF_MEMORY when every id is in use.
    uint16_t take();
    void give(uint16_t id) { live_[id] = false; }

private:
    std::vector<bool> live_ = std::vector<bool>(kCommIds);
    uint16_t next_ = 0;
};

// What a rank whose communicator broke tells the other nodes' ranks.
struct Notice {
    int32_t code;
    int32_t rank;
    char what[248];
};

class Fabric {
public:
    // An operation in flight; each transport's extends it.
    struct Op {
        std::atomic<uint32_t> state{0};   // 0 pending, 1 done, 2 failed
        ccl_result_t code = CCL_SUCCESS;  // when failed
        std::string error;
        bool is_recv = false;
        int peer = 0;
        size_t bytes = 0;
        virtual ~Op() = default;
        // 0 pending, 1 done, 2 failed (code and error say why).
        virtual uint32_t settled() { return state.load(std::memory_order_acquire); }
    };
    // A posted operation. Dropping it before completion cancels a receive (its buffer may go);
    // a send keeps its data (see post_send) until the transport is done with it.
    class OpRef {
    public:
        OpRef() = default;
        explicit OpRef(std::shared_ptr<Op> op, Fabric* fabric) : op_(std::move(op)), fab_(fabric) {}
        OpRef(OpRef&&) noexcept = default;
        OpRef& operator=(OpRef&& o) noexcept;
        ~OpRef();
        Op* get() const { return op_.get(); }
        // The operation, no longer cancelled when this goes (a message's part, kept by the
        // whole).
        std::shared_ptr<Op> release() && {
            fab_ = nullptr;
            return std::move(op_);
        }

    private:
        std::shared_ptr<Op> op_;
        Fabric* fab_ = nullptr;
    };
    class Done;  // co_await: an operation completed
    // Memory for a call's temporaries, from the buffers the process's endpoint keeps for copies
    // (fresh memory costs page faults on every call), back to them when it goes. Not zeroed.
    class Scratch {
    public:
        Scratch(Fabric& f, size_t bytes)
            : pool_(&f.spares()), buf_(pool_->take(bytes)), bytes_(bytes) {}
        Scratch(Scratch&& o) noexcept = default;
        Scratch& operator=(Scratch&&) = delete;
        ~Scratch() {
            if (!buf_.empty()) pool_->give(std::move(buf_));  // empty: moved from
        }
        char* data() { return buf_.data(); }
        size_t size() const { return bytes_; }

    private:
        Spares* pool_;
        Bytes buf_;
        size_t bytes_;
    };
    Scratch scratch(size_t bytes) { return Scratch(*this, bytes); }

    // Joins the process's endpoint of the transport CCL_TRANSPORT names (auto: sockets unless
    // FI_PROVIDER names a libfabric provider other than tcp) as `rank` among `size` ranks. Throws
    // CCL_ERROR_UNSUPPORTED saying why when the transport cannot open.
    static std::unique_ptr<Fabric> open(int rank, int size, double timeout_s);
    // The transport open would use ("socket", "ofi(tcp;ofi_rxm)"), or "unavailable: <why>".
    // Opens nothing.
    static std::string probe();
    // Waits (at most the timeout) for this communicator's unfinished sends, then leaves the
    // endpoint (closed with its last communicator).
    virtual ~Fabric() = default;
    Fabric(const Fabric&) = delete;
    Fabric& operator=(const Fabric&) = delete;

    // The endpoint's address and this communicator's id on it, for the bootstrap.
    virtual std::string name_hex() const = 0;
    // The transport, as logs and ccl_info show it ("socket", "ofi(tcp;ofi_rxm)").
    virtual std::string provider() const = 0;
    // Messages up to this size go eagerly (no rendezvous round trip before the data); 0 when the
    // transport does not tell.
    virtual size_t eager_max() const = 0;
    // Takes every rank's name_hex: their addresses and ids.
    virtual void connect(const std::vector<std::string>& names_hex) = 0;
    // Collective: opens every connection this communicator needs, so that the first collective
    // pays nothing for them. Blocks, with the deadline.
    virtual void connect_all() = 0;

    int rank() const { return rank_; }
    int size() const { return size_; }

    // The largest part a ring cuts its blocks into: with tcp;ofi_rxm, messages of up to 256 KiB
    // went fast and longer ones up to 2x slower (a 16 MiB ring allreduce across two nodes in parts
    // of 256 KiB + 4 B: 29 ms, of 254 KiB: 15 ms). libfabric's collective messages longer than
    // this go as several, cut alike on both sides (post_send, post_recv).
    static constexpr size_t kMaxMessage = (256 << 10) - 4096;

    // Posts a send of `bytes` at `buf` to `peer`; `buf` must stay valid until it completes.
    virtual OpRef post_send(int peer, Channel ch, const void* buf, size_t bytes) = 0;
    // A point-to-point message: copied first, so the caller may reuse `buf` at once (such sends
    // never wait for their receiver), with `digest` (the call's count and datatype), for the
    // receive to check.
    virtual OpRef send_message(int peer, const void* buf, size_t bytes, uint32_t digest) = 0;
    // Posts the receive of a point-to-point message of `bytes` into `buf`. A message of another
    // length or digest fails it (CCL_ERROR_INVALID_USAGE) and is dropped, so that the sender's
    // send completes.
    virtual OpRef post_message(int peer, void* buf, size_t bytes, uint32_t digest) = 0;
    // Posts a receive of exactly `bytes` from `peer`: a longer or a shorter message fails it
    // (counts differ between the ranks: CCL_ERROR_INVALID_USAGE).
    virtual OpRef post_recv(int peer, Channel ch, void* buf, size_t bytes) = 0;
    Done done(const OpRef& op);

    // From any thread: every wait throws CCL_ERROR_ABORTED from now on.
    void abort() noexcept { aborted_.store(true, std::memory_order_release); }
    // Set by the communicator: called now and then in waits, throws when the wait must stop
    // (a co-located peer reported a failure).
    void set_failure_check(std::function<void()> check) { check_ = std::move(check); }
    // Set by the communicator: called once a notice from another node's rank arrives, with its
    // code (before the waits throw it).
    void set_on_remote_failure(std::function<void(ccl_result_t)> f) { on_remote_ = std::move(f); }
    // Tells `peers` (once per endpoint) that this rank's communicator broke with `code`.
    virtual void notify_failure(ccl_result_t code, const std::string& what,
                                const std::vector<int>& peers) = 0;

    // Drives progress once for a wait on `op`: what already came for it is delivered (before a
    // wait gives up on a notice, a message that arrived first completes it).
    virtual void poll(Op& op) = 0;
    // Sleeps until a completion may have come, at most `max` (a worker with nothing to do).
    virtual void nap(std::chrono::microseconds max) = 0;

protected:
    Fabric(int rank, int size, double timeout_s)
        : rank_(rank), size_(size), timeout_s_(timeout_s) {}
    friend class Done;
    virtual Spares& spares() = 0;
    // The receive `op` is given up (its OpRef went before it completed): once this returns,
    // nothing writes into its buffer any more.
    virtual void cancel(const std::shared_ptr<Op>& op) noexcept = 0;
    // Throws when this communicator cannot go on, so that no wait or post outlasts a failure
    // seen anywhere: it was aborted, a rank on another node sent a failure notice, the
    // connection to one of its ranks broke, or the communicator's check (set_failure_check)
    // throws. Every wait looks at least every millisecond.
    virtual void check_failed() = 0;
    // One step of a blocking wait for `op` that has waited `waited` so far: drive progress, yield
    // or sleep, as the transport waits best (at most a millisecond, so that failures are seen).
    virtual void idle(Op& op, std::chrono::nanoseconds waited) = 0;
    // The blocking wait that called idle for `op` ends (it completed, failed or timed out).
    virtual void idle_end(Op&) {}
    // The checks every transport makes first (check_failed): aborted, or a notice came.
    void throw_if_stopped();
    // A notice arrived (`len` bytes of a Notice): the waits throw its code from now on. Under the
    // transport's lock, which also guards remote_what_.
    void take_notice(const void* data, size_t len);

    int rank_, size_;
    double timeout_s_;
    std::atomic<int> remote_code_{0};  // a notice's code, once one came
    std::string remote_what_;          // its text
    std::atomic<bool> notified_{false};
    std::function<void(ccl_result_t)> on_remote_;
    std::atomic<bool> aborted_{false};
    std::function<void()> check_;
};

// Waits until an operation completed; throws its error, CCL_ERROR_TIMEOUT at the deadline,
// CCL_ERROR_ABORTED after abort().
class Fabric::Done final : public Waiter {
public:
    Done(Fabric& f, Op* op);
    bool ready() override;
    void block() override;
    Sleeper sleeper() override;

    bool await_ready() { return ready(); }
    void await_suspend(Task::Handle h) { h.promise().waiting = this; }
    void await_resume() {}

private:
    Fabric& fab_;
    Op* op_;
    std::chrono::steady_clock::time_point deadline_, next_check_;
    std::chrono::steady_clock::time_point grace_{};  // a notice came: the wait gives up then
    uint32_t looks_ = 0;
};

}  // namespace ccl::transport
