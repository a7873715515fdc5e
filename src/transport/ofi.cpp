#include "transport/ofi.h"

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <sched.h>

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "base/error.h"
#include "base/hex.h"
#include "base/immortal.h"
#include "base/log.h"
#include "base/number.h"
#include "transport/libfabric.h"

namespace ccl::transport {

struct OfiFabric::Op : Fabric::Op {
    fi_context2 ctx;  // libfabric's per-operation context (FI_CONTEXT2 mode)
    // The receive of a failure notice (its buffer is `copy`; any length up to it). Every other
    // receive fails unless its message has exactly `bytes`.
    bool notice = false;
    // The receive of a point-to-point message (post_message): when it fails, the sender's parts
    // that no receive took are drained as it goes. `sink`: such a drained part (any length;
    // nobody waits for it). `cancelled`: cancelled before any message matched it.
    bool message = false, sink = false, cancelled = false;
    uint64_t addr = FI_ADDR_NOTAVAIL;  // the peer's address-vector entry (a notice's receive: none)
    // Cancelled by us (OfiFabric::cancel): its completion says nothing about the connection.
    bool cancelling = false;
    uint64_t seq = 0;                // the tag's sequence number
    std::optional<uint64_t> expect;  // a receive's remote CQ data, when its message must carry it
    uint64_t data = 0;           // a received message's remote CQ data (point to point: its digest)
    Bytes copy;                  // a send's own copy of its data; a notice's buffer
    fid_mr* mr = nullptr;        // the buffer's registration, when the provider needs one
    OfiFabric* owner = nullptr;  // the communicator's view; null once it is gone
    // A message sent or received as several (see Fabric::kMaxMessage): the operation is its
    // parts', done when every part is, failed when one failed.
    std::vector<std::shared_ptr<Op>> parts;

    uint32_t settled() override {
        uint32_t s = state.load(std::memory_order_acquire);
        if (s != 0 || parts.empty()) return s;
        bool pending = false;
        for (const auto& p : parts) {
            s = p->settled();
            if (s == 2) {
                code = p->code;
                error = p->error;
                state.store(2, std::memory_order_release);
                return 2;
            }
            pending = pending || s == 0;
        }
        if (pending) return 0;
        state.store(1, std::memory_order_release);
        return 1;
    }
};

namespace {

std::string fi_error(const std::string& what, int ret) {
    return what + ": " + libfabric().strerror(ret < 0 ? -ret : ret);
}

void close_fid(fid* f, const char* what) noexcept {
    if (!f) return;
    if (int r = fi_close(f); r != 0)
        log().warn("fi_close({}) failed: {}", what, libfabric().strerror(-r));
}

}  // namespace

namespace {

// FI_PROVIDER is libfabric's own: when it is set, libfabric filters the providers itself.
std::string wanted_provider() {
    const char* env = std::getenv("FI_PROVIDER");
    return env && *env ? env : "tcp";
}

// Defaults for tcp;ofi_rxm where the user set none (libfabric reads them when it loads its
// providers, at the first fi_getinfo). Measured across fake nodes (docs/multinode.md): with
// rxm's 16 KiB bounce buffers, 32 and 64 KiB messages took segmentation or rendezvous round
// trips (64 KiB allreduce ~200 us); with 64 KiB + rxm's header they go eagerly (~90 us). rxm keeps
// 2 x 1024 such buffers: a rank's resident memory grows by 50-100 MB. Its receive queue per
// connection shrinks to 32. Larger messages keep rendezvous. Eager messages land in those buffers,
// not straight in the receive's ("dynamic receive buffers"): with those, a message longer than
// its receive (ranks that disagree on a count) broke the connection for good, and a connection
// serves every communicator of the process; through rxm's buffers it is one failed receive.
void set_provider_defaults(const std::string& wanted) {
    if (wanted.find("tcp") == std::string::npos) return;
    const std::pair<const char*, const char*> defaults[] = {{"FI_OFI_RXM_BUFFER_SIZE", "65600"},
                                                            {"FI_OFI_RXM_MSG_RX_SIZE", "32"},
                                                            {"FI_OFI_RXM_ENABLE_DYN_RBUF", "0"}};
    for (const auto& [name, value] : defaults)
        if (!std::getenv(name)) {
            setenv(name, value, 0);
            log().debug("libfabric: {}={} (ccl's default for tcp)", name, value);
        }
}

// ofi_rxm sends a message eagerly when it fits one of its bounce buffers with rxm's header;
// libfabric says so nowhere else. A margin keeps clear of the header's exact size (a ring in parts
// of exactly 64 KiB ran 2-5x slower than one in parts of 63.5 KiB with 65600-byte buffers).
size_t rxm_eager_max(const std::string& provider) {
    if (provider.find("ofi_rxm") == std::string::npos) return 0;
    const char* env = std::getenv("FI_OFI_RXM_BUFFER_SIZE");
    const std::optional<uint64_t> given = env ? parse_decimal(env) : std::nullopt;
    const size_t buffer = given ? size_t(*given) : 16448;  // libfabric's default
    return buffer > 8192 ? (buffer - 1024) / 4096 * 4096 : 0;
}

// fi_freeinfo, for unique_ptr (libfabric is loaded by then: only get_info makes fi_info).
void free_info(fi_info* info) {
    if (info) libfabric().freeinfo(info);
}
using InfoPtr = std::unique_ptr<fi_info, void (*)(fi_info*)>;

// The providers that fit (free_info them); throws CCL_ERROR_UNSUPPORTED naming the provider and
// what fi_getinfo said, or why libfabric could not be loaded.
fi_info* get_info(const std::string& wanted) {
    set_provider_defaults(wanted);
    const char* env = std::getenv("FI_PROVIDER");
    const Libfabric& lib = libfabric();
    InfoPtr hints(lib.dupinfo(nullptr), free_info);  // fi_allocinfo
    if (!hints) throw Error(CCL_ERROR_OUT_OF_MEMORY, "fi_allocinfo failed");
    hints->caps = FI_TAGGED;
    hints->mode = FI_CONTEXT | FI_CONTEXT2;
    hints->ep_attr->type = FI_EP_RDM;
    // Remote CQ data carries a point-to-point message's digest beside its payload.
    hints->domain_attr->cq_data_size = 4;
    // Registration modes we can live with: we register local buffers when asked (FI_MR_LOCAL);
    // we never expose memory to remote access.
    hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR;
    hints->domain_attr->threading = FI_THREAD_DOMAIN;  // we serialise with Endpoint::mu
    if (!env || !*env) hints->fabric_attr->prov_name = strdup("tcp");  // freed by fi_freeinfo
    fi_info* found = nullptr;
    int ret = lib.getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints.get(), &found);
    if (ret != 0 || !found)
        throw Error(CCL_ERROR_UNSUPPORTED,
                    "libfabric provider '" + wanted +
                        "' offers no reliable-datagram endpoint with tagged messages "
                        "and 4 bytes of remote CQ data (FI_EP_RDM, FI_TAGGED): "
                        "fi_getinfo said " +
                        lib.strerror(ret < 0 ? -ret : ret) +
                        ". Set FI_PROVIDER to a provider this host has (fi_info lists them); "
                        "ranks on other nodes need one");
    return found;
}

}  // namespace

