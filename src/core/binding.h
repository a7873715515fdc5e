// Where a rank runs. Ranks whose threads may run anywhere on the machine migrate when they wake
// each other, and two ranks (or a rank and another's progress worker) end up sharing a cpu while
// another idles: at 16 ranks on 16 cores a nonblocking 8-byte allreduce took 65-377 us unbound
// and 2-3 us bound (docs/launching.md). cclrun binds its ranks (tools/cclrun); ranks that another
// launcher left unbound (torchrun) bind themselves at their first communicator (CCL_BIND).
#pragma once

#include <sched.h>

#include <string>
#include <vector>

namespace ccl {

// The cpus of each of `n` ranks, among the cpus this process may use, cores in the machine's
// order (package and NUMA node first), each with all its hardware threads: local rank i gets
// cores [i k, (i + 1) k) for `per_rank` k > 0, else [i C / n, (i + 1) C / n) of the C cores (an
// equal share). Empty when they do not fit (n k or n more than C) or the topology cannot be read;
// `why` then says so.
std::vector<cpu_set_t> core_sets(int n, int per_rank, std::string& why);

// When this process may run on every cpu it is allowed (nobody bound it) and it is local rank
// `local_rank` of `local_size` > 1 ranks that fit on the cores: binds every thread of the
// process to its equal share of the cores, as cclrun does, and says so (for the log). Once per
// process; "" when it did nothing.
std::string bind_if_unbound(int local_rank, int local_size);

}  // namespace ccl
