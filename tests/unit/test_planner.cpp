// Algorithm choice without a communicator (core/tuning.h): each rule against the figures it was
// fitted to (docs/tuning.md), and the single-copy bounds derived from a probe.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "base/config.h"
#include "core/tuning.h"

using ccl::Algo;
using ccl::CollType;
using ccl::Config;
using ccl::tuning::Probe;
using ccl::tuning::Shape;
using ccl::tuning::SingleCopy;
using namespace ccl::tuning;

namespace {

constexpr size_t KiB = 1024, MiB = 1024 * 1024;

// n ranks on one node with 1 MiB arena buffers; single copy as given.
Shape node(int n, SingleCopy copy = {}) { return {n, n, 1 * MiB, false, copy}; }

// What a cheap machine's probe gives (the 16-core host): blocks from 16 KiB, copies threaded.
SingleCopy cheap_copy(int local_ranks = 2) {
    Probe p;
    p.works = true;
    p.fixed_ns = 800;
    p.dearest_x100 = p.cheapest_x100 = 150;
    p.threaded = true;
    return single_copy(p, local_ranks, 16);
}

}  // namespace

TEST(Planner, AllreduceDirectThenRsag) {
    const Config cfg;
    EXPECT_EQ(choose(CollType::allreduce, 8, node(2), cfg), Algo::direct);
    EXPECT_EQ(choose(CollType::allreduce, 64 * KiB, node(2), cfg), Algo::direct);
    EXPECT_EQ(choose(CollType::allreduce, 64 * KiB + 4, node(2), cfg), Algo::rsag);
    // More ranks: while n x bytes stays within 24 KiB.
    EXPECT_EQ(choose(CollType::allreduce, 6 * KiB, node(4), cfg), Algo::direct);
    EXPECT_EQ(choose(CollType::allreduce, 6 * KiB + 4, node(4), cfg), Algo::rsag);
    EXPECT_EQ(choose(CollType::allreduce, 3 * KiB, node(8), cfg), Algo::direct);
    EXPECT_EQ(choose(CollType::allreduce, 3 * KiB + 4, node(8), cfg), Algo::rsag);
    // A bound the user gives holds as is, at any number of ranks.
    Config given;
    given.allreduce_direct_max = 1 * MiB;
    given.allreduce_direct_max_set = true;
    EXPECT_EQ(choose(CollType::allreduce, 1 * MiB, node(8), given), Algo::direct);
    EXPECT_EQ(choose(CollType::allreduce, 1 * MiB + 4, node(8), given), Algo::rsag);
    // Two ranks with a team: up to 2 MiB (the 16-core host, 2 ranks of 8 cpus); more ranks with
    // a team as without (4 of 4 and 8 of 2: direct 1.5-3x slower from 128 KiB).
    EXPECT_EQ(choose(CollType::allreduce, 2 * MiB, node(2, cheap_copy(2)), cfg), Algo::direct);
    EXPECT_EQ(choose(CollType::allreduce, 2 * MiB + 4, node(2, cheap_copy(2)), cfg), Algo::rsag);
    EXPECT_EQ(choose(CollType::allreduce, 6 * KiB + 4, node(4, cheap_copy(4)), cfg), Algo::rsag);
    EXPECT_EQ(choose(CollType::allreduce, 2 * MiB, node(2, cheap_copy(2)), given), Algo::rsag);
}

TEST(Planner, AllreduceAsTheUserForces) {
    Config cfg;
    cfg.allreduce_algo = "rsag";
    EXPECT_EQ(choose(CollType::allreduce, 8, node(4), cfg), Algo::rsag);
    cfg.allreduce_algo = "direct";
    EXPECT_EQ(choose(CollType::allreduce, 64 * MiB, node(4), cfg), Algo::direct);
    cfg.allreduce_algo = "cma";
    EXPECT_EQ(choose(CollType::allreduce, 1 * MiB, node(4, cheap_copy(4)), cfg),
              Algo::allreduce_cma);
    EXPECT_EQ(choose(CollType::allreduce, 1 * MiB, node(4), cfg), Algo::rsag);  // not allowed
    // Reduce-scatter follows: single copy with cma, through the arena otherwise.
    EXPECT_EQ(choose(CollType::reduce_scatter, 8, node(4, cheap_copy(4)), cfg),
              Algo::reduce_scatter_cma);
    cfg.allreduce_algo = "rsag";
    EXPECT_EQ(choose(CollType::reduce_scatter, 64 * MiB, node(4, cheap_copy(4)), cfg),
              Algo::reduce_scatter);
}

