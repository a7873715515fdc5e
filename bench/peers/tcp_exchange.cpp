// tcp_exchange: the floor under a small allreduce between two nodes over TCP. Two processes, one
// connection: each sends N bytes and reads the other's N bytes, call after call, with nothing
// else in the way (no library, no framing, no reduction). Three ways of waiting for the bytes:
//   block:  recv() blocks in the kernel (the reader is woken when they come);
//   spin:   recv(MSG_DONTWAIT) again and again (a system call per look, the core busy);
//   helper: a second thread blocks in recv() and hands the bytes to the caller, which yields its
//           core for up to 100 us and then sleeps on a futex (the shape of a transport whose
//           helper threads read its connections).
//
//   tcp_exchange --listen PORT                 one side: waits for the other, then follows it
//   tcp_exchange --connect ADDR:PORT [--sizes 8,4K,64K] [--time S] [--ways block,spin,helper]
// The connecting side prints "way size us-per-call", the median of 5 timed batches.
#include <arpa/inet.h>
#include <linux/futex.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

enum Way : uint32_t { block = 0, spin = 1, helper = 2 };
const char* const kWayNames[] = {"block", "spin", "helper"};

struct Plan {  // what the connecting side asks the other to do next
    uint32_t way, bytes;
    uint64_t calls;  // 0: stop
};

[[noreturn]] void die(const char* what) {
    std::fprintf(stderr, "tcp_exchange: %s: %s\n", what, std::strerror(errno));
    std::exit(1);
}

void write_all(int fd, const void* p, size_t n) {
    const char* c = static_cast<const char*>(p);
    while (n > 0) {
        const ssize_t r = ::send(fd, c, n, MSG_NOSIGNAL);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) die("send");
        c += r;
        n -= size_t(r);
    }
}

