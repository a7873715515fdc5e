// The libfabric transport. A process opens one reliable-datagram endpoint (FI_EP_RDM) and every
// communicator with ranks on other nodes shares it (with tcp;ofi_rxm an endpoint holds 64-128 MB
// of bounce buffers and opening one took half a second on a busy machine: one per communicator
// made every split and every PyTorch group pay both). A Fabric is one communicator's view of it:
// tagged messages to and from every rank of that communicator. Endpoint names travel through the
// communicator's bootstrap; progress is driven by whoever waits (a blocking call or a progress
// worker) and, for operations nobody waits on, by one progress thread of the endpoint; every wait
// has the communicator's deadline.
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

class Endpoint;  // the process's endpoint (fabric.cpp)

class Fabric {
public:
    struct Op;
    // A posted operation. Dropping it before completion cancels a receive (its buffer may go);
    // a send keeps its data (see post_send) until the provider is done with it.
    class OpRef {
    public:
        OpRef() = default;
        explicit OpRef(std::shared_ptr<Op> op, Fabric* fabric) : op_(std::move(op)), fab_(fabric) {}
        OpRef(OpRef&&) noexcept = default;
        OpRef& operator=(OpRef&& o) noexcept;
        ~OpRef();
        Op* get() const { return op_.get(); }

    private:
        friend class Fabric;
        std::shared_ptr<Op> op_;
        Fabric* fab_ = nullptr;
    };
    class Done;  // co_await: an operation completed
    // Memory for a call's temporaries, from the buffers the process's endpoint keeps for copies
    // (fresh memory costs page faults on every call), back to them when it goes. Not zeroed.
    class Scratch {
    public:
        Scratch(Fabric& f, size_t bytes);
        Scratch(Scratch&& o) noexcept = default;
        Scratch& operator=(Scratch&&) = delete;
        ~Scratch();
        char* data() { return buf_.data(); }
        size_t size() const { return bytes_; }

    private:
        Endpoint* ep_;
        Bytes buf_;
        size_t bytes_;
    };
    Scratch scratch(size_t bytes) { return Scratch(*this, bytes); }

    // Joins the process's endpoint (opening it with the provider FI_PROVIDER names, libfabric's
    // variable, `tcp` when it is unset) as `rank` among `size` ranks. Throws
    // CCL_ERROR_UNSUPPORTED naming the provider and what fi_getinfo said when none fits.
    Fabric(int rank, int size, double timeout_s);
    // The provider an endpoint would use ("tcp;ofi_rxm"), or "unavailable: <why>". Opens nothing.
    static std::string probe();
    // Waits (at most the timeout) for this communicator's unfinished sends, then leaves the
    // endpoint (closed with its last communicator).
    ~Fabric();
    Fabric(const Fabric&) = delete;
    Fabric& operator=(const Fabric&) = delete;

    // The endpoint's address and this communicator's id on it, for the bootstrap.
    std::string name_hex() const;
    const std::string& provider() const;
    // Messages up to this size go eagerly (no rendezvous round trip before the data); 0 when the
    // provider does not tell.
    size_t eager_max() const;
    // Takes every rank's name_hex: their addresses and ids.
    void connect(const std::vector<std::string>& names_hex);
    // Collective: opens every connection from the lower rank to the higher one, so that no two
    // ranks ever connect to each other at the same time later (connection-oriented providers
    // such as tcp;ofi_rxm lost messages when they did). Blocks, with the deadline.
    void connect_all();

    int rank() const { return rank_; }
    int size() const { return size_; }

    // A message longer than this goes as several: with tcp;ofi_rxm, messages of up to 256 KiB
    // went fast and longer ones up to 2x slower (a 16 MiB ring allreduce across two nodes in parts
    // of 256 KiB + 4 B: 29 ms, of 254 KiB: 15 ms). A collective's are cut alike on both sides
    // (post_send, post_recv); a point-to-point message's as send_message says.
    static constexpr size_t kMaxMessage = (256 << 10) - 4096;

