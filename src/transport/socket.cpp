#include "transport/socket.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <thread>
#include <unordered_map>

#include "base/config.h"
#include "base/error.h"
#include "base/hex.h"
#include "base/immortal.h"
#include "base/log.h"
#include "base/mac.h"
#include "base/wait.h"

namespace ccl::transport {

namespace {

using Op = SocketFabric::Op;

constexpr char kMagic[8] = {'c', 'c', 'l', '-', 's', 'c', 'k', '1'};
constexpr size_t kKeyBytes = 16, kNonceBytes = 16;
// The raw name of an endpoint: its IPv4 address, port (network order) and key.
constexpr size_t kRawBytes = 4 + 2 + kKeyBytes;
// Messages from this length on are striped over every stream of their peer.
constexpr size_t kStripeMin = size_t(256) << 10;
// The longest piece of a message in one frame (its length is 32 bits).
constexpr size_t kMaxPiece = size_t(1) << 30;
// A connection's read buffer, for headers and small messages; longer bodies are read straight
// into their destination.
constexpr size_t kBuffer = size_t(64) << 10;
// The most connections a process takes from one other process (CCL_SOCKET_STREAMS of its).
constexpr int kMaxStreams = 16;

struct Frame {
    uint64_t tag;
    uint64_t total;   // the message's length
    uint64_t offset;  // this piece's place in it
    uint32_t len;     // this piece's length
    uint32_t digest;  // a point-to-point message's count and datatype
};
static_assert(sizeof(Frame) == 32);

Channel channel_of(uint64_t tag) { return Channel(tag >> 62); }
uint16_t id_of(uint64_t tag) { return uint16_t(tag >> kTagIdShift); }

std::string_view view(const void* p, size_t n) { return {static_cast<const char*>(p), n}; }

// Whole reads and writes of a blocking socket; false on end of stream or an error (errno says).
bool write_all(int fd, const void* p, size_t n) {
    const char* c = static_cast<const char*>(p);
    while (n > 0) {
        ssize_t r = ::send(fd, c, n, MSG_NOSIGNAL);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        c += r;
        n -= size_t(r);
    }
    return true;
}

bool read_all(int fd, void* p, size_t n) {
    char* c = static_cast<char*>(p);
    while (n > 0) {
        ssize_t r = ::recv(fd, c, n, MSG_WAITALL);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            if (r == 0) errno = 0;  // the end of the stream
            return false;
        }
        c += r;
        n -= size_t(r);
    }
    return true;
}

void set_timeout(int fd, double seconds) {
    timeval tv{};
    tv.tv_sec = time_t(seconds);
    tv.tv_usec = suseconds_t((seconds - double(tv.tv_sec)) * 1e6);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

void tune(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// The interface to listen on: CCL_SOCKET_IFNAME, else the first up, non-loopback IPv4 one, else
// loopback. Its name and address.
std::pair<std::string, in_addr> pick_interface() {
    const std::string& want = config().socket_ifname;
    ifaddrs* list = nullptr;
    if (getifaddrs(&list) != 0) throw_errno("getifaddrs");
    std::pair<std::string, in_addr> found{"", {}}, loopback{"", {}};
    for (ifaddrs* i = list; i; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP)) continue;
        const in_addr a = reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr;
        if (!want.empty()) {
            if (want == i->ifa_name) {
                found = {i->ifa_name, a};
                break;
            }
        } else if (i->ifa_flags & IFF_LOOPBACK) {
            if (loopback.first.empty()) loopback = {i->ifa_name, a};
        } else if (found.first.empty()) {
            found = {i->ifa_name, a};
        }
    }
    freeifaddrs(list);
    if (found.first.empty() && want.empty()) found = loopback;
    if (found.first.empty())
        throw Error(CCL_ERROR_UNSUPPORTED,
                    want.empty()
                        ? std::string("the socket transport found no IPv4 interface that is up")
                        : "CCL_SOCKET_IFNAME=" + want +
                              ": no such interface with an IPv4 address that is up");
    return found;
}

std::string gone(int rank) {
    return "the socket connection with rank " + std::to_string(rank) +
           " (on another node) is closed: it died, or left";
}

std::string address_text(in_addr a) {
    char text[INET_ADDRSTRLEN] = "?";
    inet_ntop(AF_INET, &a, text, sizeof text);
    return text;
}

}  // namespace

// The process's endpoint, shared by every communicator with ranks on other nodes: opened by the
// first, closed with the last. Its lock guards the tables (receives, arrived messages, the
// communicators) and the operations' counters; each stream has its own for its queue.
class SocketEndpoint {
public:
    static std::shared_ptr<SocketEndpoint> shared();
    SocketEndpoint();
    ~SocketEndpoint();
    SocketEndpoint(const SocketEndpoint&) = delete;
    SocketEndpoint& operator=(const SocketEndpoint&) = delete;

    const std::string& raw() const { return raw_; }
    // The process named `raw`: its index, made the first time.
    int process_of(const std::string& raw);
    // Opens the streams to `process` where they are not open yet; throws at the deadline.
    void open_streams(int process, double timeout_s);
    bool failed(int process) {
        std::lock_guard<std::mutex> lock(mu);
        return procs_[size_t(process)]->failed;
    }
    // How many connections ever broke: a communicator looks for its own only when this moved.
    std::atomic<uint64_t> broken_count{0};
    uint16_t take_id(SocketFabric* f);
    void give_id(uint16_t id);

    // Sends the message `op` describes (tag, bytes) from `data`.
    void send(const std::shared_ptr<Op>& op, const char* data, uint32_t digest);
    // Posts the receive `op` describes (tag, bytes, buf): matched with what arrived, or waits.
    void post(const std::shared_ptr<Op>& op);
    // Takes `op` back: nothing writes into its buffer (or reads from it) once this returns.
    void cancel(const std::shared_ptr<Op>& op) noexcept;

