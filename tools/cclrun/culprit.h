// Finding the rank a job's failure points at (cclrun names it): ranks time out or see a peer die
// because of another rank, and their errors name it ("waiting for rank 1", "rank 1 (pid 123)
// died", "rank 2 of this communicator failed first"); a rank stopped by a signal is seen in /proc.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

namespace cclrun {

struct NamedRank {
    int rank;
    std::string line;  // the line that names it, trimmed, for quoting
};

// The other rank that the last line of `text` naming one ("rank N", not `own`) names first;
// nullopt when no line does. Only the last lines count: what a rank said last is why it failed.
std::optional<NamedRank> rank_named_in(std::string_view text, int own);

// Whether the process is stopped (state T, or t: traced) rather than running or sleeping.
bool is_stopped(pid_t pid);

}  // namespace cclrun