TEST(Planner, AllreduceSingleCopyWhereItPays) {
    const Config cfg;
    const SingleCopy copy = cheap_copy(2);
    // Ranks with a team: through the arena, whose copies the team splits too.
    EXPECT_EQ(choose(CollType::allreduce, 4 * MiB, node(2, copy), cfg), Algo::rsag);
    EXPECT_EQ(choose(CollType::allreduce, 256 * MiB, node(2, copy), cfg), Algo::rsag);
    // Two ranks of one thread: slices (bytes / ranks) of 256 KiB or more, below
    // CCL_ALLREDUCE_CMA_MAX (32 MiB).
    SingleCopy one = copy;
    one.threaded = false;
    EXPECT_EQ(choose(CollType::allreduce, 512 * KiB, node(2, one), cfg), Algo::allreduce_cma);
    EXPECT_EQ(choose(CollType::allreduce, 512 * KiB - 64, node(2, one), cfg), Algo::rsag);
    EXPECT_EQ(choose(CollType::allreduce, 16 * MiB, node(2, one), cfg), Algo::allreduce_cma);
    EXPECT_EQ(choose(CollType::allreduce, 32 * MiB, node(2, one), cfg), Algo::rsag);
    // More ranks: rsag at every size (the 16-core host, 4-16 ranks of a core each).
    SingleCopy four = cheap_copy(4);
    four.threaded = false;
    EXPECT_FALSE(four.byte_pays);
    EXPECT_EQ(choose(CollType::allreduce, 16 * MiB, node(4, four), cfg), Algo::rsag);
    // A bound the user gives holds as is: with a team, at more ranks.
    Config bounded;
    bounded.allreduce_cma_max = 8 * MiB;
    bounded.allreduce_cma_max_set = true;
    EXPECT_EQ(choose(CollType::allreduce, 4 * MiB, node(4, cheap_copy(4)), bounded),
              Algo::allreduce_cma);
    EXPECT_EQ(choose(CollType::allreduce, 8 * MiB, node(4, cheap_copy(4)), bounded), Algo::rsag);
    // Arena buffers too small for a cache line of scratch per rank.
    Shape tiny = node(2, one);
    tiny.buffer = 64;
    EXPECT_EQ(choose(CollType::allreduce, 16 * MiB, tiny, cfg), Algo::rsag);
}

