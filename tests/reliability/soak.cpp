// Soak: many mixed calls on one communicator (every collective, point to point, random sizes,
// datatypes, reductions, roots, in place or not, blocking or not), each checked against the
// independent reference of tests/ranks/reference.h; then the process's resources must not have
// grown between the first 10% of the run and its end: resident memory, open file descriptors,
// shared-memory mappings, and the names this job holds in /dev/shm.
//
//   cclrun -n 8 build/ccl_soak                 # SOAK_OPS calls (default 3000)
//   SOAK_OPS=100000 cclrun -n 8 build/ccl_soak  # the full soak (docs/reliability.md)
//
// SOAK_SEED changes the sequence of calls (the same on every rank). Rank 0 prints the figures.
#include <dirent.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>

#include "../ranks/common.h"
#include "../ranks/reference.h"

using namespace test;

namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif

struct Usage {
    long rss_kib = 0;
    long fds = 0;
    long shm_maps = 0;   // mappings of /dev/shm files in this process
    long shm_names = 0;  // names in /dev/shm made for this job's communicator
};

long count_dir(const char* path, const std::string& prefix = "") {
    long n = 0;
    if (DIR* d = opendir(path)) {
        while (dirent* e = readdir(d))
            if (e->d_name[0] != '.' && std::string(e->d_name).rfind(prefix, 0) == 0) ++n;
        closedir(d);
    }
    return n;
}

// `shm_prefix`: the names of this job's segments start with it ("ccl-<rank 0's pid>-").
Usage sample(const std::string& shm_prefix) {
    Usage u;
    long pages = 0, resident = 0;
    std::ifstream("/proc/self/statm") >> pages >> resident;
    u.rss_kib = resident * (sysconf(_SC_PAGESIZE) / 1024);
    u.fds = count_dir("/proc/self/fd") - 1;  // less the directory being read
    std::ifstream maps("/proc/self/maps");
    for (std::string line; std::getline(maps, line);)
        if (line.find("/dev/shm/") != std::string::npos) ++u.shm_maps;
    u.shm_names = count_dir("/dev/shm", shm_prefix);
    return u;
}

long env_long(const char* name, long fallback) {
    const char* v = std::getenv(name);
    return v && *v ? std::atol(v) : fallback;
}

// A count in elements: mostly small, sometimes past the shared-memory buffer (several chunks),
// now and then zero.
size_t random_count(std::mt19937_64& rng, ccl_datatype_t t) {
    const size_t es = type_size(t);
    unsigned pick = unsigned(rng() % 100);
    size_t max_bytes = pick < 3 ? 0 : pick < 70 ? 1024 : pick < 95 ? (64u << 10) : (2u << 20);
    return max_bytes == 0 ? 0 : size_t(rng() % (max_bytes / es + 1));
}

bool run_allreduce(const Ctx& c, ccl_datatype_t t, ccl_reduction_t op, size_t count, bool in_place,
                   uint64_t seed, const How& how) {
    const std::string what = describe("allreduce", t, count, in_place, how);
    const size_t es = type_size(t);
    Guarded send(count * es), recv(count * es);
    fill(send.data(), count, t, c.rank, seed, op);
    char* out = in_place ? send.data() : recv.data();
    ccl_coll_attr_t attr = how.attr();
    REF_RUN(how, ccl_allreduce(send.data(), out, count, t, op, c.comm, &attr, reqp));
    bool ok = check_reduced(out, count, t, op, seed, c.size, 0, what) == 0;
    ok &= guard_ok(in_place ? send : recv, what);
    if (!in_place) ok &= send_intact(send.data(), count, t, c.rank, seed, op, what);
    return ok;
}

bool run_broadcast(const Ctx& c, ccl_datatype_t t, size_t count, int root, uint64_t seed,
                   const How& how) {
    const std::string what =
        describe("broadcast", t, count, true, how) + " root " + std::to_string(root);
    Guarded buf(count * type_size(t));
    if (c.rank == root) fill(buf.data(), count, t, root, seed);
    ccl_coll_attr_t attr = how.attr();
    REF_RUN(how, ccl_broadcast(buf.data(), count, t, root, c.comm, &attr, reqp));
    return check_block(buf.data(), count, t, root, seed, 0, what) == 0 && guard_ok(buf, what);
}

// A ring: send to the right, receive from the left (sends never wait for their receiver).
bool run_sendrecv(const Ctx& c, ccl_datatype_t t, size_t count, uint64_t seed) {
    const std::string what =
        "send/recv type " + std::to_string(int(t)) + " count " + std::to_string(count);
    const size_t es = type_size(t);
    Guarded send(count * es), recv(count * es);
    fill(send.data(), count, t, c.rank, seed);
    const int right = (c.rank + 1) % c.size, left = (c.rank + c.size - 1) % c.size;
    if (ccl_send(send.data(), count, t, right, c.comm, nullptr) != CCL_SUCCESS ||
        ccl_recv(recv.data(), count, t, left, c.comm, nullptr) != CCL_SUCCESS) {
        ADD_FAILURE() << what << ": " << ccl_last_error();
        return false;
    }
    return check_block(recv.data(), count, t, left, seed, 0, what) == 0 && guard_ok(recv, what);
}

