// The socket transport: TCP between the processes of different nodes, for networks without RDMA
// (where libfabric's tcp;ofi_rxm cut every long message into 252 KiB rendezvous and read its
// completions with a poll() system call per look).
//
// A process opens one endpoint: a listening socket and a random 128-bit key, both in its name,
// which travels through the communicator's (authenticated) bootstrap. To send to another process
// it opens CCL_SOCKET_STREAMS connections to that process's endpoint; a connection carries data
// one way only, so two processes never race to connect to each other. Each connection starts
// with a challenge-response in both directions under the listener's key (HMAC-SHA-256, fresh
// nonces each side): a stranger that connects learns nothing and gets nothing in; a replayed
// handshake fails. Data frames are not authenticated (docs/reliability.md).
//
// A frame is a 32-byte header (tag, the message's length, this piece's offset and length, and a
// point-to-point message's digest) and its bytes. A message goes on one stream, or striped over
// all of them when it is long. The sender writes from the caller's thread when the stream is
// idle (a small message costs one system call and no thread hop) and leaves the rest to the
// stream's helper thread, which blocks in the kernel; on the other side a helper thread per
// connection reads headers and reads each message's bytes straight into its receive's buffer when
// the receive is posted (else into a buffer kept until it is). Waits look at a word and sleep on
// a futex: no lock, no system call per look. A connection that breaks (its process died) fails
// every operation with that process at once.
#pragma once

#include "transport/fabric.h"

namespace ccl::transport {

class SocketEndpoint;  // the process's endpoint (socket.cpp)

class SocketFabric final : public Fabric {
public:
    SocketFabric(int rank, int size, double timeout_s);
    // What an endpoint would listen on ("socket (eth0 10.0.0.1, 2 streams per peer)"), or
    // "unavailable: <why>". Opens nothing.
    static std::string probe();
    ~SocketFabric() override;

    std::string name_hex() const override;
    std::string provider() const override { return "socket"; }
    size_t eager_max() const override { return 0; }
    void connect(const std::vector<std::string>& names_hex) override;
    // Opens the connections to every other rank's process (where this process has none yet) and
    // exchanges one message with each.
    void connect_all() override;

    OpRef post_send(int peer, Channel ch, const void* buf, size_t bytes) override;
    OpRef send_message(int peer, const void* buf, size_t bytes, uint32_t digest) override;
    OpRef post_message(int peer, void* buf, size_t bytes, uint32_t digest) override;
    OpRef post_recv(int peer, Channel ch, void* buf, size_t bytes) override;
    void notify_failure(ccl_result_t code, const std::string& what,
                        const std::vector<int>& peers) override;
    // A receive's waiter reads its peer's connections itself where no helper is reading them.
    void poll(Fabric::Op& op) override;
    void nap(std::chrono::microseconds max) override;

    struct Op;

private:
    friend class SocketEndpoint;
    Spares& spares() override;
    void cancel(const std::shared_ptr<Fabric::Op>& op) noexcept override;
    void check_failed() override;
    void idle(Fabric::Op& op, std::chrono::nanoseconds waited) override;
    void idle_end(Fabric::Op& op) override;
    // `owned`: the data, when the operation keeps its own copy (buf is then ignored).
    OpRef send(int peer, Channel ch, const void* buf, size_t bytes, Bytes owned, uint32_t digest);
    OpRef recv(int peer, Channel ch, void* buf, size_t bytes, bool message, uint32_t digest);
    // Throws PEER_FAILURE when the connection with `peer`'s process broke.
    void check_peer(int peer) const;

    std::shared_ptr<SocketEndpoint> ep_;
    uint16_t id_ = 0;            // this communicator's id on the endpoint
    std::vector<int> peers_;     // every rank's process on the endpoint (-1: this one)
    std::vector<uint16_t> ids_;  // every rank's id for this communicator
    std::vector<uint64_t> send_seq_[3], recv_seq_[3];  // per channel and rank
    // A rank whose process's connection broke, once one did; the endpoint's count of broken
    // connections when this communicator last looked.
    std::atomic<int> broken_peer_{-1};
    std::atomic<uint64_t> broken_seen_{0};
    // Sends that did not complete when posted: the destructor gives them the timeout to go.
    std::vector<std::weak_ptr<Fabric::Op>> unfinished_;
};

}  // namespace ccl::transport