// Which reductions the probe allows single copy: allreduces between two ranks whose kernel copies
// a byte in under 2x memcpy's time (the host, 1.5-1.7x, single copy faster from 1 to 16 MiB; the
// AMD VM, 2.4-3.1x, 2x slower); reduces where the bytes are not dear; neither on a crowded node.
TEST(Tuning, ReductionsSingleCopyFromTheProbe) {
    Probe p;
    p.works = true;
    p.fixed_ns = 800;
    p.dearest_x100 = p.cheapest_x100 = 190;
    SingleCopy s = single_copy(p, 2, 16);
    EXPECT_TRUE(s.byte_pays);
    EXPECT_TRUE(s.reduces);
    p.dearest_x100 = 200;  // twice memcpy's: no longer pays
    s = single_copy(p, 2, 16);
    EXPECT_FALSE(s.byte_pays);
    EXPECT_TRUE(s.reduces);
    EXPECT_NE(describe(p, s).find("reductions of ccl's choice: reduces"), std::string::npos)
        << describe(p, s);
    // Where the byte pays, large blocks do too, even where the fixed cost keeps small ones out
    // (the AMD VM with its cpus far apart: 1.6 us, a byte 1.4-1.6x): allgathers below 32 MiB,
    // all-to-alls at every size, reduce-scatters as the allreduce they are half of (from 16 KiB
    // blocks there).
    p.dearest_x100 = 150;
    p.fixed_ns = 1600;
    s = single_copy(p, 2, 2);
    EXPECT_TRUE(s.byte_pays);
    EXPECT_FALSE(s.cheap());
    EXPECT_EQ(s.allgather_max, 32 * MiB);
    EXPECT_EQ(s.alltoall_max, SIZE_MAX);
    EXPECT_EQ(choose(CollType::reduce_scatter, 16 * KiB, node(2, s), Config{}),
              Algo::reduce_scatter_cma);
    EXPECT_EQ(choose(CollType::reduce_scatter, 16 * KiB - 64, node(2, s), Config{}),
              Algo::reduce_scatter);
    EXPECT_EQ(choose(CollType::reduce_scatter, 16 * MiB, node(2, s), Config{}),
              Algo::reduce_scatter);  // 32 MiB sent: CCL_ALLREDUCE_CMA_MAX
    p.fixed_ns = 800;
    EXPECT_FALSE(single_copy(p, 3, 16).byte_pays);  // more than two ranks
    EXPECT_TRUE(single_copy(p, 3, 16).reduces);
    p.dearest_x100 = 300;  // dear
    s = single_copy(p, 4, 16);
    EXPECT_FALSE(s.reduces);
    EXPECT_NE(describe(p, s).find("reductions of ccl's choice: none"), std::string::npos)
        << describe(p, s);
    // A crowded node (the AMD VM, 4 ranks on 2 cpus: allreduce 16 MiB 5.3 ms through the arena,
    // 12-15 single copy; reduce 4 MiB 0.7-1.0 against 1.6-1.8), however cheap the byte.
    p.dearest_x100 = p.cheapest_x100 = 150;
    p.crowd_floor = crowded_cma_min_bytes(0, 4, 2);
    s = single_copy(p, 4, 2);
    EXPECT_FALSE(s.reduces);
    EXPECT_FALSE(s.byte_pays);
    EXPECT_EQ(choose(CollType::reduce, 16 * MiB, node(4, s), Config{}), Algo::reduce_split);
    // Not probed (single copy off): nothing.
    p = {};
    s = single_copy(p, 2, 16);
    EXPECT_FALSE(s.reduces || s.byte_pays);
}

TEST(Planner, ReduceDirectAtTwoRanksAlways) {
    const Config cfg;
    EXPECT_EQ(choose(CollType::reduce, 64 * MiB, node(2), cfg), Algo::reduce_direct);
    EXPECT_EQ(choose(CollType::reduce, 64 * MiB, node(2, cheap_copy()), cfg), Algo::reduce_direct);
    // Up to 8 ranks as allreduce's bound (not scaled); from 10, n x bytes within 80 KiB.
    EXPECT_EQ(choose(CollType::reduce, 64 * KiB, node(8), cfg), Algo::reduce_direct);
    EXPECT_EQ(choose(CollType::reduce, 64 * KiB + 4, node(8), cfg), Algo::reduce_split);
    EXPECT_EQ(choose(CollType::reduce, 5 * KiB, node(16), cfg), Algo::reduce_direct);
    EXPECT_EQ(choose(CollType::reduce, 5 * KiB + 4, node(16), cfg), Algo::reduce_split);
    // Beyond direct, single copy for slices from CCL_ALLREDUCE_CMA_MIN (ranks of one thread), at
    // any size unless a CCL_ALLREDUCE_CMA_MAX is given.
    SingleCopy one = cheap_copy(4);
    one.threaded = false;
    EXPECT_EQ(choose(CollType::reduce, 1 * MiB, node(4, one), cfg), Algo::reduce_cma);
    EXPECT_EQ(choose(CollType::reduce, 1 * MiB - 64, node(4, one), cfg), Algo::reduce_split);
    EXPECT_EQ(choose(CollType::reduce, 256 * MiB, node(4, one), cfg), Algo::reduce_cma);
    Config bounded;
    bounded.allreduce_cma_max = 8 * MiB;
    bounded.allreduce_cma_max_set = true;
    EXPECT_EQ(choose(CollType::reduce, 8 * MiB, node(4, one), bounded), Algo::reduce_split);
    EXPECT_EQ(choose(CollType::reduce, 4 * MiB, node(4, cheap_copy(4)), cfg), Algo::reduce_split);
    // A bound or an algorithm the user gives holds at 2 ranks too.
    Config given;
    given.allreduce_direct_max = 1 * KiB;
    given.allreduce_direct_max_set = true;
    EXPECT_EQ(choose(CollType::reduce, 2 * KiB, node(2), given), Algo::reduce_split);
    Config rsag;
    rsag.allreduce_algo = "rsag";
    EXPECT_EQ(choose(CollType::reduce, 1 * MiB, node(2), rsag), Algo::reduce_split);
}

