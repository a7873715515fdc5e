#include "core/topology.h"

#include <sched.h>
#include <unistd.h>

#include <bitset>
#include <fstream>
#include <map>
#include <optional>

#include "base/config.h"

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

namespace {

using CpuBits = std::bitset<CPU_SETSIZE>;

std::string cpus_hex() {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) != 0) return "";
    std::string hex;
    for (int c = CPU_SETSIZE - 4; c >= 0; c -= 4) {
        int digit = 0;
        for (int b = 3; b >= 0; --b) digit = digit * 2 + (CPU_ISSET(c + b, &set) ? 1 : 0);
        if (digit || !hex.empty()) hex += "0123456789abcdef"[digit];
    }
    return hex;
}

// The cpus of a record's hex; nullopt when it has none or it is malformed.
std::optional<CpuBits> parse_cpus(const std::string& hex) {
    if (hex.empty() || hex.size() > CPU_SETSIZE / 4) return std::nullopt;
    CpuBits bits;
    for (size_t i = 0; i < hex.size(); ++i) {
        const char ch = hex[hex.size() - 1 - i];
        const int digit = ch >= '0' && ch <= '9'   ? ch - '0'
                          : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
                                                   : -1;
        if (digit < 0) return std::nullopt;
        for (int b = 0; b < 4; ++b)
            if (digit >> b & 1) bits.set(4 * i + size_t(b));
    }
    return bits;
}

}  // namespace

std::string node_record(const Config& cfg) {
    std::string id = node_id(cfg), cpus = cpus_hex();
    // Bootstrap records hold 511 bytes: a very long id goes without its cpus (node_cpus() 0).
    return id.size() + cpus.size() < 480 ? id + "\n" + cpus : id;
}

Topology::Topology(const std::vector<std::string>& records, int rank) {
    std::map<std::string, int> index;
    std::vector<std::string> ids, cpus;
    for (const std::string& rec : records) {
        const size_t nl = rec.rfind('\n');
        ids.push_back(rec.substr(0, nl));
        cpus.push_back(nl == std::string::npos ? "" : rec.substr(nl + 1));
    }
    for (size_t r = 0; r < ids.size(); ++r) {
        auto [it, added] = index.emplace(ids[r], int(ranks_of_.size()));
        if (added) ranks_of_.emplace_back();
        node_of_.push_back(it->second);
        local_of_.push_back(int(ranks_of_[size_t(it->second)].size()));
        ranks_of_[size_t(it->second)].push_back(int(r));
    }
    node_ = node_of_[size_t(rank)];
    local_rank_ = local_of_[size_t(rank)];
    CpuBits all;
    for (int r : ranks_of_[size_t(node_)]) {
        auto bits = parse_cpus(cpus[size_t(r)]);
        if (!bits) return;  // unknown: node_cpus() stays 0
        all |= *bits;
    }
    node_cpus_ = int(all.count());
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
