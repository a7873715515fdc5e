// Which ranks of a communicator share a node: they share memory among themselves and reach the
// others through the fabric. Nodes are told apart by a node id (core/config.h: CCL_NODE_ID, else
// the host name and boot id), numbered in the order of their lowest rank.
#pragma once

#include <string>
#include <vector>

namespace ccl {

struct Config;

// This process's node id: CCL_NODE_ID when set, else "<hostname>/<boot id>".
std::string node_id(const Config& cfg);

class Topology {
public:
    Topology() = default;
    // From every rank's node id (index = rank), as seen by `rank`.
    Topology(const std::vector<std::string>& ids, int rank);

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

private:
    std::vector<int> node_of_, local_of_;
    std::vector<std::vector<int>> ranks_of_;
    int node_ = 0, local_rank_ = 0;
};

}  // namespace ccl