// The bound of direct reduce from the knobs: a value the user gives holds at every rank count, and
// a CCL_ALLREDUCE other than auto keeps 2 ranks' bound.
TEST(Planner, ReduceDirectBoundFromTheKnobs) {
    const Config cfg;
    auto direct_up_to = [](size_t bytes, int n, const Config& c) {
        return choose(CollType::reduce, bytes, node(n), c) == Algo::reduce_direct &&
               choose(CollType::reduce, bytes + 4, node(n), c) == Algo::reduce_split;
    };
    EXPECT_TRUE(direct_up_to(64 * KiB, 3, cfg));
    EXPECT_TRUE(direct_up_to(8 * KiB, 10, cfg));
    Config cma;
    cma.allreduce_algo = "cma";
    EXPECT_TRUE(direct_up_to(64 * KiB, 2, cma));
    Config given;
    given.allreduce_direct_max_set = true;
    EXPECT_TRUE(direct_up_to(64 * KiB, 2, given));
    given.allreduce_direct_max = 32 * KiB;
    EXPECT_TRUE(direct_up_to(32 * KiB, 16, given));
    given.allreduce_direct_max = 1 * KiB;
    EXPECT_TRUE(direct_up_to(1 * KiB, 4, given));
}

TEST(Planner, BroadcastInHalvesBetweenTwoWhereCopiesAreCheap) {
    const Config cfg;
    const SingleCopy copy = cheap_copy();
    ASSERT_EQ(copy.min, 16 * KiB);
    EXPECT_EQ(choose(CollType::broadcast, 32 * KiB, node(2, copy), cfg), Algo::broadcast_cma);
    EXPECT_EQ(choose(CollType::broadcast, 32 * KiB - 1, node(2, copy), cfg), Algo::broadcast);
    EXPECT_EQ(choose(CollType::broadcast, 64 * MiB, node(2, copy), cfg), Algo::broadcast_cma);
    EXPECT_EQ(choose(CollType::broadcast, 64 * MiB, node(4, copy), cfg), Algo::broadcast);
    EXPECT_EQ(choose(CollType::broadcast, 64 * MiB, node(2), cfg), Algo::broadcast);
}