// The process's endpoint, shared by every communicator with ranks on other nodes: opened by the
// first (Endpoint::shared), closed with the last. Its lock serialises every libfabric call and
// the communicators' tables (sequence numbers, pending operations).
class Endpoint {
public:
    // `ranks`: a hint for the address vector's size (the first communicator is usually the
    // world; the table grows where the provider lets it).
    static std::shared_ptr<Endpoint> shared(int ranks);
    explicit Endpoint(int ranks);
    ~Endpoint();
    Endpoint(const Endpoint&) = delete;
    Endpoint& operator=(const Endpoint&) = delete;

    std::string name_hex() const;
    // The address-vector entry of the endpoint named `raw` (rank `rank` of a communicator),
    // inserted the first time only: a second entry for one peer would open a second connection.
    uint64_t address_of(const std::string& raw, int rank);
    CommIds ids;  // under mu
    // A buffer of at least `bytes` for a send's copy or a call's temporaries, and its return.
    Bytes spare(size_t bytes) { return spares.take(bytes); }
    void recycle(Bytes buf) { spares.give(std::move(buf)); }
    // Reads completions once; true when something completed.
    bool poll_locked();
    void complete_locked(void* context, ccl_result_t code, const std::string& error, size_t len,
                         uint64_t data = 0);
    // The connection to the endpoint at `addr` broke (an operation with it failed in the
    // provider): its process is gone, or unreachable, for every communicator of this process.
    // Each communicator with a rank there fails at its next look (Fabric::check_failed_locked)
    // instead of at its deadline, and posts nothing more to it.
    void mark_broken(uint64_t addr);
    bool is_broken(uint64_t addr) const { return broken.count(addr) != 0; }

    std::string provider;
    fid_domain* domain = nullptr;
    fid_ep* ep = nullptr;
    bool mr_local = false;  // the provider wants local buffers registered
    // Point-to-point messages may go in parts: 8 bytes of CQ data (the digest and the number of
    // parts) and sends matched in the order they were posted (FI_ORDER_SAS).
    bool p2p_parts = false;
    size_t inject_max = 0;  // sends up to this size go inline (fi_tinject)
    size_t eager_max = 0;   // sends up to this size go without a rendezvous (0: not known)
    std::mutex mu;          // every libfabric call, the tables below and the communicators'
    std::unordered_map<void*, std::shared_ptr<OfiFabric::Op>> pending;  // by context
    std::unordered_set<uint64_t> broken;  // addresses whose connection broke (mark_broken)
    Spares spares;
    uint64_t broken_count = 0;  // how many were ever marked

private:
    // Progress for operations nobody waits on: a send that returned at once while its rank
    // blocks in shared memory still needs the provider driven (manual progress) to go out. The
    // thread polls only when operations are pending and no waiter polled lately; it sleeps
    // otherwise.
    void progress_loop();
    void stop_progress() noexcept;
    void release() noexcept;  // closes every fabric object
    // Leaves the fabric objects open (see the definition): operations still pending at the end.
    void abandon() noexcept;

    InfoPtr info_;
    // Closed in reverse order.
    fid_fabric* fabric_ = nullptr;
    fid_cq* cq_ = nullptr;
    fid_av* av_ = nullptr;
    std::unordered_map<std::string, uint64_t> addresses_;  // by raw name
    std::atomic<int64_t> last_poll_ns_{0};
    std::mutex thread_mu_;
    std::condition_variable thread_cv_;
    bool stop_ = false;
    std::thread progress_;
};

std::string OfiFabric::probe() {
    try {
        fi_info* found = get_info(wanted_provider());
        std::string name = found->fabric_attr->prov_name ? found->fabric_attr->prov_name : "?";
        free_info(found);
        return name;
    } catch (const Error& e) {
        return std::string("unavailable: ") + e.what();
    }
}

std::shared_ptr<Endpoint> Endpoint::shared(int ranks) {
    // Never destroyed: a communicator may be destroyed by an exit handler after statics are.
    static auto* mu = &immortal<std::mutex>();
    static auto* current = &immortal<std::weak_ptr<Endpoint>>();
    std::lock_guard<std::mutex> lock(*mu);
    std::shared_ptr<Endpoint> e = current->lock();
    if (!e) {
        e = std::make_shared<Endpoint>(ranks);
        *current = e;
    }
    return e;
}