    std::mutex mu;
    Spares spares;
    std::atomic<uint32_t> events{0};  // bumped by every completion: nap sleeps on it
    std::atomic<int> nappers{0};

private:
    struct Item {  // a piece of a send, queued on a stream
        std::shared_ptr<Op> op;
        Frame frame;
        const char* data;
        size_t done = 0;  // bytes of frame and data written so far
    };
    struct Stream {
        int fd = -1;
        std::mutex mu;
        std::condition_variable cv;
        std::deque<Item> queue;  // the front is being written while `busy`
        bool busy = false, stop = false;
        std::thread helper;
    };

public:
    struct Incoming;
    struct Process {
        int index = 0;  // in procs_
        std::string raw;
        sockaddr_in addr{};
        uint8_t key[kKeyBytes] = {};
        std::vector<std::unique_ptr<Stream>> streams;
        std::mutex open_mu;   // one opener at a time
        bool broken = false;  // no operation with it goes on (under mu)
        bool failed = false;  // its connection broke (under mu)
        size_t next = 0;      // the stream for its next message (under mu)
        // Its connections to this endpoint, once their handshakes passed (added under mu, read
        // without it by waiters).
        std::atomic<Incoming*> in[kMaxStreams] = {};
        std::atomic<int> n_in{0};
        // Its connections whose handshakes passed and that have not ended (under mu): it left
        // once the last ended between frames (what it sent before on another is still read).
        int live_in = 0;
    };
    // A connection from another process. Whoever reads it holds `read`: its helper thread, or a
    // thread waiting for a receive from that process, which reads what has come from its own
    // wait (no thread hop between the kernel and the waiter). The helper keeps out of the way
    // while waiters come (`waiters`, `activity`): parked on `park` until none came for a
    // millisecond or one hands the connection back (`duty`: it is going to sleep).
    struct Incoming {
        int fd = -1;
        std::atomic<int> process{-1};  // once its handshake passed
        std::thread helper;
        std::mutex read;
        // The reading state, under `read`: buffered bytes [lo, hi), the frame being read (its
        // header once `in_body`), how much of its body came and where it goes (null: dropped;
        // `op`: the receive whose buffer it is, which counts this reader among its writers).
        Bytes buf = Bytes(kBuffer);
        size_t lo = 0, hi = 0;
        Frame f{};
        bool in_body = false;
        size_t got = 0;
        char* to = nullptr;
        std::shared_ptr<Op> op;
        Bytes notice;
        std::atomic<bool> ended{false};  // it ended, or broke (marked so)
        std::atomic<uint32_t> waiters{0}, activity{0}, park{0};
        std::atomic<bool> parked{false}, duty{false};
    };
    // Reads what the connection `in` brought and delivers it: with `block`, at least one whole
    // frame, waiting for it; else as much as came without waiting. False once it ended (then
    // every operation with its process failed, or will). Under in.read.
    bool pump(Incoming& in, bool block);
    // Reads what came on the connections from receive `op`'s process that no other thread is
    // reading now.
    void read_for(Op& op);
    // The waiter of `op` reads those connections for a while: their helpers keep out of its way.
    void join(Op& op);
    // The waiter of `op` stops reading; `sleep`: it goes to sleep, and the helpers take over at
    // once.
    void stop_pumping(Op& op, bool sleep);
    // The helpers of `in`, of every connection from `p`, or of all go back to reading at once.
    void hand_back(Incoming& in);
    void hand_back(Process& p);
    void wake_helpers();
    std::atomic<int> parked{0};  // helpers parked now

private:
    // A message of a tag: its receive, what arrived of it, or both.
    struct Slot {
        std::shared_ptr<Op> op;  // its receive, once posted
        uint64_t total = 0;      // its length, from its first frame (or the receive's)
        uint64_t arrived = 0;
        bool seen = false;    // a frame of it came
        bool direct = false;  // its bytes go straight into op->buf
        bool drop = false;    // its bytes are dropped (its receive failed or went)
        uint32_t digest = 0;
        Bytes held;  // its bytes, when they came before its receive
    };
    void accept_loop();
    void read_loop(Incoming* in);
    // The handshake's two sides; false (and a warning) when the other side failed it.
    bool prove(int fd, const Process& to, uint16_t stream);
    int check(int fd);  // the connecting process, or -1
    void send_loop(Process& p, Stream& s);
    // Writes as much of `it` as the socket takes (blocking or not); true when it is all written,
    // false with errno when the connection failed (EAGAIN: not blocking and full).
    static bool write_item(int fd, Item& it, bool block);
    // A piece of a send went (or failed): its operation completes with its last piece.
    void piece_done(Item& it, bool ok);
    // The connection with `process` ended: every operation with it fails from now on. `failure`:
    // it broke (an error, or its end within a message), and every communicator with a rank
    // there fails at its next look; else the process closed it between messages (it left, or
    // died), and only what waits for it fails.
    void mark_broken(int process, const std::string& why, bool failure = true);
    // Every piece of slot `s`'s message came (its receive may be posted): completes the receive,
    // copying a held message out (without the lock, which `lock` holds again on return), or
    // keeps the message until its receive comes, or drops it.
    void finish(std::unique_lock<std::mutex>& lock, uint64_t tag, Slot& s);
    // Fails `op` with what its slot's first frame said disagrees with it, if it does.
    bool mismatch_locked(Op& op, uint64_t total, uint32_t digest);
    void bump();

    std::string raw_;  // this endpoint's name
    int listen_fd_ = -1;
    std::atomic<bool> stopping_{false};
    std::thread acceptor_;
    std::vector<std::unique_ptr<Process>> procs_;                                // under mu
    std::unordered_map<std::string, int> by_raw_;                                // under mu
    std::unordered_map<uint64_t, Slot> slots_;                                   // by tag, under mu
    std::vector<SocketFabric*> fabrics_ = std::vector<SocketFabric*>(kCommIds);  // by id
    CommIds ids_;                                                                // under mu
    std::mutex in_mu_;
    std::vector<std::unique_ptr<Incoming>> incoming_;  // under in_mu_
};

struct SocketFabric::Op : Fabric::Op {
    char* buf = nullptr;   // a receive's buffer
    bool message = false;  // a point-to-point receive: its message must carry `digest`
    uint32_t digest = 0;
    uint64_t tag = 0;
    int process = -1;                         // the peer's process on the endpoint
    SocketEndpoint::Process* proc = nullptr;  // and that process (a receive's, once posted)
    Bytes copy;                               // a send's own copy of its data (`owned`)
    bool owned = false;  // a send that reads only `copy`: it goes on when its OpRef goes
    int chunks = 0;      // a send's pieces still to go (under the endpoint's lock)
    int writers = 0;     // readers writing into `buf` now (under the endpoint's lock)
    int pumping = 0;     // the connections its waiter joined (join), by the waiter
    std::atomic<uint32_t> sleeping{0};  // a waiter sleeps on `state`
};

namespace {

void complete(Op& op, uint32_t state, ccl_result_t code = CCL_SUCCESS, std::string error = {}) {
    if (op.state.load(std::memory_order_relaxed) != 0) return;
    if (state == 2) {
        op.code = code;
        op.error = std::move(error);
    }
    // Dekker with the waiter (idle): it sets `sleeping`, then looks at `state` before it sleeps.
    op.state.store(state, std::memory_order_seq_cst);
    if (op.sleeping.load(std::memory_order_seq_cst)) futex_wake_all(&op.state);
}

}  // namespace

std::shared_ptr<SocketEndpoint> SocketEndpoint::shared() {
    // Never destroyed: a communicator may be destroyed by an exit handler after statics are.
    static auto* mu = &immortal<std::mutex>();
    static auto* current = &immortal<std::weak_ptr<SocketEndpoint>>();
    std::lock_guard<std::mutex> lock(*mu);
    std::shared_ptr<SocketEndpoint> e = current->lock();
    if (!e) {
        e = std::make_shared<SocketEndpoint>();
        *current = e;
    }
    return e;
}