// The AMD VM's probes: a dear fixed cost (blocks from 128 KiB or more) and a byte through the
// kernel at 1.6x memcpy's (cpus far apart), 2.8x (near) or 3x and more (dear).
TEST(Planner, BroadcastBetweenTwoFromTheProbe) {
    const Config cfg;
    auto probe = [](double fixed_ns, uint64_t byte_x100) {
        Probe p;
        p.works = true;
        p.fixed_ns = fixed_ns;
        p.dearest_x100 = p.cheapest_x100 = byte_x100;
        return p;
    };
    auto range = [](const Probe& p, int cpus = 2) {
        const SingleCopy s = single_copy(p, 2, cpus);
        return std::pair{s.broadcast_min, s.broadcast_max};
    };
    // Far: a byte pays, every size from 32 KiB.
    const SingleCopy far = single_copy(probe(1700, 160), 2, 2);
    ASSERT_TRUE(far.byte_pays);
    ASSERT_GT(far.min, 16 * KiB);
    EXPECT_EQ(range(probe(1700, 160)), (std::pair{32 * KiB, SIZE_MAX}));
    EXPECT_EQ(choose(CollType::broadcast, 32 * KiB - 4, node(2, far), cfg), Algo::broadcast);
    EXPECT_EQ(choose(CollType::broadcast, 64 * MiB, node(2, far), cfg), Algo::broadcast_cma);
    // Near, or dear by the byte: from 32 KiB below 4 MiB (the arena's copies in cache win above).
    for (uint64_t byte : {280, 320}) {
        const SingleCopy s = single_copy(probe(1700, byte), 2, 2);
        ASSERT_FALSE(s.cheap());
        ASSERT_FALSE(s.byte_pays);
        EXPECT_EQ(choose(CollType::broadcast, 32 * KiB - 4, node(2, s), cfg), Algo::broadcast);
        EXPECT_EQ(choose(CollType::broadcast, 32 * KiB, node(2, s), cfg), Algo::broadcast_cma);
        EXPECT_EQ(choose(CollType::broadcast, 4 * MiB - 4, node(2, s), cfg), Algo::broadcast_cma);
        EXPECT_EQ(choose(CollType::broadcast, 4 * MiB, node(2, s), cfg), Algo::broadcast);
    }
    // Two ranks on one cpu: none; a block size the user gave: from twice it.
    Probe crowded = probe(1700, 280);
    crowded.crowd_floor = crowded_cma_min_bytes(0, 2, 1);
    EXPECT_EQ(range(crowded, 1), (std::pair{SIZE_MAX, size_t(0)}));
    Probe given = probe(1700, 320);
    given.cma_min = 1 * MiB;
    EXPECT_EQ(range(given), (std::pair{2 * MiB, SIZE_MAX}));
    // No single copy at all: none.
    EXPECT_EQ(range(Probe{}), (std::pair{SIZE_MAX, size_t(0)}));
}

// Far apart on the AMD VM (a byte pays, blocks dear): allreduces and reduce-scatters single copy
// from 16 KiB slices; not where blocks are cheap (the host), nor against a bound the user gave.
// (Reduces between two ranks are direct at every size.)
TEST(Planner, SmallerSlicesWhereOnlyAByteOfTheKernelPays) {
    Probe p;
    p.works = true;
    p.fixed_ns = 1700;
    p.dearest_x100 = p.cheapest_x100 = 150;
    const SingleCopy far = single_copy(p, 2, 2);
    ASSERT_TRUE(far.byte_pays);
    ASSERT_FALSE(far.cheap());
    const Config cfg;
    EXPECT_EQ(choose(CollType::reduce_scatter, 16 * KiB, node(2, far), cfg),
              Algo::reduce_scatter_cma);
    EXPECT_EQ(choose(CollType::reduce_scatter, 16 * KiB - 4, node(2, far), cfg),
              Algo::reduce_scatter);
    EXPECT_EQ(choose(CollType::allreduce, 128 * KiB, node(2, far), cfg), Algo::allreduce_cma);
    const SingleCopy host = cheap_copy();
    ASSERT_TRUE(host.cheap());
    Config no_team;
    EXPECT_EQ(choose(CollType::reduce_scatter, 16 * KiB, node(2, host), no_team),
              Algo::reduce_scatter);
    Config given;
    given.allreduce_cma_min = 256 * KiB;
    given.allreduce_cma_min_set = true;
    EXPECT_EQ(choose(CollType::reduce_scatter, 128 * KiB, node(2, far), given),
              Algo::reduce_scatter);
}

TEST(Planner, AllgatherSingleCopyForBlocksInABound) {
    const Config cfg;
    const SingleCopy copy = cheap_copy();
    ASSERT_EQ(copy.allgather_min, 16 * KiB);
    ASSERT_EQ(copy.allgather_max, 32 * MiB);
    // allgather: bytes are a block; allgatherv: the whole receive buffer.
    EXPECT_EQ(choose(CollType::allgather, 16 * KiB, node(2, copy), cfg), Algo::allgather_cma);
    EXPECT_EQ(choose(CollType::allgather, 8 * KiB, node(2, copy), cfg), Algo::allgather);
    EXPECT_EQ(choose(CollType::allgather, 16 * MiB, node(2, copy), cfg), Algo::allgather);
    EXPECT_EQ(choose(CollType::allgatherv, 32 * KiB, node(2, copy), cfg), Algo::allgather_cma);
    EXPECT_EQ(choose(CollType::allgatherv, 16 * KiB, node(2, copy), cfg), Algo::allgather);
    EXPECT_EQ(choose(CollType::allgather, 1 * MiB, node(2), cfg), Algo::allgather);
}