Endpoint::Endpoint(int ranks) : info_(nullptr, free_info) {
    const std::string wanted = wanted_provider();
    fi_info* found = get_info(wanted);
    // Prefer IPv4 addresses (the first entry of a kind is the provider's preferred interface).
    fi_info* pick = found;
    for (fi_info* i = found; i; i = i->next)
        if (i->addr_format == FI_SOCKADDR_IN) {
            pick = i;
            break;
        }
    info_.reset(libfabric().dupinfo(pick));
    free_info(found);
    if (!info_) throw Error(CCL_ERROR_OUT_OF_MEMORY, "fi_dupinfo failed");
    provider = info_->fabric_attr->prov_name ? info_->fabric_attr->prov_name : wanted;
    mr_local = (info_->domain_attr->mr_mode & FI_MR_LOCAL) != 0 || (info_->mode & FI_LOCAL_MR);
    inject_max = info_->tx_attr ? info_->tx_attr->inject_size : 0;
    eager_max = rxm_eager_max(provider);
    p2p_parts = info_->domain_attr->cq_data_size >= 8 && info_->tx_attr && info_->rx_attr &&
                (info_->tx_attr->msg_order & info_->rx_attr->msg_order & FI_ORDER_SAS);
    if (info_->domain_attr->cq_data_size < 4)
        throw Error(CCL_ERROR_UNSUPPORTED, "libfabric provider '" + provider + "' carries " +
                                               std::to_string(info_->domain_attr->cq_data_size) +
                                               " bytes of remote CQ data; ccl needs 4");
    auto check = [&](int r, const char* what) {
        if (r != 0)
            throw Error(CCL_ERROR_SYSTEM,
                        fi_error("libfabric provider '" + provider + "': " + what, r));
    };
    // A failing step releases what the earlier ones opened: the destructor does not run for a
    // constructor that throws, so do it here.
    try {
        check(libfabric().fabric(info_->fabric_attr, &fabric_, nullptr), "fi_fabric");
        check(fi_domain(fabric_, info_.get(), &domain, nullptr), "fi_domain");
        fi_cq_attr cq_attr{};
        cq_attr.format = FI_CQ_FORMAT_TAGGED;
        cq_attr.wait_obj = FI_WAIT_NONE;  // waits poll (see Done::block)
        check(fi_cq_open(domain, &cq_attr, &cq_, nullptr), "fi_cq_open");
        fi_av_attr av_attr{};
        av_attr.type = FI_AV_TABLE;
        av_attr.count = size_t(std::max(ranks, 64));
        check(fi_av_open(domain, &av_attr, &av_, nullptr), "fi_av_open");
        check(fi_endpoint(domain, info_.get(), &ep, nullptr), "fi_endpoint");
        check(fi_ep_bind(ep, &cq_->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind(cq)");
        check(fi_ep_bind(ep, &av_->fid, 0), "fi_ep_bind(av)");
        check(fi_enable(ep), "fi_enable");
    } catch (...) {
        release();
        throw;
    }
    progress_ = std::thread([this] { progress_loop(); });
    log().debug("libfabric endpoint open, provider {}, domain {}, inject up to {} B{}", provider,
                info_->domain_attr->name ? info_->domain_attr->name : "?", inject_max,
                mr_local ? ", registers local buffers" : "");
}

Endpoint::~Endpoint() {
    bool stuck = false;
    {
        std::lock_guard<std::mutex> lock(mu);
        stuck = !pending.empty();
    }
    if (stuck)
        abandon();
    else
        release();
}

namespace {
int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}
}  // namespace

void Endpoint::progress_loop() {
    constexpr std::chrono::microseconds kActive(500), kIdle(2000);
    std::unique_lock<std::mutex> lk(thread_mu_);
    while (!stop_) {
        bool busy = true;
        // Never block on mu: a waiter polling in a loop holds it nearly all the time, and a
        // thread queued on it turns each of the waiter's unlocks into a futex wake (a system
        // call and a context switch per poll, on the core the peer needs).
        if (now_ns() - last_poll_ns_.load(std::memory_order_relaxed) > 400000) {
            std::unique_lock<std::mutex> lock(mu, std::try_to_lock);
            if (lock.owns_lock()) {
                busy = !pending.empty();
                if (busy) poll_locked();
            }
        }
        thread_cv_.wait_for(lk, busy ? kActive : kIdle, [this] { return stop_; });
    }
}

void Endpoint::abandon() noexcept {
    // tcp;ofi_rxm (libfabric 1.17) crashed (SIGSEGV in fi_close of the endpoint) now and then
    // when operations were still queued on a connection whose peer had become unreachable (a
    // node's link cut: tests/multinode/midcoll_fault.sh). Such an endpoint stays open until the
    // process exits; nobody polls it any more, and what the provider may still refer to (the
    // operations with their buffers, its own objects) is kept reachable.
    stop_progress();
    log().warn(
        "libfabric operations still unfinished; the endpoint stays open until the process "
        "exits");
    static std::mutex kept_mu;
    static auto* kept = new std::vector<std::shared_ptr<void>>();  // never freed, on purpose
    std::lock_guard<std::mutex> lock(kept_mu);
    std::lock_guard<std::mutex> lock2(mu);
    for (auto& [ctx, op] : pending) kept->push_back(op);
    pending.clear();
    // The libfabric objects are left open, and kept reachable (a leak checker at exit would
    // report what they hold otherwise), with the fi_info they were opened from.
    for (void* f : {static_cast<void*>(ep), static_cast<void*>(av_), static_cast<void*>(cq_),
                    static_cast<void*>(domain), static_cast<void*>(fabric_),
                    static_cast<void*>(info_.release())})
        kept->push_back(std::shared_ptr<void>(f, [](void*) {}));
    ep = nullptr;
    av_ = nullptr;
    cq_ = nullptr;
    domain = nullptr;
    fabric_ = nullptr;
}

void Endpoint::stop_progress() noexcept {
    if (!progress_.joinable()) return;
    {
        std::lock_guard<std::mutex> lk(thread_mu_);
        stop_ = true;
    }
    thread_cv_.notify_all();
    progress_.join();
}

void Endpoint::release() noexcept {
    stop_progress();
    close_fid(ep ? &ep->fid : nullptr, "endpoint");
    close_fid(av_ ? &av_->fid : nullptr, "address vector");
    close_fid(cq_ ? &cq_->fid : nullptr, "completion queue");
    for (auto& [ctx, op] : pending) close_fid(op->mr ? &op->mr->fid : nullptr, "memory region");
    pending.clear();
    close_fid(domain ? &domain->fid : nullptr, "domain");
    close_fid(fabric_ ? &fabric_->fid : nullptr, "fabric");
    ep = nullptr;
    av_ = nullptr;
    cq_ = nullptr;
    domain = nullptr;
    fabric_ = nullptr;
}

std::string Endpoint::name_hex() const {
    std::vector<unsigned char> buf(256);
    size_t len = buf.size();
    int r = fi_getname(&ep->fid, buf.data(), &len);
    if (r == -FI_ETOOSMALL) {
        buf.resize(len);
        r = fi_getname(&ep->fid, buf.data(), &len);
    }
    if (r != 0) throw Error(CCL_ERROR_SYSTEM, fi_error("fi_getname", r));
    return to_hex(buf.data(), len);
}

uint64_t Endpoint::address_of(const std::string& raw, int rank) {
    if (auto it = addresses_.find(raw); it != addresses_.end()) return it->second;
    fi_addr_t a = FI_ADDR_NOTAVAIL;
    if (fi_av_insert(av_, raw.data(), 1, &a, 0, nullptr) != 1)
        throw Error(CCL_ERROR_SYSTEM, "libfabric provider '" + provider + "' refused rank " +
                                          std::to_string(rank) + "'s address (fi_av_insert)");
    addresses_.emplace(raw, a);
    return a;
}

void Endpoint::complete_locked(void* context, ccl_result_t code, const std::string& error,
                               size_t len, uint64_t data) {
    auto it = pending.find(context);
    if (it == pending.end()) return;
    std::shared_ptr<OfiFabric::Op> op = std::move(it->second);
    pending.erase(it);
    close_fid(op->mr ? &op->mr->fid : nullptr, "memory region");
    op->mr = nullptr;
    op->data = data;
    const bool checked = code == CCL_SUCCESS && op->is_recv && !op->notice && !op->sink;
    if (checked && len != op->bytes) {
        code = CCL_ERROR_INVALID_USAGE;
        op->error = "a message of " + std::to_string(len) + " bytes came from rank " +
                    std::to_string(op->peer) + " where " + std::to_string(op->bytes) +
                    " were expected: the ranks disagree on a call's count or datatype";
    } else if (checked && op->expect && data != *op->expect) {
        code = CCL_ERROR_INVALID_USAGE;
        op->error = "the message from rank " + std::to_string(op->peer) +
                    " was sent with another count or datatype than its receive expects (the "
                    "message is dropped)";
    } else if (code != CCL_SUCCESS) {
        op->error = error;
    }
    if (op->notice && op->owner && code == CCL_SUCCESS)
        op->owner->take_notice(op->copy.data(), len);
    recycle(std::move(op->copy));  // leaves it empty
    op->code = code;
    op->state.store(code == CCL_SUCCESS ? 1 : 2, std::memory_order_release);
    if (code != CCL_SUCCESS)
        log().debug("rank {}: libfabric operation with rank {} failed: {}",
                    op->owner ? op->owner->rank() : -1, op->peer, op->error);
}

void Endpoint::mark_broken(uint64_t addr) {
    if (addr == FI_ADDR_NOTAVAIL || !broken.insert(addr).second) return;
    ++broken_count;
    log().debug("libfabric: the connection to address {} broke", addr);
}

bool Endpoint::poll_locked() {
    if (!cq_) return false;
    last_poll_ns_.store(now_ns(), std::memory_order_relaxed);
    fi_cq_tagged_entry entries[16];
    bool any = false;
    for (;;) {
        ssize_t n = fi_cq_read(cq_, entries, 16);
        if (n > 0) {
            any = true;
            for (ssize_t i = 0; i < n; ++i)
                complete_locked(entries[i].op_context, CCL_SUCCESS, {}, entries[i].len,
                                (entries[i].flags & FI_REMOTE_CQ_DATA) ? entries[i].data : 0);
            continue;
        }
        if (n == -FI_EAVAIL) {
            fi_cq_err_entry err{};
            if (fi_cq_readerr(cq_, &err, 0) <= 0) return any;
            any = true;
            std::string what = fi_cq_strerror(cq_, err.prov_errno, err.err_data, nullptr, 0);
            auto it = pending.find(err.op_context);
            OfiFabric::Op* op = it == pending.end() ? nullptr : it->second.get();
            int peer = op ? op->peer : -1;
            bool recv = op && op->is_recv;
            ccl_result_t code = CCL_ERROR_PEER_FAILURE;
            std::string msg = std::string("libfabric ") + (recv ? "receive from" : "send to") +
                              " rank " + std::to_string(peer) + " failed (provider " + provider +
                              "): " + libfabric().strerror(err.err) + " (" + what + ")";
            if (err.err == FI_ETRUNC) {
                code = CCL_ERROR_INVALID_USAGE;
                msg = "a message from rank " + std::to_string(peer) +
                      " is longer than its receive: the ranks disagree on a call's count or "
                      "datatype";
            } else if (err.err == FI_ECANCELED) {
                if (op) op->cancelled = true;
                // Our own cancellations have no waiter left: the message is for the provider's,
                // when the connection to the peer broke.
                msg = std::string("libfabric cancelled the ") +
                      (recv ? "receive from" : "send to") + " rank " + std::to_string(peer) +
                      " (provider " + provider + "): its connection broke, the rank probably died";
            }
            // Any other failure of an operation with a peer is its connection's (a notice's
            // receive names no peer; our own cancellations say nothing).
            if (code == CCL_ERROR_PEER_FAILURE && op && !op->notice && !op->cancelling)
                mark_broken(op->addr);
            // A truncated message's CQ data too (rxm gives it; zero where a provider does not).
            complete_locked(err.op_context, code, msg, err.len, err.data);
            continue;
        }
        return any;  // -FI_EAGAIN, or an error of the queue itself (seen again by the deadline)
    }
}

OfiFabric::OfiFabric(int rank, int size, double timeout_s) : Fabric(rank, size, timeout_s) {
    if (size > kMaxRanks)
        throw Error(CCL_ERROR_UNSUPPORTED, "a communicator across nodes has at most " +
                                               std::to_string(kMaxRanks) + " ranks");
    ep_ = Endpoint::shared(size);
    {
        std::lock_guard<std::mutex> lock(ep_->mu);
        id_ = ep_->ids.take();
    }
    for (auto& v : send_seq_) v.assign(size_t(size), 0);
    for (auto& v : recv_seq_) v.assign(size_t(size), 0);
}

OfiFabric::~OfiFabric() {
    // Unfinished sends (point-to-point messages not received yet) get the timeout to go out,
    // unless the communicator was aborted or a wait failed.
    auto deadline = std::chrono::steady_clock::now() +
                    std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                        std::chrono::duration<double>(timeout_s_));
    // After a failure only briefly: failure notices should still go out.
    if (aborted_.load())
        deadline =
            std::min(deadline, std::chrono::steady_clock::now() + std::chrono::milliseconds(200));
    for (;;) {
        {
            std::lock_guard<std::mutex> lock(ep_->mu);
            bool sends = false;
            for (auto& [ctx, op] : ep_->pending)
                sends = sends || (op->owner == this && !op->is_recv);
            if (!sends) break;
            ep_->poll_locked();
        }
        if (std::chrono::steady_clock::now() > deadline) {
            log().warn("rank {}: libfabric sends still unfinished at destruction", rank_);
            break;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    if (notice_op_) cancel(notice_op_);
    std::lock_guard<std::mutex> lock(ep_->mu);
    // What is still pending stays with the endpoint (which keeps it open at the end).
    bool receiving = false;
    for (auto& [ctx, op] : ep_->pending)
        if (op->owner == this) {
            receiving = receiving || op->is_recv;
            op->owner = nullptr;
        }
    // An id with a receive still posted is not given out again: the receive could take a
    // message meant for the next communicator with that id.
    if (!receiving) ep_->ids.give(id_);
}

std::string OfiFabric::provider() const { return "ofi(" + ep_->provider + ")"; }

size_t OfiFabric::eager_max() const { return ep_->eager_max; }

std::string OfiFabric::name_hex() const {
    const uint8_t id[2] = {uint8_t(id_ >> 8), uint8_t(id_)};
    return ep_->name_hex() + "." + to_hex(id, sizeof(id));
}

void OfiFabric::connect(const std::vector<std::string>& names_hex) {
    if (names_hex.size() != size_t(size_))
        throw Error(CCL_ERROR_INTERNAL, "fabric connect: wrong number of endpoint names");
    addrs_.assign(size_t(size_), FI_ADDR_NOTAVAIL);
    ids_.assign(size_t(size_), 0);
    std::lock_guard<std::mutex> lock(ep_->mu);
    for (int r = 0; r < size_; ++r) {
        const std::string& name = names_hex[size_t(r)];
        const size_t dot = name.find('.');
        // "<endpoint's address>.<communicator id>", both hex (name_hex()).
        std::optional<std::string> raw, id;
        if (dot != std::string::npos) {
            raw = from_hex(std::string_view(name).substr(0, dot));
            id = from_hex(std::string_view(name).substr(dot + 1));
        }
        if (!raw || raw->empty() || !id || id->size() != 2)
            throw Error(CCL_ERROR_INTERNAL,
                        "rank " + std::to_string(r) + "'s libfabric address is malformed");
        ids_[size_t(r)] = uint16_t(uint8_t((*id)[0]) << 8 | uint8_t((*id)[1]));
        addrs_[size_t(r)] = ep_->address_of(*raw, r);
        // A rank that joins a new communicator is alive (an endpoint that opened where a broken
        // one was may have its address).
        ep_->broken.erase(addrs_[size_t(r)]);
    }
    // The failure notice from any rank: every tag of the notice channel with this id.
    notice_op_ = std::make_shared<Op>();
    Op& op = *notice_op_;
    op.is_recv = true;
    op.notice = true;
    op.peer = -1;
    op.copy.assign(sizeof(Notice), 0);
    op.bytes = op.copy.size();
    op.owner = this;
    void* desc = nullptr;
    if (ep_->mr_local) {
        int r = fi_mr_reg(ep_->domain, op.copy.data(), op.bytes, FI_RECV, 0, 0, 0, &op.mr, nullptr);
        if (r != 0) throw Error(CCL_ERROR_SYSTEM, fi_error("fi_mr_reg", r));
        desc = fi_mr_desc(op.mr);
    }
    ssize_t r =
        fi_trecv(ep_->ep, op.copy.data(), op.bytes, desc, FI_ADDR_UNSPEC,
                 make_tag(Channel::notice, id_, 0, 0), (uint64_t(1) << kTagIdShift) - 1, &op.ctx);
    if (r != 0) {
        close_fid(op.mr ? &op.mr->fid : nullptr, "memory region");
        op.mr = nullptr;
        throw Error(CCL_ERROR_SYSTEM, fi_error("fi_trecv (failure notices)", int(r)));
    }
    ep_->pending[&op.ctx] = notice_op_;
}

void OfiFabric::check_failed_locked() {
    throw_if_stopped();
    if (broken_seen_ != ep_->broken_count) {
        broken_seen_ = ep_->broken_count;
        for (int r = 0; r < int(addrs_.size()) && broken_peer_ < 0; ++r)
            if (r != rank_ && ep_->is_broken(addrs_[size_t(r)])) broken_peer_ = r;
    }
    if (broken_peer_ >= 0)
        throw Error(CCL_ERROR_PEER_FAILURE, "the libfabric connection to rank " +
                                                std::to_string(broken_peer_) +
                                                " (on another node) broke: it probably died");
    if (check_) check_();
}

void OfiFabric::connect_all() {
    std::vector<OpRef> ops;
    std::vector<char> hello(size_t(size_), 0);
    for (int p = 0; p < size_; ++p) {
        if (p < rank_) ops.push_back(post_recv(p, Channel::coll, &hello[size_t(p)], 1));
        if (p > rank_) ops.push_back(post_send(p, Channel::coll, &hello[size_t(rank_)], 1));
    }
    for (auto& op : ops) Done(*this, op.get()).block();
}

void OfiFabric::notify_failure(ccl_result_t code, const std::string& what,
                               const std::vector<int>& peers) {
    if (notified_.exchange(true) || addrs_.empty()) return;
    Notice n{};
    n.code = code;
    n.rank = rank_;
    what.copy(n.what, sizeof(n.what) - 1);
    for (int p : peers) {
        try {
            Bytes msg(sizeof(n));
            std::memcpy(msg.data(), &n, sizeof(n));
            // Briefly: a peer that cannot take it still has its own deadline.
            const size_t bytes = msg.size();  // before msg moves
            send_op(p, Channel::notice, nullptr, bytes, std::move(msg), {}, 0.05);
        } catch (const Error& e) {  // best effort: the peer's deadline still holds
            log().debug("rank {}: failure notice to rank {} not sent: {}", rank_, p, e.what());
        }
    }
}

Fabric::OpRef OfiFabric::post_send(int peer, Channel ch, const void* buf, size_t bytes) {
    if (ch != Channel::coll || bytes <= kMaxMessage) return send_op(peer, ch, buf, bytes, {});
    return in_parts(peer, bytes, false, [&](size_t off, size_t len, size_t) {
        return send_op(peer, ch, static_cast<const char*>(buf) + off, len, {});
    });
}

// Parts of kMaxMessage, and a tail between kTail and half a part in pieces of kTail: after full
// parts, a last part of 60-64 KiB made a 4 MiB message between two fake nodes take 6-8 ms
// instead of 4 (tcp;ofi_rxm); tails of 16-32 KiB cost nothing measurable, and equal parts (of
// 129-252 KiB) were slower than full ones (1 MiB: 1.4-1.5 against 0.8-0.9 ms).
size_t OfiFabric::next_part(size_t left) {
    if (left > kMaxMessage) return kMaxMessage;
    return left > kTail && left <= kMaxMessage / 2 ? kTail : left;
}

// Both sides cut a message alike (a receive has the message's exact size). A collective's parts
// take consecutive sequence numbers; a point-to-point message's share its own (send_message).
Fabric::OpRef OfiFabric::in_parts(int peer, size_t bytes, bool is_recv, const Post& post) {
    auto op = std::make_shared<Op>();
    op->is_recv = is_recv;
    op->peer = peer;
    op->bytes = bytes;
    op->owner = this;
    OpRef whole(op, this);  // cancels the parts posted so far if a later post throws
    for (size_t off = 0, len; off < bytes; off += len) {
        len = next_part(bytes - off);
        op->parts.push_back(
            std::static_pointer_cast<Op>(post(off, len, op->parts.size()).release()));
    }
    return whole;
}

size_t OfiFabric::message_parts(size_t bytes) const {
    if (!ep_->p2p_parts || bytes <= kMaxMessage) return 1;
    // As next_part cuts: full parts while more than one is left, then the tail (in kTail pieces).
    const size_t full = (bytes - 1) / kMaxMessage, tail = bytes - full * kMaxMessage;
    return full + (tail > kTail && tail <= kMaxMessage / 2 ? (tail + kTail - 1) / kTail : 1);
}

// Part k's CQ data: the digest, and k beside it (the first part: the number of parts instead), so
// that a part matched out of order fails instead of landing in the wrong place.
uint64_t OfiFabric::message_data(uint32_t digest, size_t k, size_t parts) const {
    return ep_->p2p_parts ? uint64_t(k ? k : parts) << 32 | digest : digest;
}

Fabric::OpRef OfiFabric::send_message(int peer, const void* buf, size_t bytes, uint32_t digest) {
    const size_t n = message_parts(bytes);
    std::optional<uint64_t> seq;  // the first part's, for the others
    auto post = [&](size_t off, size_t len, size_t k) {
        Bytes data;
        {
            std::lock_guard<std::mutex> lock(ep_->mu);
            data = ep_->spare(len);
        }
        if (len) std::memcpy(data.data(), static_cast<const char*>(buf) + off, len);
        OpRef op = send_op(peer, seq ? Channel::part : Channel::p2p, nullptr, len, std::move(data),
                           message_data(digest, k, n), -1, seq);
        if (!seq) seq = static_cast<Op*>(op.get())->seq;
        return op;
    };
    return n == 1 ? post(0, bytes, 0) : in_parts(peer, bytes, false, post);
}

Fabric::OpRef OfiFabric::post_message(int peer, void* buf, size_t bytes, uint32_t digest) {
    const size_t n = message_parts(bytes);
    std::optional<uint64_t> seq;
    auto post = [&](size_t off, size_t len, size_t k) {
        auto op = std::make_shared<Op>();
        op->peer = peer;
        op->bytes = len;
        op->message = n == 1;
        op->expect = message_data(digest, k, n);
        std::lock_guard<std::mutex> lock(ep_->mu);
        OpRef r(recv_op_locked(std::move(op), seq ? Channel::part : Channel::p2p,
                               static_cast<char*>(buf) + off, seq),
                this);
        if (!seq) seq = static_cast<Op*>(r.get())->seq;
        return r;
    };
    if (n == 1) return post(0, bytes, 0);
    // Every part at once: waiting for the first before posting the others made a 1 MiB message
    // between two fake nodes take 2-3.6 ms instead of 0.9. Parts beyond the sender's (counts that
    // differ) cannot take another message: the others have other numbers.
    OpRef whole = in_parts(peer, bytes, true, post);
    static_cast<Op*>(whole.get())->message = true;
    return whole;
}

void OfiFabric::drain_locked(int peer, uint64_t seq, uint64_t parts) noexcept {
    for (uint64_t k = 0; k < parts; ++k) {
        try {
            auto op = std::make_shared<Op>();
            op->peer = peer;
            op->sink = true;
            op->copy = ep_->spare(kMaxMessage);
            op->bytes = kMaxMessage;
            void* buf = op->copy.data();
            recv_op_locked(std::move(op), Channel::part, buf, seq, 0.05);
        } catch (const std::exception& e) {  // the sender's own deadline still holds
            log().debug("rank {}: part {} of a refused message from rank {} not drained: {}", rank_,
                        k, peer, e.what());
        }
    }
}

Fabric::OpRef OfiFabric::send_op(int peer, Channel ch, const void* buf, size_t bytes, Bytes owned,
                                 std::optional<uint64_t> data, double patience_s,
                                 std::optional<uint64_t> seq) {
    auto op = std::make_shared<Op>();
    op->peer = peer;
    op->bytes = bytes;
    op->owner = this;
    if (!buf) {
        op->copy = std::move(owned);
        buf = op->copy.data();
    }
    std::lock_guard<std::mutex> lock(ep_->mu);
    // A failure notice goes out whatever broke, but not to a rank whose connection broke.
    const bool notice = ch == Channel::notice;
    op->addr = addrs_[size_t(peer)];
    if (!notice) check_failed_locked();
    if (ep_->is_broken(op->addr))
        throw Error(CCL_ERROR_PEER_FAILURE, "the libfabric connection to rank " +
                                                std::to_string(peer) + " broke: it probably died");
    op->seq = seq ? *seq : send_seq_[size_t(ch)][size_t(peer)]++;
    const uint64_t tag = make_tag(ch, ids_[size_t(peer)], rank_, op->seq);
    auto deadline = std::chrono::steady_clock::now() +
                    std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                        std::chrono::duration<double>(patience_s < 0 ? timeout_s_ : patience_s));
    // A collective's small messages go inline (fi_tinject): the provider copies them and reports
    // no completion, which spares tcp;ofi_rxm a signalling read and write per message (an 8 B
    // allreduce across two fake nodes: 30 -> 25 us). Point-to-point sends keep their completions,
    // which the destructor waits for (their receiver may be late).
    const bool inject = ch == Channel::coll && bytes <= ep_->inject_max;
    void* desc = nullptr;
    if (!inject) {
        if (ep_->mr_local && bytes > 0) {
            int r = fi_mr_reg(ep_->domain, buf, bytes, FI_SEND, 0, 0, 0, &op->mr, nullptr);
            if (r != 0) throw Error(CCL_ERROR_SYSTEM, fi_error("fi_mr_reg", r));
            desc = fi_mr_desc(op->mr);
        }
        ep_->pending[&op->ctx] = op;
    }
    // The provider may be out of resources for a moment, or (re)connecting to the peer:
    // progress and try again, within the deadline and while nothing broke.
    auto give_up = [&] {
        ep_->pending.erase(&op->ctx);
        close_fid(op->mr ? &op->mr->fid : nullptr, "memory region");
    };
    for (;;) {
        const fi_addr_t to = op->addr;
        ssize_t r = inject ? fi_tinject(ep_->ep, buf, bytes, to, tag)
                    : data ? fi_tsenddata(ep_->ep, buf, bytes, desc, *data, to, tag, &op->ctx)
                           : fi_tsend(ep_->ep, buf, bytes, desc, to, tag, &op->ctx);
        if (r == 0) break;
        if (r != -FI_EAGAIN || std::chrono::steady_clock::now() > deadline) {
            give_up();
            if (r != -FI_EAGAIN) ep_->mark_broken(to);
            throw Error(r == -FI_EAGAIN ? CCL_ERROR_TIMEOUT : CCL_ERROR_PEER_FAILURE,
                        fi_error("libfabric send to rank " + std::to_string(peer), int(r)));
        }
        ep_->poll_locked();
        try {
            if (!notice) check_failed_locked();
        } catch (...) {
            give_up();
            throw;
        }
    }
    if (inject) {
        // The provider queues it: one progress pass puts it on the wire, as waiting for a send's
        // completion would.
        ep_->poll_locked();
        ep_->recycle(std::move(op->copy));
        op->state.store(1, std::memory_order_release);
    }
    return OpRef(std::move(op), this);
}

Fabric::OpRef OfiFabric::post_recv(int peer, Channel ch, void* buf, size_t bytes) {
    if (ch == Channel::coll && bytes > kMaxMessage)
        return in_parts(peer, bytes, true, [&](size_t off, size_t len, size_t) {
            return post_recv(peer, ch, static_cast<char*>(buf) + off, len);
        });
    auto op = std::make_shared<Op>();
    op->peer = peer;
    op->bytes = bytes;
    std::lock_guard<std::mutex> lock(ep_->mu);
    return OpRef(recv_op_locked(std::move(op), ch, buf), this);
}

std::shared_ptr<OfiFabric::Op> OfiFabric::recv_op_locked(std::shared_ptr<Op> op, Channel ch,
                                                         void* buf, std::optional<uint64_t> seq,
                                                         double patience_s) {
    op->is_recv = true;
    op->owner = this;
    const int peer = op->peer;
    const size_t bytes = op->bytes;
    op->addr = addrs_[size_t(peer)];
    check_failed_locked();
    op->seq = seq ? *seq : recv_seq_[size_t(ch)][size_t(peer)]++;
    const uint64_t tag = make_tag(ch, id_, peer, op->seq);
    void* desc = nullptr;
    if (ep_->mr_local && bytes > 0) {
        int r = fi_mr_reg(ep_->domain, buf, bytes, FI_RECV, 0, 0, 0, &op->mr, nullptr);
        if (r != 0) throw Error(CCL_ERROR_SYSTEM, fi_error("fi_mr_reg", r));
        desc = fi_mr_desc(op->mr);
    }
    ep_->pending[&op->ctx] = op;
    auto deadline = std::chrono::steady_clock::now() +
                    std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                        std::chrono::duration<double>(patience_s < 0 ? timeout_s_ : patience_s));
    auto give_up = [&] {
        ep_->pending.erase(&op->ctx);
        close_fid(op->mr ? &op->mr->fid : nullptr, "memory region");
    };
    for (;;) {
        // The tag names the sender: no need for directed receives (FI_DIRECTED_RECV).
        ssize_t r = fi_trecv(ep_->ep, buf, bytes, desc, FI_ADDR_UNSPEC, tag, 0, &op->ctx);
        if (r == 0) break;
        if (r != -FI_EAGAIN || std::chrono::steady_clock::now() > deadline) {
            give_up();
            throw Error(r == -FI_EAGAIN ? CCL_ERROR_TIMEOUT : CCL_ERROR_PEER_FAILURE,
                        fi_error("libfabric receive from rank " + std::to_string(peer), int(r)));
        }
        ep_->poll_locked();
        try {
            check_failed_locked();
        } catch (...) {
            give_up();
            throw;
        }
    }
    return op;
}

