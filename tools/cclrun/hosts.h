// cclrun's hosts: the --hosts list and the --hostfile, where each rank goes, and the command that
// starts cclrun's agent on a host (--launcher-cmd).
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace cclrun {

// A mistake on the command line or in the host file: cclrun says it and exits with status 2.
struct BadUsage : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct Host {
    std::string name;
    int slots = 0;  // ranks it takes; 0 when the list or file does not say
};

// "h1,h2:4,h3": names, each with an optional ":slots".
std::vector<Host> parse_host_list(const std::string& text);

// One host a line: "name", "name:slots" or "name slots=N"; '#' starts a comment.
std::vector<Host> read_hostfile(const std::string& path);

// The ranks of one host: first_rank .. first_rank + nranks - 1 (their local ranks 0 .. nranks-1).
struct Placement {
    std::string host;
    int first_rank = 0;
    int nranks = 0;
};

// Fills the hosts in order, each with `ppn` ranks when ppn > 0, else with its slots, else with
// ceil(nranks / hosts) ranks. nranks 0 takes every slot (ppn x hosts, or the slots' sum). Hosts
// left without ranks are not used. Throws BadUsage when the ranks do not fit.
std::vector<Placement> place_ranks(const std::vector<Host>& hosts, int nranks, int ppn);

// The words of `launcher` (split at blanks, no quoting) with "{host}" replaced by host (the host
// appended when no word holds "{host}"), followed by `command`.
std::vector<std::string> launcher_argv(const std::string& launcher, const std::string& host,
                                       const std::vector<std::string>& command);

}  // namespace cclrun