TEST(Planner, TheRestAndTheEdges) {
    const Config cfg;
    // One rank: reductions copy, the rest has nothing to do.
    EXPECT_EQ(choose(CollType::allreduce, 8, node(1), cfg), Algo::local_copy);
    EXPECT_EQ(choose(CollType::reduce, 8, node(1), cfg), Algo::local_copy);
    EXPECT_EQ(choose(CollType::reduce_scatter, 8, node(1), cfg), Algo::local_copy);
    EXPECT_EQ(choose(CollType::broadcast, 8, node(1), cfg), Algo::none);
    EXPECT_EQ(choose(CollType::barrier, 0, node(1), cfg), Algo::none);
    // No data: nothing, but for barriers, point to point and all-to-allv.
    for (CollType c :
         {CollType::allreduce, CollType::broadcast, CollType::reduce, CollType::allgather,
          CollType::allgatherv, CollType::reduce_scatter, CollType::alltoall})
        EXPECT_EQ(choose(c, 0, node(4), cfg), Algo::none) << ccl::coll_name(c);
    EXPECT_EQ(choose(CollType::barrier, 0, node(4), cfg), Algo::barrier);
    EXPECT_EQ(choose(CollType::send, 0, node(4), cfg), Algo::p2p);
    EXPECT_EQ(choose(CollType::recv, 1 * MiB, node(4), cfg), Algo::p2p);
    EXPECT_EQ(choose(CollType::alltoallv, 0, node(4), cfg), Algo::alltoall);
    EXPECT_EQ(choose(CollType::reduce_scatter, 1 * MiB, node(4), cfg), Algo::reduce_scatter);
    // All-to-all: the lanes while every rank's blocks fit one.
    const size_t lane = ccl::shm::Arena::kLaneBytes;
    EXPECT_EQ(choose(CollType::alltoall, lane / 4, node(4), cfg), Algo::alltoall_lane);
    EXPECT_EQ(choose(CollType::alltoall, lane / 4 + 1, node(4), cfg), Algo::alltoall);
    // Across nodes: the hierarchical algorithm of each collective.
    Shape across = node(4);
    across.multinode = true;
    across.local_ranks = 2;
    EXPECT_EQ(choose(CollType::allreduce, 8, across, cfg), Algo::hier_allreduce);
    EXPECT_EQ(choose(CollType::allgatherv, 8, across, cfg), Algo::hier_allgather);
    EXPECT_EQ(choose(CollType::alltoallv, 0, across, cfg), Algo::hier_alltoall);
    EXPECT_EQ(choose(CollType::barrier, 0, across, cfg), Algo::hier_barrier);
    EXPECT_EQ(choose(CollType::send, 8, across, cfg), Algo::p2p);
    EXPECT_EQ(choose(CollType::broadcast, 0, across, cfg), Algo::none);
    // Groups fuse allreduces within CCL_ALLREDUCE_DIRECT_MAX.
    EXPECT_TRUE(fuses(64 * KiB, cfg));
    EXPECT_FALSE(fuses(64 * KiB + 1, cfg));
}

TEST(Tuning, BoundsFromACheapProbe) {
    const SingleCopy s = cheap_copy(2);
    EXPECT_TRUE(s.on);
    EXPECT_FALSE(s.dear);
    EXPECT_TRUE(s.threaded);
    EXPECT_EQ(s.min, 16 * KiB);
    EXPECT_EQ(s.p2p_min, 16 * KiB);
    EXPECT_EQ(s.allgather_min, 16 * KiB);
    EXPECT_EQ(s.allgather_max, 32 * MiB);
    EXPECT_EQ(s.alltoall_max, SIZE_MAX);
    // Each rank on the node beyond 4 doubles an allgather's smallest single-copy block.
    EXPECT_EQ(cheap_copy(8).allgather_min, 256 * KiB);
    EXPECT_GE(cheap_copy(16).allgather_min, cheap_copy(16).allgather_max);  // none
}

