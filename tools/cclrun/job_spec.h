// What cclrun tells its agent on a host (cclrun --agent) about the ranks to start there. It
// travels on the agent's stdin, so that the KVS address and its secret never appear on a command
// line (ps) or in the launcher's environment; stdin then stays open as the link to cclrun.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "binding.h"

namespace cclrun {

struct JobSpec {
    std::string host;         // the host's name in cclrun's list, for messages
    std::string kvs_address;  // "a.b.c.d:port/secret"
    std::string cwd;          // the ranks' working directory
    int size = 0;             // ranks in the job
    int first_rank = 0;       // this host's ranks: first_rank .. first_rank + local_size - 1
    int local_size = 0;
    bool label = false;             // prefix output lines with "[rank] "
    Bind bind = Bind::none;         // --bind-to (automatic: block when the ranks fit)
    int cores_per_rank = 0;         // --cpus-per-rank with block (0: an equal share)
    std::vector<std::string> env;   // "NAME=value" to set in the ranks' environment
    std::vector<std::string> argv;  // the program and its arguments
};

// "cclrun-job 1\n", then records "key length\n" + value + "\n", then "end 0\n\n".
std::string encode(const JobSpec& spec);

// Decodes the spec when all of it is in `data`; nullopt while more is to come. Throws
// std::runtime_error when it is malformed.
std::optional<JobSpec> decode(std::string_view data);

}  // namespace cclrun
