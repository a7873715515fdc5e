#include "transport/fabric.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "base/config.h"
#include "base/error.h"
#include "base/log.h"
#include "transport/ofi.h"
#include "transport/socket.h"

namespace ccl::transport {

Bytes Spares::take(size_t bytes) {
    if (bytes < kMin) return Bytes(bytes);
    std::lock_guard<std::mutex> lock(mu_);
    auto best = kept_.end();
    for (auto it = kept_.begin(); it != kept_.end(); ++it)
        if (it->size() >= bytes && (best == kept_.end() || it->size() < best->size())) best = it;
    if (best == kept_.end()) return Bytes(bytes);
    Bytes buf = std::move(*best);
    kept_.erase(best);
    bytes_ -= buf.size();
    return buf;
}

void Spares::give(Bytes buf) {
    if (buf.size() < kMin || buf.size() > kMax) return;
    std::lock_guard<std::mutex> lock(mu_);
    // Room for it by freeing smaller ones: a large buffer is the dearer to make again (above
    // 32 MiB malloc maps fresh pages every time).
    while (bytes_ + buf.size() > kMax) {
        auto smallest =
            std::min_element(kept_.begin(), kept_.end(),
                             [](const Bytes& a, const Bytes& b) { return a.size() < b.size(); });
        if (smallest->size() > buf.size()) return;
        bytes_ -= smallest->size();
        kept_.erase(smallest);
    }
    bytes_ += buf.size();
    kept_.push_back(std::move(buf));
}

uint16_t CommIds::take() {
    for (int i = 0; i < kCommIds; ++i) {
        const uint16_t id = next_++;
        if (!live_[id]) {
            live_[id] = true;
            return id;
        }
    }
    throw Error(CCL_ERROR_OUT_OF_MEMORY,
                "this process has " + std::to_string(kCommIds) +
                    " communicators across nodes already: destroy some first");
}

Fabric::OpRef& Fabric::OpRef::operator=(OpRef&& o) noexcept {
    if (this != &o) {
        if (op_ && fab_) fab_->cancel(op_);
        op_ = std::move(o.op_);
        fab_ = o.fab_;
    }
    return *this;
}

Fabric::OpRef::~OpRef() {
    if (op_ && fab_) fab_->cancel(op_);
}

namespace {

// CCL_TRANSPORT's choice: auto takes libfabric when FI_PROVIDER names a provider other than tcp
// (verbs, efa, cxi, psm3, opx...: real RDMA), sockets otherwise.
bool use_ofi() {
    const std::string& t = config().transport;
    if (t == "ofi") return true;
    if (t == "socket") return false;
    const char* p = std::getenv("FI_PROVIDER");
    return p && *p && std::string_view(p).substr(0, 3) != "tcp";
}

}  // namespace

std::unique_ptr<Fabric> Fabric::open(int rank, int size, double timeout_s) {
    if (size > kMaxRanks)
        throw Error(CCL_ERROR_UNSUPPORTED, "a communicator across nodes has at most " +
                                               std::to_string(kMaxRanks) + " ranks");
    std::unique_ptr<Fabric> f;
    if (use_ofi())
        f = std::make_unique<OfiFabric>(rank, size, timeout_s);
    else
        f = std::make_unique<SocketFabric>(rank, size, timeout_s);
    log().debug("rank {}: across nodes over {} (CCL_TRANSPORT={})", rank, f->provider(),
                config().transport);
    return f;
}

std::string Fabric::probe() {
    if (!use_ofi()) return SocketFabric::probe();
    const std::string p = OfiFabric::probe();
    return p.rfind("unavailable", 0) == 0 ? p : "ofi(" + p + ")";
}

void Fabric::throw_if_stopped() {
    if (aborted_.load(std::memory_order_acquire))
        throw Error(CCL_ERROR_ABORTED, "the communicator was aborted (ccl_comm_abort)");
    if (int code = remote_code_.load(std::memory_order_acquire)) {
        if (on_remote_) on_remote_(ccl_result_t(code));
        throw Error(ccl_result_t(code), remote_what_);
    }
}

void Fabric::take_notice(const void* data, size_t len) {
    Notice n{};
    std::memcpy(&n, data, std::min(sizeof(n), len));
    n.what[sizeof(n.what) - 1] = 0;
    // A peer's abort is, seen from here, a peer that gave up.
    const ccl_result_t c = n.code == CCL_ERROR_ABORTED || n.code == CCL_SUCCESS
                               ? CCL_ERROR_PEER_FAILURE
                               : ccl_result_t(n.code);
    remote_what_ = "rank " + std::to_string(n.rank) + " (on another node) failed first: " + n.what;
    remote_code_.store(c, std::memory_order_release);
}

Fabric::Done Fabric::done(const OpRef& op) { return Done(*this, op.get()); }

Fabric::Done::Done(Fabric& f, Op* op)
    : fab_(f),
      op_(op),
      deadline_(std::chrono::steady_clock::now() +
                std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                    std::chrono::duration<double>(f.timeout_s_))),
      next_check_(std::chrono::steady_clock::now() + std::chrono::milliseconds(1)) {}

bool Fabric::Done::ready() {
    uint32_t s = op_->settled();
    if (s == 0 && !fab_.aborted_.load(std::memory_order_acquire)) {
        fab_.poll(*op_);
        s = op_->settled();
    }
    if (s == 1) return true;
    if (s == 2) throw Error(op_->code, op_->error);
    // The clock on every 8th look only (each look of a socket wait is a load), and at once when
    // the communicator was aborted or notified.
    const bool notice = fab_.remote_code_.load(std::memory_order_acquire) != 0;
    const bool aborted = fab_.aborted_.load(std::memory_order_acquire);
    if ((++looks_ & 7) != 0 && !notice && !aborted) return false;
    auto now = std::chrono::steady_clock::now();
    // A notice may overtake messages sent here before it (on other connections, or from other
    // ranks: the rank that failed first may have finished the call this one waits in): what was
    // on its way gets 10 ms to land before the wait gives up.
    if (notice && !aborted) {
        if (grace_ == std::chrono::steady_clock::time_point{})
            grace_ = now + std::chrono::milliseconds(10);
        if (now < grace_) return false;
    }
    if (now >= next_check_ || notice || aborted) {
        next_check_ = now + std::chrono::milliseconds(1);
        fab_.check_failed();
        if (now > deadline_)
            throw Error(CCL_ERROR_TIMEOUT,
                        std::string("timed out after ") + std::to_string(fab_.timeout_s_) +
                            " s (CCL_TIMEOUT) waiting for a " + fab_.provider() + " " +
                            (op_->is_recv ? "message from" : "send to") + " rank " +
                            std::to_string(op_->peer) + ": it died, hangs or is not calling " +
                            "the same collective");
    }
    return false;
}

void Fabric::Done::block() {
    if (ready()) return;
    struct End {
        Fabric& f;
        Op& op;
        ~End() { f.idle_end(op); }
    } end{fab_, *op_};
    const auto start = std::chrono::steady_clock::now();
    do fab_.idle(*op_, std::chrono::steady_clock::now() - start);
    while (!ready());
}

Waiter::Sleeper Fabric::Done::sleeper() {
    return [&f = fab_](std::chrono::microseconds max) { f.nap(max); };
}

}  // namespace ccl::transport