// Reads n bytes, blocking in the kernel or spinning on a non-blocking recv.
void read_all(int fd, void* p, size_t n, bool spin) {
    char* c = static_cast<char*>(p);
    while (n > 0) {
        const ssize_t r = ::recv(fd, c, n, spin ? MSG_DONTWAIT : MSG_WAITALL);
        if (r < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
        if (r <= 0) {
            if (r == 0) errno = ECONNRESET;
            die("recv");
        }
        c += r;
        n -= size_t(r);
    }
}

long futex(std::atomic<uint32_t>* w, int op, uint32_t v, const timespec* t) {
    return syscall(SYS_futex, reinterpret_cast<uint32_t*>(w), op | FUTEX_PRIVATE_FLAG, v, t,
                   nullptr, 0);
}

// The helper way: a thread reads each call's bytes and counts them in `arrived`.
struct Helper {
    int fd;
    size_t bytes;
    uint64_t calls;
    std::vector<char>* buf;
    std::atomic<uint32_t> arrived{0}, sleeping{0};
    void run() {
        for (uint64_t i = 0; i < calls; ++i) {
            read_all(fd, buf->data(), bytes, false);
            arrived.store(uint32_t(i + 1), std::memory_order_seq_cst);
            if (sleeping.load(std::memory_order_seq_cst))
                futex(&arrived, FUTEX_WAKE, INT32_MAX, nullptr);
        }
    }
    void wait_for(uint32_t n) {
        const auto start = std::chrono::steady_clock::now();
        for (;;) {
            const uint32_t a = arrived.load(std::memory_order_seq_cst);
            if (a >= n) return;
            if (std::chrono::steady_clock::now() - start < std::chrono::microseconds(100)) {
                sched_yield();
                continue;
            }
            sleeping.store(1, std::memory_order_seq_cst);
            const timespec ms{0, 1000000};
            if (arrived.load(std::memory_order_seq_cst) == a) futex(&arrived, FUTEX_WAIT, a, &ms);
            sleeping.store(0, std::memory_order_seq_cst);
        }
    }
};

// `calls` exchanges of `bytes` each way; seconds taken.
double exchange(int fd, Way way, size_t bytes, uint64_t calls) {
    std::vector<char> out(std::max<size_t>(bytes, 1), 1), in(std::max<size_t>(bytes, 1));
    const auto start = std::chrono::steady_clock::now();
    if (way == helper) {
        Helper h{fd, bytes, calls, &in};
        std::thread t([&h] { h.run(); });
        for (uint64_t i = 0; i < calls; ++i) {
            write_all(fd, out.data(), bytes);
            h.wait_for(uint32_t(i + 1));
        }
        t.join();
    } else {
        for (uint64_t i = 0; i < calls; ++i) {
            write_all(fd, out.data(), bytes);
            read_all(fd, in.data(), bytes, way == spin);
        }
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void tune(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

size_t parse_size(const std::string& s) {
    const char u = s.empty() ? 0 : s.back();
    const size_t n = std::strtoull(s.c_str(), nullptr, 10);
    return u == 'K' ? n << 10 : u == 'M' ? n << 20 : n;
}

int follow(int port) {
    const int ls = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(uint16_t(port));
    if (::bind(ls, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || ::listen(ls, 1) != 0)
        die("listen");
    const int fd = ::accept(ls, nullptr, nullptr);
    if (fd < 0) die("accept");
    tune(fd);
    for (;;) {
        Plan p{};
        read_all(fd, &p, sizeof p, false);
        if (p.calls == 0) return 0;
        exchange(fd, Way(p.way), p.bytes, p.calls);
    }
}

int lead(const std::string& where, const std::vector<size_t>& sizes, const std::vector<Way>& ways,
         double target) {
    const size_t colon = where.rfind(':');
    if (colon == std::string::npos) {
        std::fprintf(stderr, "tcp_exchange: --connect ADDR:PORT\n");
        return 2;
    }
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(uint16_t(std::atoi(where.c_str() + colon + 1)));
    if (inet_pton(AF_INET, where.substr(0, colon).c_str(), &sa.sin_addr) != 1) {
        std::fprintf(stderr, "tcp_exchange: %s is not an IPv4 address\n", where.c_str());
        return 2;
    }
    int fd = -1;
    for (int attempt = 0; attempt < 100; ++attempt) {  // the other side may not listen yet
        fd = ::socket(AF_INET, SOCK_STREAM, 0);
        if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0) break;
        ::close(fd);
        fd = -1;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (fd < 0) die("connect");
    tune(fd);
    std::printf("# tcp exchange between two processes: us per call (median of 5 batches)\n");
    std::printf("%-8s %10s %10s\n", "way", "bytes", "us");
    for (Way w : ways)
        for (size_t b : sizes) {
            auto run = [&](uint64_t calls) {
                const Plan p{w, uint32_t(b), calls};
                write_all(fd, &p, sizeof p);
                return exchange(fd, w, b, calls);
            };
            uint64_t calls = 16;  // calibrate: a batch of about target / 5
            double t = run(calls);
            while (t < target / 5 && calls < (uint64_t(1) << 30)) {
                calls *= 2;
                t = run(calls);
            }
            std::vector<double> us;
            for (int k = 0; k < 5; ++k) us.push_back(run(calls) / double(calls) * 1e6);
            std::sort(us.begin(), us.end());
            std::printf("%-8s %10zu %10.2f\n", kWayNames[w], b, us[2]);
            std::fflush(stdout);
        }
    const Plan stop{0, 0, 0};
    write_all(fd, &stop, sizeof stop);
    return 0;
}

std::vector<std::string> split(const std::string& s) {
    std::vector<std::string> v;
    std::stringstream ss(s);
    for (std::string x; std::getline(ss, x, ',');)
        if (!x.empty()) v.push_back(x);
    return v;
}

}  // namespace

int main(int argc, char** argv) {
    std::string listen, connect, sizes = "8,4K,64K", ways = "block,spin,helper";
    double target = 0.3;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string a = argv[i];
        if (a == "--listen")
            listen = argv[i + 1];
        else if (a == "--connect")
            connect = argv[i + 1];
        else if (a == "--sizes")
            sizes = argv[i + 1];
        else if (a == "--ways")
            ways = argv[i + 1];
        else if (a == "--time")
            target = std::atof(argv[i + 1]);
        else {
            std::fprintf(stderr, "tcp_exchange: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (!listen.empty()) return follow(std::atoi(listen.c_str()));
    if (connect.empty()) {
        std::fprintf(stderr,
                     "usage: tcp_exchange --listen PORT | --connect ADDR:PORT [--sizes LIST] "
                     "[--time S] [--ways block,spin,helper]\n");
        return 2;
    }
    std::vector<size_t> sz;
    for (auto& s : split(sizes)) sz.push_back(parse_size(s));
    std::vector<Way> wv;
    for (auto& w : split(ways))
        for (uint32_t k = 0; k < 3; ++k)
            if (w == kWayNames[k]) wv.push_back(Way(k));
    return lead(connect, sz, wv, target);
}
