// Which ranks of a communicator share a node: they share memory among themselves and reach the
// others through the fabric. Nodes are told apart by a node id (base/config.h: CCL_NODE_ID, else
// the host name and boot id), numbered in the order of their lowest rank.
#pragma once

#include <string>
#include <vector>

namespace ccl {

struct Config;

// This process's node id: CCL_NODE_ID when set, else "<hostname>/<boot id>".
std::string node_id(const Config& cfg);

// What a rank tells the others when a communicator is made: its node id, a newline, and the cpus
// it may run on (sched_getaffinity, in hex, cpu 0 in the last digit).
std::string node_record(const Config& cfg);

class Topology {
public:
    Topology() = default;
    // From every rank's node_record (or bare node id; index = rank), as seen by `rank`.
    Topology(const std::vector<std::string>& records, int rank);

    int nnodes() const { return int(ranks_of_.size()); }
    int node() const { return node_; }  // mine
    int node_of(int rank) const { return node_of_[size_t(rank)]; }
    int local_rank_of(int rank) const { return local_of_[size_t(rank)]; }
    const std::vector<int>& ranks_of(int node) const { return ranks_of_[size_t(node)]; }
    int local_rank() const { return local_rank_; }
    int local_size() const { return int(ranks_of_[size_t(node_)].size()); }
    int leader(int node) const { return ranks_of_[size_t(node)][0]; }
    std::vector<int> leaders() const;  // one per node, in node order
    // Whether every node has the same number of ranks.
    bool uniform() const;
    // How many cpus this node's ranks may run on together (the union of their cpus): whether
    // each has a core of its own, also when a launcher bound each to one. 0 if a rank's record
    // did not say.
    int node_cpus() const { return node_cpus_; }

private:
    std::vector<int> node_of_, local_of_;
    std::vector<std::vector<int>> ranks_of_;
    int node_ = 0, local_rank_ = 0, node_cpus_ = 0;
};

}  // namespace ccl