SocketEndpoint::SocketEndpoint() {
    const auto [ifname, addr] = pick_interface();
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listen_fd_ < 0) throw_errno("socket transport: socket");
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr = addr;
    socklen_t len = sizeof sa;
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 ||
        ::listen(listen_fd_, 128) != 0 ||
        getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
        const int err = errno;
        ::close(listen_fd_);
        throw_errno("socket transport: listening on " + ifname + " " + address_text(addr), err);
    }
    uint8_t key[kKeyBytes];
    fill_random(key, sizeof key, "the socket transport's key");
    raw_.resize(kRawBytes);
    std::memcpy(raw_.data(), &sa.sin_addr, 4);
    std::memcpy(raw_.data() + 4, &sa.sin_port, 2);
    std::memcpy(raw_.data() + 6, key, sizeof key);
    acceptor_ = std::thread([this] { accept_loop(); });
    log().debug("socket transport: listening on {} {}:{}", ifname, address_text(sa.sin_addr),
                ntohs(sa.sin_port));
}

SocketEndpoint::~SocketEndpoint() {
    stopping_.store(true);
    ::shutdown(listen_fd_, SHUT_RDWR);
    if (acceptor_.joinable()) acceptor_.join();
    ::close(listen_fd_);
    // Streams: what is queued goes out (the communicators' destructors waited for their sends;
    // what they gave up on is cut off), then each connection is closed for writing, so that its
    // reader on the other side sees the end after every frame.
    std::vector<Process*> procs;
    {
        std::lock_guard<std::mutex> lock(mu);
        for (auto& p : procs_) procs.push_back(p.get());
    }
    for (Process* p : procs)
        for (auto& s : p->streams) {
            {
                std::lock_guard<std::mutex> lock(s->mu);
                s->stop = true;
                if (!s->queue.empty()) ::shutdown(s->fd, SHUT_RDWR);
            }
            s->cv.notify_all();
            if (s->helper.joinable()) s->helper.join();
            ::shutdown(s->fd, SHUT_WR);
            ::close(s->fd);
        }
    std::vector<std::unique_ptr<Incoming>> in;
    {
        std::lock_guard<std::mutex> lock(in_mu_);
        in.swap(incoming_);
    }
    for (auto& i : in) {
        ::shutdown(i->fd, SHUT_RDWR);
        hand_back(*i);  // a parked helper reads the end now
        if (i->helper.joinable()) i->helper.join();
        ::close(i->fd);
    }
}

int SocketEndpoint::process_of(const std::string& raw) {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = by_raw_.find(raw); it != by_raw_.end()) return it->second;
    auto p = std::make_unique<Process>();
    p->index = int(procs_.size());
    p->raw = raw;
    p->addr.sin_family = AF_INET;
    std::memcpy(&p->addr.sin_addr, raw.data(), 4);
    std::memcpy(&p->addr.sin_port, raw.data() + 4, 2);
    std::memcpy(p->key, raw.data() + 6, kKeyBytes);
    procs_.push_back(std::move(p));
    const int index = int(procs_.size()) - 1;
    by_raw_.emplace(raw, index);
    return index;
}

uint16_t SocketEndpoint::take_id(SocketFabric* f) {
    std::lock_guard<std::mutex> lock(mu);
    const uint16_t id = ids_.take();
    fabrics_[id] = f;
    return id;
}

void SocketEndpoint::give_id(uint16_t id) {
    std::lock_guard<std::mutex> lock(mu);
    fabrics_[id] = nullptr;
    ids_.give(id);
    // What came for it and was never received goes with it.
    for (auto it = slots_.begin(); it != slots_.end();)
        if (id_of(it->first) == id && !it->second.op && it->second.arrived == it->second.total &&
            it->second.seen)
            it = slots_.erase(it);
        else
            ++it;
}

void SocketEndpoint::bump() {
    events.fetch_add(1, std::memory_order_seq_cst);
    if (nappers.load(std::memory_order_seq_cst)) futex_wake_all(&events);
}

// --- the handshake ---------------------------------------------------------------------------

bool SocketEndpoint::prove(int fd, const Process& to, uint16_t stream) {
    uint8_t mine[kNonceBytes], theirs[kNonceBytes];
    fill_random(mine, sizeof mine, "a socket connection's nonce");
    char hello[sizeof kMagic + kNonceBytes];
    std::memcpy(hello, kMagic, sizeof kMagic);
    std::memcpy(hello + sizeof kMagic, mine, sizeof mine);
    Mac proof{};
    if (!write_all(fd, hello, sizeof hello) || !read_all(fd, theirs, sizeof theirs) ||
        !read_all(fd, proof.data(), proof.size()))
        return false;
    const Mac expected =
        hmac_sha256(to.key, kKeyBytes, {"ccl-socket listener", view(mine, 16), view(theirs, 16)});
    if (!equal_constant_time(proof.data(), expected.data(), proof.size())) {
        log().warn(
            "socket transport: the process listening at {}:{} does not hold the key its "
            "name carries (a stranger on its port?): not connecting",
            address_text(to.addr.sin_addr), ntohs(to.addr.sin_port));
        errno = EACCES;
        return false;
    }
    const uint8_t st[2] = {uint8_t(stream >> 8), uint8_t(stream)};
    const Mac answer =
        hmac_sha256(to.key, kKeyBytes,
                    {"ccl-socket connector", view(mine, 16), view(theirs, 16), raw_, view(st, 2)});
    return write_all(fd, raw_.data(), raw_.size()) && write_all(fd, st, 2) &&
           write_all(fd, answer.data(), answer.size());
}

int SocketEndpoint::check(int fd) {
    char hello[sizeof kMagic + kNonceBytes];
    if (!read_all(fd, hello, sizeof hello)) return -1;
    if (std::memcmp(hello, kMagic, sizeof kMagic) != 0) {
        log().warn(
            "socket transport: a connection that is not ccl's (or another version's) was "
            "refused");
        return -1;
    }
    const uint8_t* theirs = reinterpret_cast<const uint8_t*>(hello + sizeof kMagic);
    uint8_t mine[kNonceBytes];
    fill_random(mine, sizeof mine, "a socket connection's nonce");
    const uint8_t* key = reinterpret_cast<const uint8_t*>(raw_.data() + 6);
    const Mac proof =
        hmac_sha256(key, kKeyBytes, {"ccl-socket listener", view(theirs, 16), view(mine, 16)});
    std::string raw(kRawBytes, '\0');
    uint8_t st[2];
    Mac answer{};
    if (!write_all(fd, mine, sizeof mine) || !write_all(fd, proof.data(), proof.size()) ||
        !read_all(fd, raw.data(), raw.size()) || !read_all(fd, st, 2) ||
        !read_all(fd, answer.data(), answer.size()))
        return -1;
    const Mac expected =
        hmac_sha256(key, kKeyBytes,
                    {"ccl-socket connector", view(theirs, 16), view(mine, 16), raw, view(st, 2)});
    if (!equal_constant_time(answer.data(), expected.data(), answer.size())) {
        log().warn("socket transport: a connection without this endpoint's key was refused");
        return -1;
    }
    return process_of(raw);
}