TEST(Tuning, BoundsFromADearProbe) {
    Probe p;
    p.works = true;
    p.fixed_ns = 1250;  // the AMD VM
    p.dearest_x100 = 400;
    p.cheapest_x100 = 350;
    SingleCopy s = single_copy(p, 2, 2);
    EXPECT_TRUE(s.dear);
    EXPECT_EQ(s.min, 4 * MiB);
    EXPECT_EQ(s.allgather_max, 0u);  // no single-copy allgathers
    EXPECT_EQ(s.alltoall_max, 0u);   // nor all-to-all blocks
    EXPECT_NE(describe(p, s).find("raised from 64 KiB: the kernel's bytes are dear"),
              std::string::npos)
        << describe(p, s);
    // On a crowded node the cheapest rank's byte decides.
    p.crowd_floor = crowded_cma_min_bytes(0, 4, 2);
    p.cheapest_x100 = 150;
    p.fixed_ns = 800;
    s = single_copy(p, 4, 2);
    EXPECT_FALSE(s.dear);
    EXPECT_EQ(s.min, 16 * KiB);
    EXPECT_EQ(s.p2p_min, 32 * KiB);  // 16 KiB per rank per cpu
    EXPECT_EQ(s.allgather_max, 0u);  // crowded: not cheap
    EXPECT_EQ(s.alltoall_max, 8 * MiB);
    p.cheapest_x100 = 400;
    s = single_copy(p, 4, 2);
    EXPECT_TRUE(s.dear);
    EXPECT_EQ(s.min, 2 * MiB);  // the crowded floor
    EXPECT_EQ(s.alltoall_max, 4 * MiB);
}

TEST(Tuning, BoundsTheUserGaveHold) {
    Probe p;
    p.works = true;
    p.fixed_ns = 800;
    p.cma_min = 1 * MiB;
    SingleCopy s = single_copy(p, 4, 2);
    EXPECT_EQ(s.min, 1 * MiB);
    EXPECT_EQ(s.p2p_min, 1 * MiB);  // not raised on a crowded node
    p.allgather_cma_max = 8 * MiB;
    p.alltoall_cma_max = 2 * MiB;
    s = single_copy(p, 8, 16);
    EXPECT_EQ(s.allgather_min, 1 * MiB);  // not doubled with the ranks
    EXPECT_EQ(s.allgather_max, 8 * MiB);
    EXPECT_EQ(s.alltoall_max, 2 * MiB);
}

TEST(Tuning, NoSingleCopyWhereTheProbeFailed) {
    Probe p;
    p.fixed_ns = 800;
    const SingleCopy s = single_copy(p, 2, 2);
    EXPECT_FALSE(s.on);
    EXPECT_EQ(s.min, SIZE_MAX);
    EXPECT_EQ(s.p2p_min, SIZE_MAX);
    EXPECT_GE(s.allgather_min, s.allgather_max);
    EXPECT_FALSE(s.cheap());
}

TEST(Tuning, ArenaBuffersGrowWithTheTeam) {
    EXPECT_EQ(arena_buffer_bytes(1 * MiB, false, 1), 1 * MiB);
    EXPECT_EQ(arena_buffer_bytes(1 * MiB, false, 2), 2 * MiB);
    EXPECT_EQ(arena_buffer_bytes(1 * MiB, false, 16), 4 * MiB);     // at most 4x
    EXPECT_EQ(arena_buffer_bytes(64 * 1024, true, 8), 64u * 1024);  // given: as is
}

TEST(Tuning, TeamIsTheRanksCpus) {
    EXPECT_EQ(team_threads(3, 1, 16, 16), 3);  // given
    EXPECT_EQ(team_threads(0, 4, 16, 4), 4);   // bound to 4 of 16, 4 ranks
    EXPECT_EQ(team_threads(0, 16, 16, 4), 4);  // unbound: its share
    EXPECT_EQ(team_threads(0, 32, 64, 2), 32);
    EXPECT_EQ(team_threads(0, 2, 16, 2), 2);  // within the cpus it may use
    EXPECT_EQ(team_threads(0, 16, 16, 16), 1);
    EXPECT_EQ(team_threads(0, 2, 2, 8), 1);   // more ranks than cpus
    EXPECT_EQ(team_threads(0, 16, 0, 4), 1);  // the node's cpus unknown
}

