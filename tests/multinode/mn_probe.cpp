// mn_probe: one rank of a job started by cclrun across (fake) nodes. Checks what the launcher
// gave it and meets the other ranks through the KVS, without a communicator (those need the
// fabric transport across hosts):
//   - CCL_RANK, CCL_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE are set, in range, and agree with RANK and
//     WORLD_SIZE;
//   - every rank publishes its host name, local rank and local size; every rank then checks that
//     the ranks of each host have local ranks 0..L-1 once each and all say L ranks on that host;
//   - ranks of one host share /dev/shm and ranks of different hosts do not: each creates a file
//     there and looks for every other rank's.
// Prints "rank R/N local L/LW host H pid P", then "rank R ready" after the first barrier.
//   mn_probe [--loop SECONDS] [--fail-rank R [--fail-code C]]
//     --loop S      then keep meeting in KVS barriers for S seconds (each bounded by
//                   CCL_KVS_TIMEOUT): a rank that cannot reach the KVS makes all of them fail
//     --fail-rank R rank R exits with status C (default 3) after it said "ready"
// Exits 0 when all is well, 1 with a message on stderr otherwise.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/config.h"
#include "kvs/kvs.h"

namespace {

int env_int(const char* name) {
    const char* v = std::getenv(name);
    if (!v || !*v) throw std::runtime_error(std::string(name) + " is not set");
    char* end = nullptr;
    long n = std::strtol(v, &end, 10);
    if (*end != '\0') throw std::runtime_error(std::string(name) + "='" + v + "' is not a number");
    return static_cast<int>(n);
}

void check(bool ok, const std::string& what) {
    if (!ok) throw std::runtime_error(what);
}

struct Peer {
    std::string host;
    int local = -1, local_size = -1;
};

int run(int argc, char** argv) {
    double loop_s = 0;
    int fail_rank = -1, fail_code = 3;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--loop" && i + 1 < argc) {
            loop_s = std::atof(argv[++i]);
        } else if (a == "--fail-rank" && i + 1 < argc) {
            fail_rank = std::atoi(argv[++i]);
        } else if (a == "--fail-code" && i + 1 < argc) {
            fail_code = std::atoi(argv[++i]);
        } else {
            throw std::runtime_error("unknown argument '" + a + "'");
        }
    }
    int rank = env_int("CCL_RANK"), size = env_int("CCL_SIZE");
    int local = env_int("LOCAL_RANK"), local_size = env_int("LOCAL_WORLD_SIZE");
    check(size >= 1 && rank >= 0 && rank < size, "CCL_RANK/CCL_SIZE out of range");
    check(local_size >= 1 && local >= 0 && local < local_size && local_size <= size,
          "LOCAL_RANK/LOCAL_WORLD_SIZE out of range");
    check(env_int("RANK") == rank && env_int("WORLD_SIZE") == size,
          "RANK/WORLD_SIZE disagree with CCL_RANK/CCL_SIZE");
    const char* address = std::getenv("CCL_KVS_ADDRESS");
    check(address && *address, "CCL_KVS_ADDRESS is not set");
    char host[256] = {};
    check(gethostname(host, sizeof(host) - 1) == 0, "gethostname failed");
    std::printf("rank %d/%d local %d/%d host %s pid %d\n", rank, size, local, local_size, host,
                static_cast<int>(getpid()));
    std::fflush(stdout);

    double t = ccl::config().kvs_timeout_s;
    ccl::kvs::Client kvs(address, t);
    // A tag of this job (the KVS port), so that two jobs' files never meet.
    std::string addr(address);
    std::string tag = addr.substr(addr.find(':') + 1, addr.find('/') - addr.find(':') - 1);
    auto shm_file = [&](int r) { return "/dev/shm/mn_probe-" + tag + "-" + std::to_string(r); };
    FILE* f = std::fopen(shm_file(rank).c_str(), "w");
    check(f != nullptr, "cannot create " + shm_file(rank));
    std::fclose(f);

    std::ostringstream me;
    me << host << ' ' << local << ' ' << local_size;
    kvs.put("probe/" + std::to_string(rank), me.str());
    kvs.barrier("probe/in", size, t);

    std::vector<Peer> peers(size);
    std::map<std::string, std::set<int>> locals;
    for (int r = 0; r < size; ++r) {
        std::istringstream in(kvs.get("probe/" + std::to_string(r), t));
        in >> peers[r].host >> peers[r].local >> peers[r].local_size;
        check(!in.fail(), "rank " + std::to_string(r) + " published garbage");
        check(
            locals[peers[r].host].insert(peers[r].local).second,
            "two ranks on " + peers[r].host + " have local rank " + std::to_string(peers[r].local));
    }
    for (int r = 0; r < size; ++r) {
        const auto& set = locals[peers[r].host];
        check(peers[r].local_size == static_cast<int>(set.size()),
              "rank " + std::to_string(r) + " on " + peers[r].host + " says " +
                  std::to_string(peers[r].local_size) + " local ranks, there are " +
                  std::to_string(set.size()));
        check(*set.rbegin() == static_cast<int>(set.size()) - 1,
              "local ranks on " + peers[r].host + " are not 0..n-1");
        bool same = peers[r].host == host;
        bool seen = access(shm_file(r).c_str(), F_OK) == 0;
        check(seen == same, "rank " + std::to_string(r) + " on " + peers[r].host +
                                ": its /dev/shm" + " file is " + (seen ? "" : "not ") +
                                "visible from " + host);
    }
    kvs.barrier("probe/checked", size, t);
    std::remove(shm_file(rank).c_str());
    std::printf("rank %d ready\n", rank);
    std::fflush(stdout);
    if (rank == fail_rank) return fail_code;

    // The same number of barriers on every rank: about loop_s seconds' worth.
    int rounds = static_cast<int>(loop_s * 20);
    for (int i = 0; i < rounds; ++i) {
        kvs.barrier("probe/loop" + std::to_string(i), size, t);
        usleep(50000);
    }
    if (loop_s > 0) kvs.barrier("probe/out", size, t);
    if (rank == 0) std::printf("ok: %d ranks on %zu hosts\n", size, locals.size());
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "mn_probe: rank %s: %s\n", std::getenv("CCL_RANK"), e.what());
        return 1;
    }
}