// --- connections ---------------------------------------------------------------------------

void SocketEndpoint::open_streams(int process, double timeout_s) {
    Process* p;
    {
        std::lock_guard<std::mutex> lock(mu);
        p = procs_[size_t(process)].get();
    }
    std::lock_guard<std::mutex> opening(p->open_mu);
    if (!p->streams.empty()) return;
    const int n = config().socket_streams;
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                              std::chrono::duration<double>(timeout_s));
    const std::string where =
        address_text(p->addr.sin_addr) + ":" + std::to_string(ntohs(p->addr.sin_port));
    std::vector<std::unique_ptr<Stream>> streams;
    for (int k = 0; k < n; ++k) {
        int fd = -1;
        for (int attempt = 0;; ++attempt) {
            fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
            if (fd < 0) throw_errno("socket transport: socket");
            tune(fd);
            set_timeout(fd, std::min(10.0, std::max(1.0, timeout_s)));
            if (::connect(fd, reinterpret_cast<const sockaddr*>(&p->addr), sizeof p->addr) == 0 &&
                prove(fd, *p, uint16_t(k)))
                break;
            const int err = errno;
            ::close(fd);
            // Refused or reset: its listener may not be up yet (it is, once its name was
            // published; a busy machine may still be slow to accept). A failed proof is final.
            if (err == EACCES || std::chrono::steady_clock::now() > deadline) {
                for (auto& s : streams) ::close(s->fd);
                throw Error(
                    err == EACCES ? CCL_ERROR_PEER_FAILURE : CCL_ERROR_TIMEOUT,
                    "socket transport: could not connect to " + where + ": " + std::strerror(err));
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(std::min(100, 1 << attempt)));
        }
        set_timeout(fd, 0);  // the helper blocks for as long as the sends take
        auto s = std::make_unique<Stream>();
        s->fd = fd;
        streams.push_back(std::move(s));
    }
    for (auto& s : streams) s->helper = std::thread([this, p, s = s.get()] { send_loop(*p, *s); });
    std::lock_guard<std::mutex> lock(mu);
    p->streams = std::move(streams);
    log().debug("socket transport: {} streams to {}", n, where);
}

void SocketEndpoint::accept_loop() {
    for (;;) {
        const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (stopping_.load()) {
            if (fd >= 0) ::close(fd);
            return;
        }
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE || errno == ENFILE ||
                errno == ENOBUFS || errno == ENOMEM) {
                if (errno != EINTR && errno != ECONNABORTED)
                    std::this_thread::sleep_for(std::chrono::milliseconds(10));
                continue;
            }
            log().warn("socket transport: accept failed: {}", std::strerror(errno));
            return;
        }
        tune(fd);
        auto in = std::make_unique<Incoming>();
        in->fd = fd;
        Incoming* raw = in.get();
        std::lock_guard<std::mutex> lock(in_mu_);
        if (stopping_.load()) {
            ::close(fd);
            return;
        }
        in->helper = std::thread([this, raw] { read_loop(raw); });
        incoming_.push_back(std::move(in));
    }
}

// --- sending -------------------------------------------------------------------------------

bool SocketEndpoint::write_item(int fd, Item& it, bool block) {
    const size_t total = sizeof(Frame) + it.frame.len;
    while (it.done < total) {
        iovec iov[2];
        int n = 0;
        if (it.done < sizeof(Frame)) {
            iov[n++] = {reinterpret_cast<char*>(&it.frame) + it.done, sizeof(Frame) - it.done};
            if (it.frame.len) iov[n++] = {const_cast<char*>(it.data), it.frame.len};
        } else {
            const size_t off = it.done - sizeof(Frame);
            iov[n++] = {const_cast<char*>(it.data) + off, it.frame.len - off};
        }
        msghdr m{};
        m.msg_iov = iov;
        m.msg_iovlen = size_t(n);
        ssize_t r = ::sendmsg(fd, &m, MSG_NOSIGNAL | (block ? 0 : MSG_DONTWAIT));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return false;
        it.done += size_t(r);
    }
    return true;
}

void SocketEndpoint::piece_done(Item& it, bool ok) {
    bool last;
    {
        std::lock_guard<std::mutex> lock(mu);
        last = --it.op->chunks == 0;
        if (!ok && it.op->state.load() == 0)
            complete(*it.op, 2, CCL_ERROR_PEER_FAILURE,
                     "the socket connection to rank " + std::to_string(it.op->peer) +
                         " broke while sending to it: it probably died");
        if (last && it.op->state.load() == 0) {
            complete(*it.op, 1);
            spares.give(std::move(it.op->copy));
        }
    }
    if (last || !ok) bump();
}

void SocketEndpoint::send(const std::shared_ptr<Op>& op, const char* data, uint32_t digest) {
    Process* p;
    std::vector<Stream*> streams;
    size_t first;
    {
        std::lock_guard<std::mutex> lock(mu);
        p = procs_[size_t(op->process)].get();
        if (p->broken || p->streams.empty()) throw Error(CCL_ERROR_PEER_FAILURE, gone(op->peer));
        for (auto& s : p->streams) streams.push_back(s.get());
        first = p->next++ % streams.size();
    }
    const size_t n = op->bytes >= kStripeMin ? streams.size() : 1;
    // Pieces of whole 4 KiB pages, the last one shorter, none longer than a frame can say
    // (kMaxPiece: more pieces than streams then, round robin).
    const size_t piece =
        std::min(kMaxPiece, n == 1 ? op->bytes : (op->bytes / n + 4095) / 4096 * 4096);
    std::vector<Item> items;
    for (size_t off = 0; items.empty() || off < op->bytes; off += piece) {
        Item it;
        it.op = op;
        it.data = data + off;
        const size_t len = std::min(piece, op->bytes - off);
        it.frame = {op->tag, op->bytes, off, uint32_t(len), digest};
        items.push_back(std::move(it));
    }
    {
        std::lock_guard<std::mutex> lock(mu);
        op->chunks = int(items.size());
    }
    for (size_t k = 0; k < items.size(); ++k) {
        Stream& s = *streams[(first + k) % streams.size()];
        std::unique_lock<std::mutex> lock(s.mu);
        Item& it = items[k];
        // An idle stream: written from here, as far as the socket takes it without waiting.
        if (s.queue.empty() && !s.busy) {
            if (write_item(s.fd, it, false)) {
                lock.unlock();
                piece_done(it, true);
                continue;
            }
            if (errno != EAGAIN && errno != EWOULDBLOCK) {
                lock.unlock();
                piece_done(it, false);
                mark_broken(op->process, std::string("send: ") + std::strerror(errno));
                continue;
            }
        }
        s.queue.push_back(std::move(it));
        lock.unlock();
        s.cv.notify_one();
    }
}

