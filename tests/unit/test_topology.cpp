// Node detection: CCL_NODE_ID parsing and the Topology built from every rank's node id.
#include <gtest/gtest.h>
#include <sched.h>

#include <map>
#include <string>

#include "base/config.h"
#include "base/error.h"
#include "core/topology.h"

namespace {

std::map<std::string, std::string> g_env;
const char* fake_getenv(const char* name) {
    auto it = g_env.find(name);
    return it == g_env.end() ? nullptr : it->second.c_str();
}

TEST(Topology, NodeIdFromConfig) {
    g_env = {{"CCL_NODE_ID", "rack3-n07"}};
    ccl::Config c = ccl::parse_config(fake_getenv);
    EXPECT_EQ(c.node_id, "rack3-n07");
    EXPECT_EQ(ccl::node_id(c), "rack3-n07");
    // Unset: host name and boot id, the same every time.
    g_env = {};
    ccl::Config d = ccl::parse_config(fake_getenv);
    EXPECT_TRUE(d.node_id.empty());
    EXPECT_NE(ccl::node_id(d).find('/'), std::string::npos);
    EXPECT_EQ(ccl::node_id(d), ccl::node_id(d));
}

TEST(Topology, NodeIdRejectsMalformed) {
    for (std::string bad : {std::string(""), std::string("a b"), std::string(201, 'x')}) {
        g_env = {{"CCL_NODE_ID", bad}};
        try {
            ccl::parse_config(fake_getenv);
            ADD_FAILURE() << "CCL_NODE_ID='" << bad << "' was accepted";
        } catch (const ccl::Error& e) {
            EXPECT_EQ(e.code(), CCL_ERROR_INVALID_ARGUMENT);
            EXPECT_NE(std::string(e.what()).find("CCL_NODE_ID"), std::string::npos);
        }
    }
}

TEST(Topology, NodesInOrderOfTheirLowestRank) {
    // Ranks 0..5 on nodes b, a, b, c, a, b (interleaved, not contiguous).
    std::vector<std::string> ids{"b", "a", "b", "c", "a", "b"};
    ccl::Topology t(ids, 4);
    EXPECT_EQ(t.nnodes(), 3);
    EXPECT_EQ(t.node(), 1);  // "a" appears second
    EXPECT_EQ(t.local_rank(), 1);
    EXPECT_EQ(t.local_size(), 2);
    EXPECT_EQ(t.ranks_of(0), (std::vector<int>{0, 2, 5}));
    EXPECT_EQ(t.ranks_of(1), (std::vector<int>{1, 4}));
    EXPECT_EQ(t.ranks_of(2), (std::vector<int>{3}));
    EXPECT_EQ(t.leaders(), (std::vector<int>{0, 1, 3}));
    EXPECT_EQ(t.node_of(5), 0);
    EXPECT_EQ(t.local_rank_of(5), 2);
    EXPECT_FALSE(t.uniform());
    EXPECT_TRUE(ccl::Topology({"x", "y", "x", "y"}, 0).uniform());
    EXPECT_EQ(ccl::Topology({"x", "x"}, 1).nnodes(), 1);
}

TEST(Topology, NodeCpusAreTheUnionOfTheNodesRanks) {
    // Node a: ranks bound to cpu 0 and cpu 1 (each its own core); node b: both on cpus 0-3.
    ccl::Topology a({"a\n1", "a\n2", "b\nf", "b\nf"}, 1);
    EXPECT_EQ(a.nnodes(), 2);
    EXPECT_EQ(a.local_size(), 2);
    EXPECT_EQ(a.node_cpus(), 2);
    EXPECT_EQ(ccl::Topology({"a\n1", "a\n2", "b\nf", "b\nf"}, 3).node_cpus(), 4);
    // Two ranks on one cpu: crowded however many cpus the machine has.
    EXPECT_EQ(ccl::Topology({"a\n10", "a\n10"}, 0).node_cpus(), 1);
    EXPECT_EQ(ccl::Topology({"a\n100000000000000000000000000000000", "a\n1"}, 0).node_cpus(), 2);
    // A rank that did not say (bare id, empty or malformed mask): unknown.
    EXPECT_EQ(ccl::Topology({"a", "a"}, 0).node_cpus(), 0);
    EXPECT_EQ(ccl::Topology({"a\n1", "a\n"}, 0).node_cpus(), 0);
    EXPECT_EQ(ccl::Topology({"a\n1", "a\nxyz"}, 0).node_cpus(), 0);
    // Only this node's ranks count.
    EXPECT_EQ(ccl::Topology({"a\n1", "b\nff"}, 0).node_cpus(), 1);
}

TEST(Topology, NodeRecordCarriesThisProcessCpus) {
    ccl::Config c;
    c.node_id = "n1";
    const std::string rec = ccl::node_record(c);
    ASSERT_EQ(rec.rfind("n1\n", 0), 0u) << rec;
    cpu_set_t set;
    ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
    EXPECT_EQ(ccl::Topology({rec}, 0).node_cpus(), CPU_COUNT(&set));
    EXPECT_EQ(ccl::Topology({rec}, 0).nnodes(), 1);
}

}  // namespace
