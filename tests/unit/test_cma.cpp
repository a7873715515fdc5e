// The single-copy probe and the threshold chosen from it (shm/cma.h).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>

#include "shm/cma.h"

using ccl::shm::cma_min_bytes;

TEST(Cma, ThresholdFollowsTheFixedCost) {
    // The two machines it was fitted to, and the bounds.
    EXPECT_EQ(cma_min_bytes(800), 16u << 10);
    EXPECT_EQ(cma_min_bytes(700), 16u << 10);
    EXPECT_EQ(cma_min_bytes(1850), 256u << 10);
    EXPECT_EQ(cma_min_bytes(0), 8u << 10);
    EXPECT_EQ(cma_min_bytes(-1), 8u << 10);
    EXPECT_EQ(cma_min_bytes(1e9), 512u << 10);
    // Never smaller for a dearer transfer.
    for (double ns = 0; ns < 5000; ns += 25)
        EXPECT_LE(cma_min_bytes(ns), cma_min_bytes(ns + 25)) << ns;
}

TEST(Cma, ProbeTimesAReadOrFails) {
    const uint64_t word = 42;
    double ns = ccl::shm::cma_probe(getpid(), &word, sizeof word);
    if (ns < 0) GTEST_SKIP() << "process_vm_readv is not allowed here";
    EXPECT_GT(ns, 0);
    EXPECT_LT(ns, 1e8);
    EXPECT_LT(ccl::shm::cma_probe(getpid(), nullptr, sizeof word), 0);  // a bad address fails
}