void SocketEndpoint::send_loop(Process& p, Stream& s) {
    std::unique_lock<std::mutex> lock(s.mu);
    for (;;) {
        s.cv.wait(lock, [&] { return s.stop || !s.queue.empty(); });
        if (s.queue.empty()) return;  // stopping, and nothing left to send
        Item& it = s.queue.front();
        s.busy = true;
        lock.unlock();
        const bool ok = write_item(s.fd, it, true);
        const int err = errno;
        lock.lock();  // cancel looks at the front's operation under it
        Item done = std::move(it);
        s.queue.pop_front();
        s.busy = false;
        lock.unlock();
        piece_done(done, ok);
        if (!ok) {
            mark_broken(p.index, std::string("send: ") + std::strerror(err));
            // What is queued behind it fails too.
            lock.lock();
            while (!s.queue.empty()) {
                Item rest = std::move(s.queue.front());
                s.queue.pop_front();
                lock.unlock();
                piece_done(rest, false);
                lock.lock();
            }
            continue;
        }
        lock.lock();
    }
}

// --- receiving -----------------------------------------------------------------------------

bool SocketEndpoint::mismatch_locked(Op& op, uint64_t total, uint32_t digest) {
    if (total != op.bytes) {
        complete(op, 2, CCL_ERROR_INVALID_USAGE,
                 "a message of " + std::to_string(total) + " bytes came from rank " +
                     std::to_string(op.peer) + " where " + std::to_string(op.bytes) +
                     " were expected: the ranks disagree on a call's count or datatype");
        return true;
    }
    if (op.message && digest != op.digest) {
        complete(op, 2, CCL_ERROR_INVALID_USAGE,
                 "the message from rank " + std::to_string(op.peer) +
                     " was sent with another count or datatype than its receive expects (the "
                     "message is dropped)");
        return true;
    }
    return false;
}

void SocketEndpoint::post(const std::shared_ptr<Op>& op) {
    std::unique_lock<std::mutex> lock(mu);
    op->proc = procs_[size_t(op->process)].get();
    auto found = slots_.find(op->tag);
    // A message that came before its sender left is still received; nothing else comes.
    if (procs_[size_t(op->process)]->broken &&
        (found == slots_.end() || found->second.arrived < found->second.total ||
         !found->second.seen))
        throw Error(CCL_ERROR_PEER_FAILURE, gone(op->peer));
    Slot& s = found != slots_.end() ? found->second : slots_[op->tag];
    if (!s.seen) {  // nothing came yet: its bytes will go straight into the buffer
        s.op = op;
        s.direct = true;
        s.total = op->bytes;
        return;
    }
    if (mismatch_locked(*op, s.total, s.digest)) {
        if (s.arrived == s.total)
            slots_.erase(op->tag);
        else
            s.drop = true;
        return;
    }
    s.op = op;
    if (s.arrived == s.total) finish(lock, op->tag, s);  // else its last piece delivers it
}

void SocketEndpoint::finish(std::unique_lock<std::mutex>& lock, uint64_t tag, Slot& s) {
    std::shared_ptr<Op> op = s.op;
    if (s.drop) {
        slots_.erase(tag);
        return;
    }
    if (!op) return;  // kept until its receive comes
    Bytes held = std::move(s.held);
    const bool copy = !s.direct;
    slots_.erase(tag);
    if (copy) {  // it came before its receive: copied out without the lock (it may be long)
        ++op->writers;
        lock.unlock();
        if (op->bytes) std::memcpy(op->buf, held.data(), op->bytes);
        lock.lock();
        --op->writers;
        spares.give(std::move(held));
    }
    complete(*op, 1);
    bump();
}

void SocketEndpoint::read_loop(Incoming* in) {
    set_timeout(in->fd, 10);
    const int process = check(in->fd);
    set_timeout(in->fd, 0);
    if (process < 0) return;  // said why (or the endpoint is closing)
    in->process.store(process);
    {
        std::lock_guard<std::mutex> lock(mu);
        Process& p = *procs_[size_t(process)];
        ++p.live_in;
        const int k = p.n_in.load();
        if (k < kMaxStreams) {  // a process with more streams than that: read by helpers only
            p.in[k].store(in);
            p.n_in.store(k + 1);
        }
    }
    uint32_t seen = in->activity.load();
    while (!in->ended.load()) {
        // Out of the waiters' way while they come: parked until a millisecond passed without
        // one, or one hands the connection back.
        const uint32_t now = in->activity.load(std::memory_order_seq_cst);
        if (!in->duty.exchange(false) && (now != seen || in->waiters.load() > 0)) {
            seen = now;
            const uint32_t word = in->park.load(std::memory_order_seq_cst);
            in->parked.store(true, std::memory_order_seq_cst);
            parked.fetch_add(1, std::memory_order_seq_cst);
            if (!in->duty.load(std::memory_order_seq_cst) && !stopping_.load())
                futex_wait(&in->park, word, std::chrono::milliseconds(1));
            parked.fetch_sub(1, std::memory_order_seq_cst);
            in->parked.store(false, std::memory_order_seq_cst);
            continue;
        }
        seen = now;
        std::lock_guard<std::mutex> lock(in->read);
        pump(*in, true);
    }
}

