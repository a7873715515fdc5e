#include "binding.h"

#include <hwloc.h>

#include <algorithm>

#include "hosts.h"

namespace cclrun {

const char* bind_name(Bind b) {
    switch (b) {
        case Bind::automatic: return "auto";
        case Bind::block: return "block";
        case Bind::core: return "core";
        case Bind::none: break;
    }
    return "none";
}

std::optional<Bind> bind_named(std::string_view name) {
    for (Bind b : {Bind::automatic, Bind::block, Bind::core, Bind::none})
        if (name == bind_name(b)) return b;
    return std::nullopt;
}

Bind parse_bind(const std::string& text) {
    std::optional<Bind> b = bind_named(text);
    if (!b || *b == Bind::automatic)
        throw BadUsage("--bind-to wants block, core or none, not '" + text + "'");
    return *b;
}

std::vector<cpu_set_t> core_sets(int n, int per_rank, std::string& why) {
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) {
        why = "cannot read this process's cpus";
        return {};
    }
    hwloc_topology_t topo;
    if (hwloc_topology_init(&topo) != 0) {
        why = "cannot read the machine's topology (hwloc)";
        return {};
    }
    std::vector<cpu_set_t> cores;
    if (hwloc_topology_load(topo) == 0) {
        const int ncores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
        for (int c = 0; c < ncores; ++c) {
            hwloc_obj_t core = hwloc_get_obj_by_type(topo, HWLOC_OBJ_CORE, unsigned(c));
            cpu_set_t set;
            CPU_ZERO(&set);
            int pu = -1;
            while ((pu = hwloc_bitmap_next(core->cpuset, pu)) >= 0)
                if (pu < CPU_SETSIZE && CPU_ISSET(pu, &allowed)) CPU_SET(pu, &set);
            if (CPU_COUNT(&set) > 0) cores.push_back(set);
        }
    } else {
        why = "cannot read the machine's topology (hwloc)";
    }
    hwloc_topology_destroy(topo);
    if (cores.empty()) return {};
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

}  // namespace cclrun
