// Where cclrun's ranks run: each on cores of its own, so that the scheduler never puts two of
// them, or a rank and another's progress worker, on one cpu while another cpu idles. Unbound ranks
// migrate when their threads wake each other: a nonblocking 8-byte allreduce at 2 ranks on 2 cores
// then took 20-90 us in one launch out of eight instead of about 1 us, and at 16 ranks on 16
// cores 0.1-2 ms (docs/launching.md).
#pragma once

#include <sched.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cclrun {

enum class Bind {
    automatic,  // block on this machine when the ranks fit, none with --hosts
    block,      // an equal share of the cores each (Intel MPI's default domains)
    core,       // one core each
    none,
};

// Its name ("auto", "block", "core", "none"; the job spec carries it so), and back (nullopt for
// any other name).
const char* bind_name(Bind b);
std::optional<Bind> bind_named(std::string_view name);

// --bind-to's value: "block", "core" or "none"; throws BadUsage otherwise.
Bind parse_bind(const std::string& text);

// The cpus of each of `n` ranks, among the cpus this process may use, cores in the machine's
// order (package and NUMA node first), each with all its hardware threads: local rank i gets
// cores [i k, (i + 1) k) for `per_rank` k > 0, else [i C / n, (i + 1) C / n) of the C cores (an
// equal share). Empty when they do not fit (n k or n more than C) or the topology cannot be read;
// `why` then says so.
std::vector<cpu_set_t> core_sets(int n, int per_rank, std::string& why);

}  // namespace cclrun