bool SocketEndpoint::pump(Incoming& in, bool block) {
    if (in.ended.load(std::memory_order_relaxed)) return false;
    const int flags = block ? 0 : MSG_DONTWAIT;
    // The connection ended (r == 0), failed (r < 0, errno says) or brought a frame that makes no
    // sense (r > 0, `within` says): between two frames, its process left.
    auto end = [&](ssize_t r, const char* within) {
        const bool left = r == 0 && !in.in_body && in.hi == in.lo;
        const std::string why = r < 0  ? std::strerror(errno)
                                : left ? "it closed its connection"
                                       : within;
        in.ended.store(true);
        bool last;
        {
            std::lock_guard<std::mutex> lock(mu);
            if (in.op) --in.op->writers;
            last = --procs_[size_t(in.process.load())]->live_in == 0;
        }
        in.op.reset();
        if (!stopping_.load() && (last || !left)) mark_broken(in.process.load(), why, !left);
        return false;
    };
    for (;;) {
        if (!in.in_body) {  // a header
            while (in.hi - in.lo < sizeof(Frame)) {
                if (in.lo > 0) {
                    std::memmove(in.buf.data(), in.buf.data() + in.lo, in.hi - in.lo);
                    in.hi -= in.lo;
                    in.lo = 0;
                }
                const ssize_t r = ::recv(in.fd, in.buf.data() + in.hi, kBuffer - in.hi, flags);
                if (r > 0) {
                    in.hi += size_t(r);
                    continue;
                }
                if (r < 0 && errno == EINTR) continue;
                if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
                return end(r, "it closed its connection within a frame");
            }
            std::memcpy(&in.f, in.buf.data() + in.lo, sizeof(Frame));
            in.lo += sizeof(Frame);
            const Frame& f = in.f;
            if (f.offset > f.total || f.len > f.total - f.offset ||
                (channel_of(f.tag) == Channel::notice && f.len > kBuffer)) {
                return end(1, "it sent a malformed frame");
            }
            in.in_body = true;
            in.got = 0;
            in.to = nullptr;
            if (channel_of(f.tag) == Channel::notice) {
                in.notice.resize(f.len);
                in.to = in.notice.data();
            } else {
                std::lock_guard<std::mutex> lock(mu);
                Slot& s = slots_[f.tag];
                if (!s.seen) {
                    s.seen = true;
                    s.digest = f.digest;
                    if (s.op && mismatch_locked(*s.op, f.total, f.digest)) {
                        s.op.reset();
                        s.direct = false;
                        s.drop = true;
                    }
                    s.total = f.total;
                    if (!s.direct && !s.drop) s.held = spares.take(f.total);
                }
                // A held buffer stays where it is while its slot lives: the slot goes only with
                // its last piece, which this reader or another delivers after writing.
                if (s.direct && !s.drop) {
                    in.op = s.op;
                    ++in.op->writers;
                    in.to = in.op->buf + f.offset;
                } else if (!s.drop) {
                    in.to = s.held.data() + f.offset;
                }  // else its bytes are read and dropped (to stays null)
            }
        }
        while (in.got < in.f.len) {  // its body
            const size_t take = std::min<size_t>(in.f.len - in.got, in.hi - in.lo);
            if (take) {
                if (in.to) std::memcpy(in.to + in.got, in.buf.data() + in.lo, take);
                in.lo += take;
                in.got += take;
                continue;
            }
            const size_t rest = in.f.len - in.got;
            ssize_t r;
            if (in.to && rest >= kBuffer / 2) {
                r = ::recv(in.fd, in.to + in.got, rest, block ? MSG_WAITALL : MSG_DONTWAIT);
                if (r > 0) in.got += size_t(r);
            } else {
                in.lo = in.hi = 0;
                r = ::recv(in.fd, in.buf.data(), kBuffer, flags);
                if (r > 0) in.hi = size_t(r);
            }
            if (r > 0 || (r < 0 && errno == EINTR)) continue;
            if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
            return end(r, "it closed its connection within a message");
        }
        // The frame is in.
        in.in_body = false;
        const Frame& f = in.f;
        if (channel_of(f.tag) == Channel::notice) {
            Notice n{};
            std::memcpy(&n, in.notice.data(), std::min(sizeof n, in.notice.size()));
            {
                std::lock_guard<std::mutex> lock(mu);
                if (SocketFabric* fab = fabrics_[id_of(f.tag)]) fab->take_notice(&n, sizeof n);
            }
            bump();
        } else {
            std::unique_lock<std::mutex> lock(mu);
            if (in.op) --in.op->writers;
            in.op.reset();
            auto it = slots_.find(f.tag);
            if (it != slots_.end()) {
                Slot& s = it->second;
                s.arrived += f.len;
                if (s.arrived == s.total) finish(lock, f.tag, s);
            }
        }
        // Blocking: one frame, and what else the buffer holds whole.
        if (block && in.hi - in.lo < sizeof(Frame)) return true;
    }
}

void SocketEndpoint::join(Op& op) {
    Process& p = *op.proc;
    op.pumping = p.n_in.load(std::memory_order_acquire);
    for (int k = 0; k < op.pumping; ++k) {
        Incoming& in = *p.in[k].load(std::memory_order_relaxed);
        in.waiters.fetch_add(1, std::memory_order_seq_cst);
        in.activity.fetch_add(1, std::memory_order_seq_cst);
    }
}

void SocketEndpoint::read_for(Op& op) {
    Process& p = *op.proc;
    const int n = p.n_in.load(std::memory_order_acquire);
    for (int k = 0; k < n && op.state.load(std::memory_order_acquire) == 0; ++k) {
        Incoming& in = *p.in[k].load(std::memory_order_relaxed);
        if (in.ended.load(std::memory_order_relaxed) || !in.read.try_lock()) continue;
        pump(in, false);
        in.read.unlock();
    }
}

void SocketEndpoint::stop_pumping(Op& op, bool sleep) {
    for (int k = 0; k < op.pumping; ++k) {
        Incoming& in = *op.proc->in[k].load(std::memory_order_relaxed);
        in.activity.fetch_add(1, std::memory_order_seq_cst);
        in.waiters.fetch_sub(1, std::memory_order_seq_cst);
    }
    if (sleep && op.pumping) hand_back(*op.proc);
    op.pumping = 0;
}

void SocketEndpoint::hand_back(Incoming& in) {
    // Dekker with the helper's parking: it sets `parked`, then looks at `duty`.
    in.duty.store(true, std::memory_order_seq_cst);
    if (in.parked.load(std::memory_order_seq_cst)) {
        in.park.fetch_add(1, std::memory_order_seq_cst);
        futex_wake_all(&in.park);
    }
}

void SocketEndpoint::hand_back(Process& p) {
    const int n = p.n_in.load(std::memory_order_acquire);
    for (int k = 0; k < n; ++k) hand_back(*p.in[k].load(std::memory_order_relaxed));
}

void SocketEndpoint::wake_helpers() {
    std::lock_guard<std::mutex> lock(in_mu_);
    for (auto& in : incoming_) hand_back(*in);
}

void SocketEndpoint::mark_broken(int process, const std::string& why, bool failure) {
    {
        std::lock_guard<std::mutex> lock(mu);
        Process& p = *procs_[size_t(process)];
        if (failure && !p.failed) {
            p.failed = true;
            broken_count.fetch_add(1);
        }
        if (p.broken) return;
        p.broken = true;
        log().debug("socket transport: the connection with {}:{} broke ({})",
                    address_text(p.addr.sin_addr), ntohs(p.addr.sin_port), why);
        // Every receive from it fails now, not at its deadline.
        for (auto it = slots_.begin(); it != slots_.end();) {
            Slot& s = it->second;
            if (s.op && s.op->process == process) {
                complete(*s.op, 2, CCL_ERROR_PEER_FAILURE, gone(s.op->peer) + " (" + why + ")");
                if (s.op->writers == 0 && !s.seen) {
                    it = slots_.erase(it);
                    continue;
                }
                s.op.reset();
                s.direct = false;
                s.drop = true;
            }
            ++it;
        }
    }
    bump();
}