void OfiFabric::cancel(const std::shared_ptr<Fabric::Op>& base) noexcept {
    const auto op = std::static_pointer_cast<Op>(base);
    // Nothing to do for a completed receive (a message in parts: every part completed; when one
    // failed, the others may still be open; a point-to-point message that failed: drain).
    const int state = op->state.load(std::memory_order_acquire);
    if (!op->is_recv || state == 1 || (op->parts.empty() && state != 0 && !op->message)) return;
    // A receive whose waiter gave up (a failure elsewhere): its buffer is about to go, so the
    // provider must not write into it any more. Cancel it (every part of it), then wait briefly,
    // once for all of them, for the cancellations to complete.
    std::lock_guard<std::mutex> lock(ep_->mu);
    if (!ep_->ep) return;
    std::vector<Op*> open;
    auto cancel_one = [&](Op* o) {
        if (o->state.load() != 0) return;
        o->cancelling = true;
        fi_cancel(&ep_->ep->fid, &o->ctx);
        open.push_back(o);
    };
    if (op->parts.empty()) cancel_one(op.get());
    for (const auto& p : op->parts) cancel_one(p.get());
    auto pending = [&] {
        return std::any_of(open.begin(), open.end(), [](Op* o) { return o->state.load() == 0; });
    };
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
    while (pending() && std::chrono::steady_clock::now() < deadline) ep_->poll_locked();
    if (pending())
        log().warn("rank {}: a cancelled libfabric receive from rank {} did not complete", rank_,
                   op->peer);
    if (!op->message) return;
    // A point-to-point message that failed (its sender's count or datatype differs): the
    // sender's parts that no receive took (its first part says how many it sent) would wait for
    // one forever, and so would the sender's sends.
    op->message = false;
    const Op& first = op->parts.empty() ? *op : *op->parts[0];
    const uint64_t sent = first.cancelled ? 0 : first.data >> 32;
    uint64_t taken = 1;  // the first
    for (size_t k = 1; k < op->parts.size(); ++k) taken += op->parts[k]->cancelled ? 0 : 1;
    if (sent > taken) drain_locked(op->peer, first.seq, sent - taken);
}

