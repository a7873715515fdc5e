#include "core/topology.h"

#include <unistd.h>

#include <fstream>
#include <map>

#include "core/config.h"

namespace ccl {

std::string node_id(const Config& cfg) {
    if (!cfg.node_id.empty()) return cfg.node_id;
    // Ranks share memory when they share a host: its name and this boot.
    char name[256] = {};
    ::gethostname(name, sizeof(name) - 1);
    std::string boot;
    std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
    return std::string(name) + "/" + boot;
}

Topology::Topology(const std::vector<std::string>& ids, int rank) {
    std::map<std::string, int> index;
    for (size_t r = 0; r < ids.size(); ++r) {
        auto [it, added] = index.emplace(ids[r], int(ranks_of_.size()));
        if (added) ranks_of_.emplace_back();
        node_of_.push_back(it->second);
        local_of_.push_back(int(ranks_of_[size_t(it->second)].size()));
        ranks_of_[size_t(it->second)].push_back(int(r));
    }
    node_ = node_of_[size_t(rank)];
    local_rank_ = local_of_[size_t(rank)];
}

std::vector<int> Topology::leaders() const {
    std::vector<int> l;
    for (const auto& ranks : ranks_of_) l.push_back(ranks[0]);
    return l;
}

bool Topology::uniform() const {
    for (const auto& ranks : ranks_of_)
        if (ranks.size() != ranks_of_[0].size()) return false;
    return true;
}

}  // namespace ccl
