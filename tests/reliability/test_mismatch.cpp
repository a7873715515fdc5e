// One rank calls a different collective, count, datatype, reduction or root than its peers, or
// hands over a buffer the kernel cannot copy into: every rank gets an error (never a result
// computed from mismatched data), promptly (well before CCL_TIMEOUT), and the communicator is
// broken on every rank. Each case runs on a communicator of its own.
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "../ranks/common.h"

using namespace test;

namespace {

using Clock = std::chrono::steady_clock;

// A collective call with everything that can disagree.
struct Call {
    std::string coll;
    size_t count;
    ccl_datatype_t dtype;
    ccl_reduction_t op;
    int root;
};

std::vector<double>& buf_a() {
    static std::vector<double> a;
    return a;
}

ccl_result_t issue(const Call& k, ccl_comm_t c) {
    // Room for the largest call below at every size (alltoall: size * count elements of 8 bytes);
    // every byte of this rank's input is rank + 1.
    std::vector<double>& a = buf_a();
    static std::vector<double> b;
    a.assign(size_t(g_size) * (k.count + 1) + 64, 0.0);
    std::memset(a.data(), g_rank + 1, a.size() * sizeof(double));
    b.assign(a.size(), 0.0);
    if (k.coll == "allreduce")
        return ccl_allreduce(a.data(), b.data(), k.count, k.dtype, k.op, c, nullptr, nullptr);
    if (k.coll == "broadcast")
        return ccl_broadcast(a.data(), k.count, k.dtype, k.root, c, nullptr, nullptr);
    if (k.coll == "reduce")
        return ccl_reduce(a.data(), b.data(), k.count, k.dtype, k.op, k.root, c, nullptr, nullptr);
    if (k.coll == "allgather")
        return ccl_allgather(a.data(), b.data(), k.count, k.dtype, c, nullptr, nullptr);
    if (k.coll == "reduce_scatter")
        return ccl_reduce_scatter(a.data(), b.data(), k.count, k.dtype, k.op, c, nullptr, nullptr);
    if (k.coll == "alltoall")
        return ccl_alltoall(a.data(), b.data(), k.count, k.dtype, c, nullptr, nullptr);
    if (k.coll == "barrier") return ccl_barrier(c, nullptr);
    ADD_FAILURE() << "unknown collective " << k.coll;
    return CCL_ERROR_INTERNAL;
}

// The last rank calls `odd`, the others `usual`. Strict: every rank's call fails (each reads
// every other rank's data, or waits for it). Otherwise (a disagreement on the root of a reduce or
// broadcast) a rank whose part never touches the odd rank's data may complete it: a non-root of
// a reduce (it has no result), a broadcast's root, or a broadcast non-root that read its root's
// data, which must then be right. In both cases the communicator is broken on every rank: the
// next call fails everywhere.
void expect_error_everywhere(const Call& usual, const Call& odd, const char* what,
                             bool strict = true) {
    if (g_size < 2) GTEST_SKIP() << "needs two ranks";
    ccl_comm_t c = nullptr;
    CCL_OK(ccl_comm_create_from_env(&c));
    const Call& mine = g_rank == g_size - 1 ? odd : usual;
    auto t = Clock::now();
    ccl_result_t r = issue(mine, c);
    double took = std::chrono::duration<double>(Clock::now() - t).count();
    if (strict || r != CCL_SUCCESS) {
        EXPECT_EQ(r, CCL_ERROR_INVALID_USAGE) << what << ": rank " << g_rank << " got \""
                                              << ccl_strerror(r) << "\": " << ccl_last_error();
    } else if (mine.coll == "reduce") {
        EXPECT_NE(mine.root, g_rank) << what << ": the root of a mismatched reduce succeeded";
    } else if (mine.coll == "broadcast" && mine.root != g_rank) {
        // What the root this rank named sent (issue() fills byte by byte with rank + 1).
        const auto* got = reinterpret_cast<const unsigned char*>(buf_a().data());
        size_t bad = 0;
        for (size_t i = 0; i < mine.count * 4; ++i) bad += got[i] != (unsigned char)(mine.root + 1);
        EXPECT_EQ(bad, 0u) << what << ": a broadcast that succeeded holds wrong data";
    }
    // Found by the protocol, not by a deadline.
    EXPECT_LT(took, 5.0) << what;
    // Broken for good, on every rank, once any rank saw the mismatch. (Two ranks that both take
    // themselves for a broadcast's root read nothing from anyone: nothing to see, nothing wrong.)
    int32_t seen = r != CCL_SUCCESS, any = 0;
    CCL_OK(ccl_allreduce(&seen, &any, 1, CCL_INT32, CCL_MAX, g_comm, nullptr, nullptr));
    if (strict) {
        EXPECT_EQ(any, 1) << what;
    }
    if (any) {
        ccl_result_t again = ccl_barrier(c, nullptr);
        EXPECT_NE(again, CCL_SUCCESS) << what;
        ccl_result_t async = CCL_SUCCESS;
        CCL_OK(ccl_comm_get_async_error(c, &async));
        EXPECT_NE(async, CCL_SUCCESS) << what;
    }
    CCL_OK(ccl_comm_destroy(c));
    expect_comm_still_works();
}

const Call kAllreduce{"allreduce", 1000, CCL_FLOAT32, CCL_SUM, 0};

TEST(Mismatch, Collective) {
    expect_error_everywhere(kAllreduce, {"broadcast", 1000, CCL_FLOAT32, CCL_SUM, 0}, "coll");
    expect_error_everywhere(kAllreduce, {"barrier", 0, CCL_FLOAT32, CCL_SUM, 0}, "barrier");
    expect_error_everywhere({"allgather", 100, CCL_INT32, CCL_SUM, 0},
                            {"alltoall", 100, CCL_INT32, CCL_SUM, 0}, "allgather/alltoall");
    expect_error_everywhere({"reduce_scatter", 100, CCL_INT32, CCL_SUM, 0},
                            {"allreduce", 100, CCL_INT32, CCL_SUM, 0}, "reduce_scatter/allreduce");
}

TEST(Mismatch, Count) {
    expect_error_everywhere(kAllreduce, {"allreduce", 999, CCL_FLOAT32, CCL_SUM, 0}, "count");
    // Small against large (another algorithm and number of rounds).
    expect_error_everywhere(kAllreduce, {"allreduce", 1 << 20, CCL_FLOAT32, CCL_SUM, 0},
                            "count, large");
    expect_error_everywhere({"broadcast", 1 << 20, CCL_FLOAT32, CCL_SUM, 0},
                            {"broadcast", 100, CCL_FLOAT32, CCL_SUM, 0}, "broadcast count");
    expect_error_everywhere({"allgather", 64, CCL_INT8, CCL_SUM, 0},
                            {"allgather", 65, CCL_INT8, CCL_SUM, 0}, "allgather count");
}

TEST(Mismatch, Datatype) {
    // Same element size: only the signature tells them apart.
    expect_error_everywhere(kAllreduce, {"allreduce", 1000, CCL_INT32, CCL_SUM, 0}, "dtype");
    expect_error_everywhere(kAllreduce, {"allreduce", 1000, CCL_FLOAT64, CCL_SUM, 0}, "dtype 64");
    expect_error_everywhere({"alltoall", 100, CCL_UINT16, CCL_SUM, 0},
                            {"alltoall", 100, CCL_FLOAT16, CCL_SUM, 0}, "alltoall dtype");
}

TEST(Mismatch, ReductionAndRoot) {
    expect_error_everywhere(kAllreduce, {"allreduce", 1000, CCL_FLOAT32, CCL_MAX, 0}, "op");
    expect_error_everywhere({"broadcast", 1000, CCL_FLOAT32, CCL_SUM, 0},
                            {"broadcast", 1000, CCL_FLOAT32, CCL_SUM, 1}, "root", false);
    expect_error_everywhere({"reduce", 1000, CCL_FLOAT32, CCL_SUM, 0},
                            {"reduce", 1000, CCL_FLOAT32, CCL_SUM, 1}, "reduce root", false);
}

// Counts whose 32-bit round digests (ccl before 2026-12, FNV-1a over the call's fields and the
// algorithm, folded to 32 bits) were equal, in pairs that a birthday search finds in a second, each
// for the algorithm both counts take in one of the two regimes ctest runs this in (float32, sum,
// root 0): through the arena (CCL_SINGLE_COPY=0, CCL_ALLREDUCE_DIRECT_MAX=1G) or single copy
// (CCL_CMA_MIN=4K, CCL_ALLGATHER_CMA_MAX=1G, CCL_ALLREDUCE=cma). With that digest every rank
// returned success with wrong data, or single copy wrote past the smaller rank's buffer. Every
// field of a round's signature is now compared exactly: every call fails.
TEST(Mismatch, CountsWhoseOldDigestsCollided) {
    const char* regime = std::getenv("CCL_TEST_COLLIDE");
    if (!regime) GTEST_SKIP() << "run by ctest with CCL_TEST_COLLIDE=arena or =cma";
    const bool cma = std::string(regime) == "cma";
    struct Pair {
        const char* coll;
        size_t a, b;
    };
    const std::vector<Pair> pairs =
        cma ? std::vector<Pair>{{"allgather", 4102, 74591},
                                // Two ranks split a broadcast single copy, more take the arena.
                                g_size == 2 ? Pair{"broadcast", 10223, 75836}
                                            : Pair{"broadcast", 47816, 123187},
                                {"reduce", 33457, 188346},
                                {"allreduce", 80230, 84231}}
            : std::vector<Pair>{{"allgather", 64956, 82553},
                                {"broadcast", 47816, 123187},
                                {"reduce", 63814, 126552},
                                {"allreduce", 9122, 18737}};
    for (const Pair& p : pairs) {
        // A reduce's non-roots and a broadcast's root read nothing of the odd rank's: they may
        // finish, the others fail (see expect_error_everywhere).
        const bool strict = std::string(p.coll) != "reduce" && std::string(p.coll) != "broadcast";
        expect_error_everywhere({p.coll, p.a, CCL_FLOAT32, CCL_SUM, 0},
                                {p.coll, p.b, CCL_FLOAT32, CCL_SUM, 0}, p.coll, strict);
    }
}

// Whether this rank can read the next rank's memory with process_vm_readv (what single copy
// needs: ptrace rules and seccomp may forbid it), agreed by all ranks.
bool single_copy_works() {
    const int64_t word = 42;
    int64_t mine[2] = {::getpid(), int64_t(reinterpret_cast<intptr_t>(&word))};
    std::vector<int64_t> all(2 * size_t(g_size));
    if (ccl_allgather(mine, all.data(), 2, CCL_INT64, g_comm, nullptr, nullptr) != CCL_SUCCESS)
        return false;
    const size_t next = size_t((g_rank + 1) % g_size);
    int64_t got = 0;
    iovec l{&got, sizeof(got)},
        r{reinterpret_cast<void*>(intptr_t(all[2 * next + 1])), sizeof(got)};
    int32_t ok =
                ::process_vm_readv(pid_t(all[2 * next]), &l, 1, &r, 1, 0) == ssize_t(sizeof(got)) &&
                got == 42,
            every = 0;
    return ccl_allreduce(&ok, &every, 1, CCL_INT32, CCL_MIN, g_comm, nullptr, nullptr) ==
               CCL_SUCCESS &&
           every == 1;
}

// The last rank's receive buffer of an all-to-all has a page without access where rank 0's block
// goes. Blocks of 1 MiB go single copy wherever it works with CCL_ALLTOALL_CMA_MAX set large (as
// ctest does): they are larger than a round's piece (at most 512 KiB with the default buffers at
// 2 ranks), so the kernel copies rank 0's block straight into that page and refuses: that rank
// fails with CCL_ERROR_SYSTEM naming the transfer, and its peers, which wait for it to finish
// reading their buffers, learn it at once instead of at CCL_TIMEOUT. (By default, where the
// kernel's bytes are dear, the arena would carry them, and the copy out would fault.)
TEST(Misuse, BufferTheKernelCannotFill) {
    if (g_size < 2) GTEST_SKIP() << "needs two ranks";
    if (std::getenv("CCL_SINGLE_COPY") || std::getenv("CCL_CMA_MIN") ||
        !std::getenv("CCL_ALLTOALL_CMA_MAX"))
        GTEST_SKIP() << "needs the default single-copy settings and CCL_ALLTOALL_CMA_MAX=1G";
    if (!single_copy_works()) GTEST_SKIP() << "single copy is not allowed here";
    constexpr size_t kBlock = size_t(1) << 20;
    const bool bad = g_rank == g_size - 1;
    const size_t bytes = kBlock * size_t(g_size);
    std::vector<char> send(bytes, char(g_rank + 1));
    void* recv = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(recv, MAP_FAILED);
    if (bad) {
        ASSERT_EQ(::mprotect(recv, kBlock, PROT_NONE), 0);
    }
    ccl_comm_t c = nullptr;
    CCL_OK(ccl_comm_create_from_env(&c));
    auto t = Clock::now();
    ccl_result_t r = ccl_alltoall(send.data(), recv, kBlock, CCL_INT8, c, nullptr, nullptr);
    double took = std::chrono::duration<double>(Clock::now() - t).count();
    if (bad) {
        EXPECT_EQ(r, CCL_ERROR_SYSTEM) << ccl_last_error();
        EXPECT_NE(std::string(ccl_last_error()).find("process_vm_readv"), std::string::npos)
            << ccl_last_error();
    } else {
        EXPECT_NE(r, CCL_SUCCESS) << "rank " << g_rank << " finished an all-to-all its peer failed";
    }
    EXPECT_LT(took, 5.0) << "rank " << g_rank << " learned of the failure at its deadline";
    EXPECT_NE(ccl_barrier(c, nullptr), CCL_SUCCESS);
    CCL_OK(ccl_comm_destroy(c));
    ::munmap(recv, bytes);
    expect_comm_still_works();
}

}  // namespace
