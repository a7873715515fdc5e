// Where cclrun's ranks run: one core each (--bind-to core), so that the scheduler never puts two
// of them, or a rank and another's progress worker, on one cpu while another cpu idles. Unbound
// ranks migrate when their threads wake each other, and a nonblocking 8-byte allreduce at 2 ranks
// on 2 cores then took 20-90 us in one launch out of eight instead of about 1 us
// (docs/launching.md).
#pragma once

#include <sched.h>

#include <string>
#include <vector>

namespace cclrun {

enum class Bind {
    automatic,  // core on this machine when the ranks fit, none with --hosts (see usage)
    core,
    none,
};

// "core" or "none"; throws BadUsage otherwise.
Bind parse_bind(const std::string& text);

// The cpus of each of `n` ranks: core i (all its hardware threads) for local rank i, cores in the
// machine's order (package and NUMA node first), among the cpus this process may use. Empty when
// they do not fit (more ranks than cores) or the topology cannot be read; `why` then says so.
std::vector<cpu_set_t> core_sets(int n, std::string& why);

}  // namespace cclrun