void SocketEndpoint::cancel(const std::shared_ptr<Op>& op) noexcept {
    if (!op->is_recv) {
        // A send that still reads the caller's buffer (it has no copy of its own): take its
        // queued pieces back; one being written stops with its connection.
        // Its pieces, not its state, say whether it still reads: a send that failed on one
        // stream may still have pieces queued on another.
        if (op->owned) return;
        std::vector<Stream*> streams;
        auto pieces = [&] {
            std::lock_guard<std::mutex> lock(mu);
            return op->chunks;
        };
        {
            std::lock_guard<std::mutex> lock(mu);
            if (op->chunks == 0) return;
            for (auto& s : procs_[size_t(op->process)]->streams) streams.push_back(s.get());
        }
        for (Stream* s : streams) {
            std::vector<Item> taken;
            {
                std::lock_guard<std::mutex> lock(s->mu);
                for (auto it = s->queue.begin(); it != s->queue.end();) {
                    const bool writing = s->busy && it == s->queue.begin();
                    if (it->op == op && writing) ::shutdown(s->fd, SHUT_RDWR);
                    if (it->op == op && !writing) {
                        taken.push_back(std::move(*it));
                        it = s->queue.erase(it);
                    } else {
                        ++it;
                    }
                }
            }
            for (Item& it : taken) piece_done(it, false);
        }
        // The piece being written stops with its connection (shut down above).
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (pieces() > 0 && std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(std::chrono::microseconds(100));
        if (pieces() > 0)
            log().warn(
                "socket transport: a send to rank {} given up is still being written 5 s "
                "after its connection was shut down",
                op->peer);
        return;
    }
    std::unique_lock<std::mutex> lock(mu);
    auto it = slots_.find(op->tag);
    if (it != slots_.end() && it->second.op == op) {
        Slot& s = it->second;
        s.op.reset();
        if (!s.seen)
            slots_.erase(it);
        else {
            s.direct = false;
            s.drop = true;
        }
    }
    // A reader still writing into its buffer: wait briefly (it is reading what is already
    // coming), then cut the connections from that process (a link that went down mid-message
    // would keep the reader in the kernel for ever; the communicator failed already).
    const auto patience = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
    bool cut = false;
    if (op->writers > 0) hand_back(*op->proc);  // its reader may be a parked helper
    while (op->writers > 0) {
        lock.unlock();
        std::this_thread::sleep_for(std::chrono::microseconds(50));
        lock.lock();
        if (!cut && op->writers > 0 && std::chrono::steady_clock::now() > patience) {
            cut = true;
            log().warn(
                "socket transport: a receive from rank {} given up in the middle of its "
                "message; closing the connections from its process",
                op->peer);
            std::lock_guard<std::mutex> l(in_mu_);
            for (auto& in : incoming_)
                if (in->process.load() == op->process) ::shutdown(in->fd, SHUT_RD);
        }
    }
    if (op->state.load() == 0) complete(*op, 2, CCL_ERROR_ABORTED, "the receive was cancelled");
}

// --- SocketFabric --------------------------------------------------------------------------

std::string SocketFabric::probe() {
    try {
        const auto [ifname, addr] = pick_interface();
        return "socket (" + ifname + " " + address_text(addr) + ", " +
               std::to_string(config().socket_streams) + " streams per peer)";
    } catch (const Error& e) {
        return std::string("unavailable: ") + e.what();
    }
}

SocketFabric::SocketFabric(int rank, int size, double timeout_s)
    : Fabric(rank, size, timeout_s), ep_(SocketEndpoint::shared()) {
    id_ = ep_->take_id(this);
    for (auto& v : send_seq_) v.assign(size_t(size), 0);
    for (auto& v : recv_seq_) v.assign(size_t(size), 0);
}

SocketFabric::~SocketFabric() {
    // Unfinished sends get the timeout to go out (after a failure only briefly: failure notices
    // should still go out).
    auto deadline = std::chrono::steady_clock::now() +
                    std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                        std::chrono::duration<double>(aborted_.load() ? 0.2 : timeout_s_));
    for (auto& w : unfinished_) {
        std::shared_ptr<Fabric::Op> op = w.lock();
        while (op && op->state.load() == 0 && std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(std::chrono::microseconds(100));
        if (op && op->state.load() == 0) {
            log().warn("rank {}: socket sends still unfinished at destruction", rank_);
            break;
        }
    }
    ep_->give_id(id_);
}

std::string SocketFabric::name_hex() const {
    const uint8_t id[2] = {uint8_t(id_ >> 8), uint8_t(id_)};
    return to_hex(reinterpret_cast<const uint8_t*>(ep_->raw().data()), ep_->raw().size()) + "." +
           to_hex(id, sizeof id);
}

void SocketFabric::connect(const std::vector<std::string>& names_hex) {
    if (names_hex.size() != size_t(size_))
        throw Error(CCL_ERROR_INTERNAL, "fabric connect: wrong number of endpoint names");
    peers_.assign(size_t(size_), -1);
    ids_.assign(size_t(size_), 0);
    for (int r = 0; r < size_; ++r) {
        const std::string& name = names_hex[size_t(r)];
        const size_t dot = name.find('.');
        std::optional<std::string> raw, id;
        if (dot != std::string::npos) {
            raw = from_hex(std::string_view(name).substr(0, dot));
            id = from_hex(std::string_view(name).substr(dot + 1));
        }
        if (!raw || raw->size() != kRawBytes || !id || id->size() != 2)
            throw Error(CCL_ERROR_INTERNAL, "rank " + std::to_string(r) +
                                                "'s socket address is malformed (do all ranks "
                                                "use the same CCL_TRANSPORT?)");
        ids_[size_t(r)] = uint16_t(uint8_t((*id)[0]) << 8 | uint8_t((*id)[1]));
        if (r != rank_) peers_[size_t(r)] = ep_->process_of(*raw);
    }
}

void SocketFabric::connect_all() {
    for (int p = 0; p < size_; ++p)
        if (p != rank_) ep_->open_streams(peers_[size_t(p)], timeout_s_);
    std::vector<OpRef> ops;
    std::vector<char> hello(size_t(size_), 0);
    for (int p = 0; p < size_; ++p)
        if (p != rank_) {
            ops.push_back(post_recv(p, Channel::coll, &hello[size_t(p)], 1));
            ops.push_back(post_send(p, Channel::coll, &hello[size_t(rank_)], 1));
        }
    for (auto& op : ops) Done(*this, op.get()).block();
}

void SocketFabric::check_peer(int peer) const {
    if (ep_->failed(peers_[size_t(peer)]))
        throw Error(CCL_ERROR_PEER_FAILURE, "the socket connection to rank " +
                                                std::to_string(peer) +
                                                " (on another node) broke: it probably died");
}

void SocketFabric::check_failed() {
    if (aborted_.load(std::memory_order_acquire) || remote_code_.load(std::memory_order_acquire)) {
        std::lock_guard<std::mutex> lock(ep_->mu);  // remote_what_
        throw_if_stopped();
    }
    const uint64_t broken = ep_->broken_count.load(std::memory_order_acquire);
    if (broken != broken_seen_.exchange(broken))
        for (int r = 0; r < int(peers_.size()); ++r)
            if (r != rank_ && ep_->failed(peers_[size_t(r)])) {
                int none = -1;
                broken_peer_.compare_exchange_strong(none, r);
            }
    if (const int r = broken_peer_.load(); r >= 0) check_peer(r);
    if (check_) check_();
}

Fabric::OpRef SocketFabric::send(int peer, Channel ch, const void* buf, size_t bytes, Bytes owned,
                                 uint32_t digest) {
    if (ch != Channel::notice) check_failed();
    if (peer == rank_ || peers_.empty())
        throw Error(CCL_ERROR_INTERNAL, "socket transport: a send to rank " + std::to_string(peer) +
                                            " of a communicator that cannot reach it");
    auto op = std::make_shared<Op>();
    op->peer = peer;
    op->bytes = bytes;
    op->process = peers_[size_t(peer)];
    const bool own = !buf;
    if (own) {
        op->owned = true;
        op->copy = std::move(owned);
        buf = op->copy.data();
    }
    op->tag = make_tag(ch, ids_[size_t(peer)], rank_, send_seq_[size_t(ch)][size_t(peer)]++);
    ep_->send(op, static_cast<const char*>(buf), digest);
    if (op->state.load(std::memory_order_acquire) == 0) {
        if (unfinished_.size() >= 64)
            std::erase_if(unfinished_, [](const std::weak_ptr<Fabric::Op>& w) {
                auto o = w.lock();
                return !o || o->state.load() != 0;
            });
        unfinished_.push_back(op);
    }
    return OpRef(std::move(op), this);
}

Fabric::OpRef SocketFabric::recv(int peer, Channel ch, void* buf, size_t bytes, bool message,
                                 uint32_t digest) {
    check_failed();
    if (peer == rank_ || peers_.empty())
        throw Error(CCL_ERROR_INTERNAL, "socket transport: a receive from rank " +
                                            std::to_string(peer) +
                                            " of a communicator that cannot reach it");
    auto op = std::make_shared<Op>();
    op->is_recv = true;
    op->peer = peer;
    op->bytes = bytes;
    op->buf = static_cast<char*>(buf);
    op->message = message;
    op->digest = digest;
    op->process = peers_[size_t(peer)];
    op->tag = make_tag(ch, id_, peer, recv_seq_[size_t(ch)][size_t(peer)]++);
    ep_->post(op);
    return OpRef(std::move(op), this);
}

Fabric::OpRef SocketFabric::post_send(int peer, Channel ch, const void* buf, size_t bytes) {
    return send(peer, ch, buf, bytes, {}, 0);
}

Fabric::OpRef SocketFabric::send_message(int peer, const void* buf, size_t bytes, uint32_t digest) {
    Bytes copy = ep_->spares.take(bytes);
    if (bytes) std::memcpy(copy.data(), buf, bytes);
    return send(peer, Channel::p2p, nullptr, bytes, std::move(copy), digest);
}

Fabric::OpRef SocketFabric::post_message(int peer, void* buf, size_t bytes, uint32_t digest) {
    return recv(peer, Channel::p2p, buf, bytes, true, digest);
}

Fabric::OpRef SocketFabric::post_recv(int peer, Channel ch, void* buf, size_t bytes) {
    return recv(peer, ch, buf, bytes, false, 0);
}

void SocketFabric::notify_failure(ccl_result_t code, const std::string& what,
                                  const std::vector<int>& peers) {
    if (notified_.exchange(true) || peers_.empty()) return;
    Notice n{};
    n.code = code;
    n.rank = rank_;
    what.copy(n.what, sizeof(n.what) - 1);
    for (int p : peers) {
        try {
            Bytes msg(sizeof n);
            std::memcpy(msg.data(), &n, sizeof n);
            send(p, Channel::notice, nullptr, sizeof n, std::move(msg), 0);
        } catch (const Error& e) {  // best effort: the peer's deadline still holds
            log().debug("rank {}: failure notice to rank {} not sent: {}", rank_, p, e.what());
        }
    }
}

void SocketFabric::cancel(const std::shared_ptr<Fabric::Op>& op) noexcept {
    ep_->cancel(std::static_pointer_cast<Op>(op));
}

Spares& SocketFabric::spares() { return ep_->spares; }

void SocketFabric::poll(Fabric::Op& base) {
    Op& op = static_cast<Op&>(base);
    if (op.is_recv && op.proc) ep_->read_for(op);
}

void SocketFabric::idle(Fabric::Op& base, std::chrono::nanoseconds waited) {
    // For 100 us: this thread reads the connections from the peer's process (poll: no thread
    // hop between the kernel and it; their helpers stay parked), yielding the core between looks
    // (the peer's rank or a helper may need it: spinning for 20-100 us made an 8 B allreduce
    // across two fake nodes of a 2-core machine take 21-27 us instead of 11-13). Then the
    // helpers read, and this thread sleeps on the operation's word until it completes, at most a
    // millisecond at a time.
    Op& op = static_cast<Op&>(base);
    if (waited < std::chrono::microseconds(100)) {
        if (op.is_recv && op.proc && op.pumping == 0) ep_->join(op);
        sched_yield();
        return;
    }
    if (op.pumping) ep_->stop_pumping(op, true);
    op.sleeping.store(1, std::memory_order_seq_cst);
    if (op.state.load(std::memory_order_seq_cst) == 0)
        futex_wait(&op.state, 0, std::chrono::milliseconds(1));
}

void SocketFabric::idle_end(Fabric::Op& base) {
    Op& op = static_cast<Op&>(base);
    if (op.pumping) ep_->stop_pumping(op, false);
}

void SocketFabric::nap(std::chrono::microseconds max) {
    // A worker with nothing to do: nobody reads for it but the helpers.
    if (ep_->parked.load(std::memory_order_relaxed) > 0) ep_->wake_helpers();
    const uint32_t seen = ep_->events.load(std::memory_order_seq_cst);
    ep_->nappers.fetch_add(1, std::memory_order_seq_cst);
    futex_wait(&ep_->events, seen,
               std::min<std::chrono::nanoseconds>(max, std::chrono::milliseconds(1)));
    ep_->nappers.fetch_sub(1, std::memory_order_seq_cst);
}

}  // namespace ccl::transport