// One random call, the same on every rank (the generator is seeded alike everywhere).
bool run_one(const Ctx& c, std::mt19937_64& rng, uint64_t seed) {
    const ccl_datatype_t t = kTypes[rng() % std::size(kTypes)];
    const ccl_reduction_t op = kOps[rng() % std::size(kOps)];
    const int root = int(rng() % uint64_t(c.size));
    const bool in_place = rng() % 2 == 0;
    How how;
    how.nonblocking = rng() % 4 == 0;
    const size_t count = random_count(rng, t);
    // Per-rank blocks of the gathers, scatters and all-to-alls: a share of the count.
    const size_t block = count / size_t(c.size);
    switch (rng() % 10) {
        case 0: return run_allreduce(c, t, op, count, in_place, seed, how);
        case 1: return run_broadcast(c, t, count, root, seed, how);
        case 2: return run_reduce(c, t, op, count, root, in_place, seed, how);
        case 3: return run_allgather(c, t, block, in_place, seed, how);
        case 4: {
            std::vector<size_t> counts(size_t(c.size));
            for (auto& n : counts) n = size_t(rng() % (block + 1));
            return run_allgatherv(c, t, counts, in_place, seed, how);
        }
        case 5: return run_reduce_scatter(c, t, op, block, in_place, seed, how);
        case 6: return run_alltoall(c, t, block, in_place, seed, how);
        case 7: {
            const uint64_t salt = rng();
            return run_alltoallv(
                c, t,
                [&](int from, int to) {
                    return size_t(mix(salt + uint64_t(from) * 131 + uint64_t(to)) % (block + 1));
                },
                seed, how);
        }
        case 8: {
            ccl_request_t req = nullptr;
            ccl_result_t r = ccl_barrier(c.comm, how.nonblocking ? &req : nullptr);
            if (r == CCL_SUCCESS && req) r = ccl_wait(req);
            if (req) ccl_request_free(req);
            if (r != CCL_SUCCESS) ADD_FAILURE() << "barrier: " << ccl_last_error();
            return r == CCL_SUCCESS;
        }
        default: return run_sendrecv(c, t, count, seed);
    }
}

TEST(Soak, MixedCallsStayRightAndLeakNothing) {
    const long ops = env_long("SOAK_OPS", 3000);
    const uint64_t base = uint64_t(env_long("SOAK_SEED", 1));
    const Ctx c{g_comm, g_rank, g_size};
    // The communicator's segments are named after rank 0's pid.
    int64_t pid0 = getpid();
    CCL_OK(ccl_broadcast(&pid0, 1, CCL_INT64, 0, g_comm, nullptr, nullptr));
    const std::string prefix = "ccl-" + std::to_string(pid0) + "-";
    std::mt19937_64 rng(base);
    Usage early, late;
    long wrong = 0;
    const long mark = std::max(1L, ops / 10);
    auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < ops; ++i) {
        if (!run_one(c, rng, base * 1000003 + uint64_t(i))) {
            if (++wrong >= 10) FAIL() << "stopping after 10 wrong results (op " << i << ")";
        }
        if (i + 1 == mark) early = sample(prefix);
        if (g_rank == 0 && (i + 1) % std::max(1L, ops / 10) == 0) {
            double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            std::printf("soak: %ld/%ld calls, %.1f s\n", i + 1, ops, s);
            std::fflush(stdout);
        }
    }
    CCL_OK(ccl_barrier(g_comm, nullptr));  // every rank's last receive is done
    late = sample(prefix);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(wrong, 0);
    // Every rank's figures, from rank 0 (the other ranks send theirs).
    std::vector<int64_t> mine{early.rss_kib,  late.rss_kib,  early.fds,       late.fds,
                              early.shm_maps, late.shm_maps, early.shm_names, late.shm_names};
    std::vector<int64_t> all(mine.size() * size_t(g_size));
    CCL_OK(
        ccl_allgather(mine.data(), all.data(), mine.size(), CCL_INT64, g_comm, nullptr, nullptr));
    if (g_rank == 0) {
        std::printf("soak: %ld calls on %d ranks in %.1f s (%.0f calls/s), %ld wrong\n", ops,
                    g_size, s, double(ops) / s, wrong);
        std::printf("soak: rank  RSS KiB at 10%% -> end   fds   /dev/shm maps   /dev/shm names\n");
        for (int r = 0; r < g_size; ++r) {
            const int64_t* f = all.data() + size_t(r) * mine.size();
            std::printf(
                "soak: %4d  %8lld -> %8lld   %2lld -> %2lld   %3lld -> %3lld   %2lld -> %2lld\n", r,
                (long long)f[0], (long long)f[1], (long long)f[2], (long long)f[3], (long long)f[4],
                (long long)f[5], (long long)f[6], (long long)f[7]);
        }
        std::fflush(stdout);
    }
    // Stable: memory may move by allocator noise (8 MiB or 10%), the rest not at all (a
    // point-to-point data segment may be swapped for a larger one, one at a time per peer).
    // Under AddressSanitizer freed memory sits in its quarantine (up to 256 MiB), so resident
    // memory grows with every allocation until then: there its leak checker stands in.
    if (!kAddressSanitizer) {
        EXPECT_LE(late.rss_kib, early.rss_kib + std::max(8L * 1024, early.rss_kib / 10))
            << "resident memory grew";
    }
    EXPECT_LE(late.fds, early.fds) << "file descriptors leaked";
    EXPECT_LE(late.shm_maps, early.shm_maps + g_size) << "shared-memory mappings grew";
    EXPECT_LE(late.shm_names, early.shm_names + g_size) << "names left in /dev/shm grew";
}

}  // namespace
