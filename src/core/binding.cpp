#include "core/binding.h"

#include <dirent.h>
#include <hwloc.h>
#include <sys/types.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>

namespace ccl {

namespace {

// The machine's cores among this process's cpus, and whether those are all the cpus it is
// allowed (by cgroups and the machine): then nobody bound it.
struct Cores {
    std::vector<cpu_set_t> cores;
    bool unbound = false;
};

Cores read_cores(std::string& why) {
    Cores out;
    cpu_set_t mine;
    if (sched_getaffinity(0, sizeof(mine), &mine) != 0) {
        why = "cannot read this process's cpus";
        return out;
    }
    hwloc_topology_t topo;
    if (hwloc_topology_init(&topo) != 0) {
        why = "cannot read the machine's topology (hwloc)";
        return out;
    }
    if (hwloc_topology_load(topo) != 0) {
        why = "cannot read the machine's topology (hwloc)";
        hwloc_topology_destroy(topo);
        return out;
    }
    const int ncores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
    for (int c = 0; c < ncores; ++c) {
        hwloc_obj_t core = hwloc_get_obj_by_type(topo, HWLOC_OBJ_CORE, unsigned(c));
        cpu_set_t set;
        CPU_ZERO(&set);
        int pu = -1;
        while ((pu = hwloc_bitmap_next(core->cpuset, pu)) >= 0)
            if (pu < CPU_SETSIZE && CPU_ISSET(pu, &mine)) CPU_SET(pu, &set);
        if (CPU_COUNT(&set) > 0) out.cores.push_back(set);
    }
    int allowed = 0;
    bool all = true;
    int pu = -1;
    while ((pu = hwloc_bitmap_next(hwloc_topology_get_allowed_cpuset(topo), pu)) >= 0) {
        ++allowed;
        all = all && pu < CPU_SETSIZE && CPU_ISSET(pu, &mine);
    }
    out.unbound = all && allowed == CPU_COUNT(&mine);
    hwloc_topology_destroy(topo);
    if (out.cores.empty()) why = "no cores found (hwloc)";
    return out;
}

std::vector<cpu_set_t> share(const std::vector<cpu_set_t>& cores, int n, int per_rank,
                             std::string& why) {
    const size_t c = cores.size(), un = size_t(n), k = size_t(per_rank);
    if (c < un * std::max<size_t>(k, 1)) {
        why = std::to_string(n) + " ranks" + (k > 1 ? " of " + std::to_string(k) + " cores" : "") +
              " but " + std::to_string(c) + " cores to run on";
        return {};
    }
    std::vector<cpu_set_t> sets(un);
    for (size_t r = 0; r < un; ++r) {
        CPU_ZERO(&sets[r]);
        const size_t first = k ? r * k : r * c / un, last = k ? (r + 1) * k : (r + 1) * c / un;
        for (size_t i = first; i < last; ++i) CPU_OR(&sets[r], &sets[r], &cores[i]);
    }
    return sets;
}

std::string cpu_list(const cpu_set_t& set) {
    std::string s;
    for (int c = 0; c < CPU_SETSIZE; ++c) {
        if (!CPU_ISSET(c, &set)) continue;
        int last = c;
        while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, &set)) ++last;
        if (!s.empty()) s += ',';
        s += std::to_string(c) + (last > c ? "-" + std::to_string(last) : "");
        c = last;
    }
    return s;
}

}  // namespace

std::vector<cpu_set_t> core_sets(int n, int per_rank, std::string& why) {
    Cores m = read_cores(why);
    return m.cores.empty() ? std::vector<cpu_set_t>{} : share(m.cores, n, per_rank, why);
}

std::string bind_if_unbound(int local_rank, int local_size) {
    static std::atomic<bool> once{false};
    if (local_size < 2 || local_rank < 0 || local_rank >= local_size || once.exchange(true))
        return "";
    std::string why;
    Cores m = read_cores(why);
    if (!m.unbound || m.cores.empty()) return "";
    std::vector<cpu_set_t> sets = share(m.cores, local_size, 0, why);
    if (sets.empty()) return "";  // more ranks than cores: the scheduler shares them out
    const cpu_set_t& set = sets[size_t(local_rank)];
    // Every thread the process has so far (a framework's pools, ccl's workers); later ones
    // inherit their creator's cpus.
    int bound = 0, failed = 0;
    if (DIR* dir = opendir("/proc/self/task")) {
        while (dirent* e = readdir(dir)) {
            const pid_t tid = pid_t(std::atoi(e->d_name));
            if (tid <= 0) continue;
            (sched_setaffinity(tid, sizeof(set), &set) == 0 ? bound : failed)++;
        }
        closedir(dir);
    } else if (sched_setaffinity(0, sizeof(set), &set) == 0) {
        bound = 1;
    }
    if (!bound) return "";
    return "local rank " + std::to_string(local_rank) + " of " + std::to_string(local_size) +
           " was unbound: bound its " + std::to_string(bound) + " thread(s) to cpus " +
           cpu_list(set) + (failed ? " (" + std::to_string(failed) + " failed)" : "") +
           " (CCL_BIND=none would leave them)";
}

}  // namespace ccl
