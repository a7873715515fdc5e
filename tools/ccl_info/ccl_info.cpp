// ccl_info: what ccl sees in this process's environment: its version, the launcher it detected and
// why, this rank's place in the job, the configuration (every CCL_* variable, its value and
// default) and the CCL_* variables set that ccl does not know. Start it the way the program would
// be started (mpiexec -n 2 ccl_info, srun ccl_info, torchrun ... ccl_info); it starts and connects
// to nothing. Exit status 1 when ccl_comm_create_from_env would fail for the reason it prints, or
// a variable is malformed.
//
// `ccl_info --clean` removes instead the shared-memory segments that ccl processes killed while
// their job started left in /dev/shm (those of this user whose creator is gone: shm/segment.h),
// and names each; `ccl_info --markdown` prints docs/env.md's rows (tests/scripts/check_env_doc.sh).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "base/config.h"
#include "base/error.h"
#include "ccl/ccl.h"
#include "core/topology.h"
#include "kvs/launcher.h"
#include "shm/arena.h"
#include "shm/mailbox.h"
#include "shm/segment.h"
#include "transport/fabric.h"

namespace {

const char* via_text(ccl::kvs::AddressVia via) {
    using ccl::kvs::AddressVia;
    switch (via) {
        case AddressVia::none: return "passed by the application (ccl_comm_create)";
        case AddressVia::given: return "given by cclrun (CCL_KVS_ADDRESS)";
        case AddressVia::pmi: return "served by rank 0, its address shared through PMI-1";
        case AddressVia::pmix: return "served by rank 0, its address shared through PMIx";
        case AddressVia::master: return "served by rank 0 at MASTER_ADDR and a known port";
        case AddressVia::alone: return "served by this rank to itself (a job of one rank)";
    }
    return "?";
}

// Every knob: NAME=value in effect, its default (or "(default)" when it is), its line of env.md.
std::string settings(const ccl::Config& c) {
    std::string out;
    for (const ccl::Knob& k : ccl::knobs()) {
        const std::string value = k.show(c, std::getenv(k.name));
        const std::string dflt = ccl::knob_default(k);
        std::string line = "  " + std::string(k.name) + "=" + value;
        line.resize(std::max<size_t>(line.size() + 1, 40), ' ');
        line += (value == dflt ? "(default) " : "(default " + dflt + ") ") + k.doc + "\n";
        out += line;
    }
    return out;
}

// What the environment sets that no knob is: a typo is silently ignored otherwise.
std::string unknown_variables() {
    std::string out;
    for (const ccl::UnknownVariable& u : ccl::unknown_variables(environ))
        out += "unknown:    " + ccl::unknown_text(u) + "\n";
    return out;
}

// --clean: what remove_stale_segments removed, one line each.
int clean() {
    const auto removed = ccl::shm::remove_stale_segments();
    uint64_t bytes = 0;
    for (const auto& s : removed) {
        bytes += s.bytes;
        if (s.creator)
            std::printf("removed /dev/shm/%s (%.1f MiB): its creator, pid %d, is gone\n",
                        s.name.c_str(), double(s.bytes) / double(1 << 20), int(s.creator));
        else
            std::printf(
                "removed /dev/shm/%s (%.1f MiB): made by a process that is gone, which "
                "died before it wrote the header\n",
                s.name.c_str(), double(s.bytes) / double(1 << 20));
    }
    if (removed.empty())
        std::printf(
            "nothing to remove: no ccl segment in /dev/shm is of a process that is gone "
            "(and %lld s old)\n",
            static_cast<long long>(ccl::shm::kStaleAge.count()));
    else
        std::printf("removed %zu segment(s), %.1f MiB\n", removed.size(),
                    double(bytes) / double(1 << 20));
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc == 2 && std::strcmp(argv[1], "--clean") == 0) return clean();
    if (argc == 2 && std::strcmp(argv[1], "--markdown") == 0) {
        for (const ccl::Knob& k : ccl::knobs()) std::printf("%s\n", ccl::knob_markdown(k).c_str());
        return 0;
    }
    if (argc > 1) {
        bool help = std::strcmp(argv[1], "-h") == 0 || std::strcmp(argv[1], "--help") == 0;
        std::fputs(
            "usage: ccl_info   (start it the way the program is started: mpiexec -n 2 "
            "ccl_info, srun ccl_info, ...)\nPrints ccl's version, the launcher it detects "
            "and why, this rank's place, and the configuration.\n"
            "       ccl_info --clean\nRemoves the shared-memory segments in /dev/shm that ccl "
            "processes which are gone left behind (killed while their job started), and names "
            "each.\n"
            "       ccl_info --markdown\nPrints docs/env.md's row of every variable, from the "
            "table the library parses them by.\n",
            help ? stdout : stderr);
        return help ? 0 : 2;
    }
    std::string out = "ccl " + std::to_string(CCL_VERSION_MAJOR) + "." +
                      std::to_string(CCL_VERSION_MINOR) + "." + std::to_string(CCL_VERSION_PATCH) +
                      "\n";
    int status = 0;
    try {
        const ccl::Config& c = ccl::config();
        const ccl::kvs::ProcessLaunch& found = ccl::kvs::process_launch();
        if (found.launch) {
            const ccl::kvs::Launch& l = *found.launch;
            out += std::string("launcher:   ") + ccl::launcher_name(l.launcher) + "\n";
            out += "why:        " + l.why + "\n";
            if (l.via != ccl::kvs::AddressVia::none)  // forced none: the application says
                out += "rank:       " + std::to_string(l.rank) + " of " + std::to_string(l.size) +
                       "\n";
            out += "local rank: " + std::to_string(found.local_rank) + " of " +
                   std::to_string(found.local_size) + "\n";
            out += std::string("kvs:        ") + via_text(l.via) + "\n";
        } else {
            out += "launcher:   not detected\n";
            out += std::string("error:      ") + ccl::result_name(found.error->code()) + ": " +
                   found.error->what() + "\n";
            status = 1;
        }
        // Ranks with the same node id share memory; the others are reached through the transport
        // CCL_TRANSPORT picks (sockets or libfabric).
        out +=
            "node:       " + ccl::node_id(c) + (c.node_id.empty() ? "" : " (CCL_NODE_ID)") + "\n";
        out += "transports: shm among ranks of this node; to other nodes: " +
               ccl::transport::Fabric::probe() + "\n";
        out += "config:\n" + settings(c);
        // What a communicator of the node's ranks maps (ccl_comm_shm_bytes tells the same of a
        // live one).
        const int local = found.launch ? std::max(1, found.launch->local_size) : 1;
        const size_t shm = ccl::shm::Arena::bytes_needed(local, c.shm_buffer_size) +
                           ccl::shm::Mailbox::bytes_needed(local);
        char line[160];
        std::snprintf(line, sizeof line,
                      "shared memory: %.2f MiB per rank with %d local rank%s (arena and mailbox; "
                      "point-to-point data apart)\n",
                      double(shm) / local / double(1 << 20), local, local == 1 ? "" : "s");
        out += line;
    } catch (const ccl::Error& e) {
        out += std::string("config error: ") + ccl::result_name(e.code()) + ": " + e.what() + "\n";
        status = 1;
    }
    out += unknown_variables();
    std::fwrite(out.data(), 1, out.size(), stdout);  // one write: ranks' blocks stay whole
    return status;
}