TEST(Tuning, ThresholdFollowsTheFixedCost) {
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
TEST(Tuning, ThresholdRisesWithRanksPerCpu) {
    // A core each (or the cpus unknown): as probed.
    EXPECT_EQ(crowded_cma_min_bytes(64u << 10, 2, 2), 64u << 10);
    EXPECT_EQ(crowded_cma_min_bytes(16u << 10, 16, 16), 16u << 10);
    EXPECT_EQ(crowded_cma_min_bytes(16u << 10, 8, 0), 16u << 10);
    // More ranks than cpus: 4 MiB over the ranks per cpu, never below the threshold given.
    EXPECT_EQ(crowded_cma_min_bytes(64u << 10, 4, 2), 2u << 20);
    EXPECT_EQ(crowded_cma_min_bytes(64u << 10, 8, 2), 1u << 20);
    EXPECT_EQ(crowded_cma_min_bytes(64u << 10, 3, 2), (8u << 20) / 3);
    EXPECT_EQ(crowded_cma_min_bytes(512u << 10, 64, 2), 512u << 10);
    EXPECT_EQ(crowded_cma_min_bytes(SIZE_MAX, 4, 2), SIZE_MAX);
    // As a node's floor (what Communicator votes on): none unless crowded.
    EXPECT_EQ(crowded_cma_min_bytes(0, 4, 2), 2u << 20);
    EXPECT_EQ(crowded_cma_min_bytes(0, 2, 2), 0u);
    EXPECT_EQ(crowded_cma_min_bytes(0, 4, 0), 0u);
}
// Point to point on a crowded node: 16 KiB per rank per cpu at least; as given otherwise.
TEST(Tuning, SendsRiseWithRanksPerCpu) {
    EXPECT_EQ(crowded_p2p_cma_min_bytes(8u << 10, 2, 2), 8u << 10);
    EXPECT_EQ(crowded_p2p_cma_min_bytes(8u << 10, 8, 0), 8u << 10);
    EXPECT_EQ(crowded_p2p_cma_min_bytes(8u << 10, 3, 2), 24u << 10);
    EXPECT_EQ(crowded_p2p_cma_min_bytes(8u << 10, 4, 2), 32u << 10);
    EXPECT_EQ(crowded_p2p_cma_min_bytes(8u << 10, 8, 2), 64u << 10);
    EXPECT_EQ(crowded_p2p_cma_min_bytes(2u << 20, 4, 2), 2u << 20);
    EXPECT_EQ(crowded_p2p_cma_min_bytes(SIZE_MAX, 4, 2), SIZE_MAX);
}
TEST(Tuning, AlltoallBoundFollowsTheNode) {
    // cheap, dear, crowded
    EXPECT_EQ(alltoall_cma_max_bytes(true, false, false), SIZE_MAX);
    EXPECT_EQ(alltoall_cma_max_bytes(false, true, false), 0u);
    EXPECT_EQ(alltoall_cma_max_bytes(false, true, true), 4u << 20);
    EXPECT_EQ(alltoall_cma_max_bytes(false, false, true), 8u << 20);
    EXPECT_EQ(alltoall_cma_max_bytes(false, false, false), 4u << 20);  // a dear probe alone
}
TEST(Tuning, ThresholdRisesOnlyWhereTheKernelsBytesAreDear) {
    // Cheap bytes: as probed, crowded (a floor given) or not.
    EXPECT_EQ(dear_cma_min_bytes(16u << 10, 0, false), 16u << 10);
    EXPECT_EQ(dear_cma_min_bytes(16u << 10, 2u << 20, false), 16u << 10);
    // Dear bytes: the crowded floor, else 4 MiB; never below the probed size.
    EXPECT_EQ(dear_cma_min_bytes(16u << 10, 2u << 20, true), 2u << 20);
    EXPECT_EQ(dear_cma_min_bytes(16u << 10, 0, true), 4u << 20);
    EXPECT_EQ(dear_cma_min_bytes(8u << 20, 2u << 20, true), 8u << 20);
}