    // Posts a send of `bytes` at `buf` to `peer`; `buf` must stay valid until it completes.
    OpRef post_send(int peer, Channel ch, const void* buf, size_t bytes);
    // A point-to-point message: copied first, so the caller may reuse `buf` at once (such sends
    // never wait for their receiver), with `digest` (the call's count and datatype) as remote CQ
    // data, for the receive to check. Longer than kMaxMessage, and where the provider carries 8
    // bytes of CQ data and keeps sends in order (FI_ORDER_SAS), it goes in parts: the first on
    // Channel::p2p with the number of parts beside the digest, the others on Channel::part under
    // the first's sequence number, matched in order.
    OpRef send_message(int peer, const void* buf, size_t bytes, uint32_t digest);
    // Posts the receive of a point-to-point message of `bytes` into `buf` (every part of it). A
    // message of another length or digest fails it (CCL_ERROR_INVALID_USAGE); when the failed
    // receive goes, the sender's parts that it did not take are received and dropped in the
    // background, so that the sender's sends complete.
    OpRef post_message(int peer, void* buf, size_t bytes, uint32_t digest);
    // Posts a receive of exactly `bytes` from `peer`: a longer or a shorter message fails it
    // (counts differ between the ranks: CCL_ERROR_INVALID_USAGE).
    OpRef post_recv(int peer, Channel ch, void* buf, size_t bytes);
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
    void notify_failure(ccl_result_t code, const std::string& what, const std::vector<int>& peers);

    // Reads completions once; true when something completed.
    bool poll();
    // Sleeps until a completion may have come, at most `max` (a worker with nothing to do).
    void nap(std::chrono::microseconds max);

private:
    friend class Done;
    friend class Endpoint;
    // `buf` null: the operation's own `owned` data. `data`: remote CQ data to send with it.
    // `patience_s`: how long a provider out of resources may keep the post waiting (< 0: the
    // timeout). `seq`: the tag's sequence number (default: the channel's next for `peer`).
    OpRef send_op(int peer, Channel ch, const void* buf, size_t bytes, Bytes owned,
                  std::optional<uint64_t> data = {}, double patience_s = -1,
                  std::optional<uint64_t> seq = {});
    // Posts the receive `op` describes (peer, bytes, what it expects; the endpoint's lock held)
    // into `buf`, numbered as send_op's. Throws as post_recv.
    std::shared_ptr<Op> recv_op_locked(std::shared_ptr<Op> op, Channel ch, void* buf,
                                       std::optional<uint64_t> seq = {}, double patience_s = -1);
    // Receives and drops the next `parts` parts of the point-to-point message `seq` from `peer`
    // (the endpoint's lock held): its receive failed here.
    void drain_locked(int peer, uint64_t seq, uint64_t parts) noexcept;
    // How many parts a point-to-point message of `bytes` goes in, and part k's remote CQ data.
    size_t message_parts(size_t bytes) const;
    uint64_t message_data(uint32_t digest, size_t k, size_t parts) const;
    // The length of a message's next part, `left` bytes of it still to cut.
    static constexpr size_t kTail = size_t(32) << 10;
    static size_t next_part(size_t left);
    // One operation of a message posted in parts by `post(offset, bytes, index)`.
    using Post = std::function<OpRef(size_t, size_t, size_t)>;
    OpRef in_parts(int peer, size_t bytes, bool is_recv, const Post& post);
    void cancel(const std::shared_ptr<Op>& op) noexcept;
    void take_notice(const Op& op, size_t len);  // under the endpoint's lock
    // Throws when this communicator cannot go on, so that no wait or post outlasts a failure
    // seen anywhere: it was aborted, a rank on another node sent a failure notice, the
    // connection to one of its ranks broke, or the communicator's check (set_failure_check)
    // throws. Under the endpoint's lock; every wait looks at least every millisecond, and every
    // post before it starts and while the provider makes it wait.
    void check_failed_locked();

    std::shared_ptr<Endpoint> ep_;
    int rank_, size_;
    double timeout_s_;
    uint16_t id_ = 0;              // this communicator's id on the endpoint
    std::vector<uint64_t> addrs_;  // every rank's address in the endpoint's address vector
    std::vector<uint16_t> ids_;    // every rank's id for this communicator
    std::vector<uint64_t> send_seq_[3], recv_seq_[3];  // per channel and peer
    // The receive of a failure notice from any rank, posted by connect().
    std::shared_ptr<Op> notice_op_;
    std::atomic<int> remote_code_{0};  // a notice's code, once one came
    std::string remote_what_;          // its text (under the endpoint's lock)
    std::atomic<bool> notified_{false};
    std::function<void(ccl_result_t)> on_remote_;
    std::atomic<bool> aborted_{false};
    std::function<void()> check_;
    // A peer whose connection broke (Endpoint::mark_broken), once one did; and the endpoint's
    // count of broken connections when this communicator last looked.
    int broken_peer_ = -1;
    uint64_t broken_seen_ = 0;
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
};

}  // namespace ccl::transport
