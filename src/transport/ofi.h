// The libfabric transport. A process opens one reliable-datagram endpoint (FI_EP_RDM) and every
// communicator with ranks on other nodes shares it (with tcp;ofi_rxm an endpoint holds 64-128 MB
// of bounce buffers and opening one took half a second on a busy machine: one per communicator
// made every split and every PyTorch group pay both). Progress is driven by whoever waits (a
// blocking call or a progress worker) and, for operations nobody waits on, by one progress thread
// of the endpoint.
#pragma once

#include <optional>

#include "transport/fabric.h"

namespace ccl::transport {

class Endpoint;  // the process's endpoint (ofi.cpp)

class OfiFabric final : public Fabric {
public:
    // Joins the process's endpoint (opening it with the provider FI_PROVIDER names, libfabric's
    // variable, `tcp` when it is unset). Throws CCL_ERROR_UNSUPPORTED naming the provider and
    // what fi_getinfo said when none fits.
    OfiFabric(int rank, int size, double timeout_s);
    // The provider an endpoint would use ("tcp;ofi_rxm"), or "unavailable: <why>". Opens nothing.
    static std::string probe();
    ~OfiFabric() override;

    std::string name_hex() const override;
    std::string provider() const override;
    size_t eager_max() const override;
    void connect(const std::vector<std::string>& names_hex) override;
    // Opens every connection from the lower rank to the higher one, so that no two ranks ever
    // connect to each other at the same time later (connection-oriented providers such as
    // tcp;ofi_rxm lost messages when they did).
    void connect_all() override;

    OpRef post_send(int peer, Channel ch, const void* buf, size_t bytes) override;
    // Longer than kMaxMessage, and where the provider carries 8 bytes of CQ data and keeps sends
    // in order (FI_ORDER_SAS), a point-to-point message goes in parts: the first on Channel::p2p
    // with the number of parts beside the digest, the others on Channel::part under the first's
    // sequence number, matched in order. Its receive posts every part; when a failed receive
    // goes, the sender's parts that it did not take are received and dropped in the background.
    OpRef send_message(int peer, const void* buf, size_t bytes, uint32_t digest) override;
    OpRef post_message(int peer, void* buf, size_t bytes, uint32_t digest) override;
    OpRef post_recv(int peer, Channel ch, void* buf, size_t bytes) override;
    void notify_failure(ccl_result_t code, const std::string& what,
                        const std::vector<int>& peers) override;
    void poll(Fabric::Op&) override { progress(); }
    void nap(std::chrono::microseconds max) override;

    struct Op;

private:
    friend class Endpoint;
    Spares& spares() override;
    void cancel(const std::shared_ptr<Fabric::Op>& op) noexcept override;
    void check_failed() override;
    void idle(Fabric::Op& op, std::chrono::nanoseconds waited) override;
    // Reads the endpoint's completion queues once; true when something completed.
    bool progress();

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
    // check_failed, under the endpoint's lock (every post checks before it starts and while the
    // provider makes it wait).
    void check_failed_locked();

    std::shared_ptr<Endpoint> ep_;
    uint16_t id_ = 0;              // this communicator's id on the endpoint
    std::vector<uint64_t> addrs_;  // every rank's address in the endpoint's address vector
    std::vector<uint16_t> ids_;    // every rank's id for this communicator
    std::vector<uint64_t> send_seq_[3], recv_seq_[3];  // per channel and peer
    // The receive of a failure notice from any rank, posted by connect().
    std::shared_ptr<Op> notice_op_;
    // A peer whose connection broke (Endpoint::mark_broken), once one did; and the endpoint's
    // count of broken connections when this communicator last looked.
    int broken_peer_ = -1;
    uint64_t broken_seen_ = 0;
};

}  // namespace ccl::transport