bool OfiFabric::progress() {
    std::lock_guard<std::mutex> lock(ep_->mu);
    return ep_->poll_locked();
}

void OfiFabric::nap(std::chrono::microseconds max) {
    progress();
    std::this_thread::sleep_for(std::min(max, std::chrono::microseconds(100)));
}

void OfiFabric::idle(Fabric::Op& op, std::chrono::nanoseconds waited) {
    // Poll the queue briefly (a message is often on its way), then poll and yield the core
    // (others may need it: oversubscription is normal), then poll between short sleeps. Polling
    // is what moves the data (manual progress); tcp;ofi_rxm's wait object (fi_cq_sread) did not
    // wake on incoming data, so it is not used.
    // A large transfer moves only while both sides poll: sleeping then stalls the stream, so the
    // yielding phase lasts as long as the data could take at 100 MB/s (84 ms for 8 MiB).
    const auto yield_for = std::chrono::milliseconds(5) + std::chrono::microseconds(op.bytes / 100);
    if (waited < std::chrono::microseconds(50)) return;
    if (waited < yield_for)
        sched_yield();
    else
        std::this_thread::sleep_for(std::chrono::microseconds(100));
}

void OfiFabric::check_failed() {
    std::lock_guard<std::mutex> lock(ep_->mu);
    check_failed_locked();
}

Spares& OfiFabric::spares() { return ep_->spares; }

}  // namespace ccl::transport
