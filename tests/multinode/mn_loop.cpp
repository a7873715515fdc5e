// mn_loop: one rank of a job across (fake) nodes that calls a collective in a loop until it
// fails, for the tests that break a node in the middle of one (tests/multinode/midcoll_fault.sh).
//   mn_loop --results DIR [--coll mix|allreduce|allreduce_large|broadcast|barrier|group_alltoall]
//           [--seconds S]
// (mix, the default: a 4 MiB allreduce, a 1 KiB one and a 4 MiB broadcast in turn;
// group_alltoall: four alltoalls of 4 MiB in one group, one call)
// Prints "rank R ready pid P" after its first successful call. When a call fails the rank
// writes DIR/rank.R: "<PEER_FAILURE|TIMEOUT|OTHER:code> <CLOCK_REALTIME seconds of the failure>
// <seconds since the failed call started>", destroys its communicator, then waits (at most 30 s)
// until every surviving rank wrote its file or died before it exits 3: cclrun stops every rank as
// soon as one exits, which would hide whether the others notice the failure by themselves. SIGTERM
// is ignored for the same reason (cclrun's SIGKILL 2 s later still ends it). Exits 0 when the loop
// ran S seconds (default 60) without an error, 1 on a setup error.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "ccl/ccl.h"

namespace {

double realtime_s() {
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

ccl_result_t once(const std::string& coll, ccl_comm_t comm, int size, std::vector<float>& a,
                  std::vector<float>& b) {
    if (coll == "allreduce")
        return ccl_allreduce(a.data(), b.data(), 256, CCL_FLOAT32, CCL_SUM, comm, nullptr, nullptr);
    if (coll == "allreduce_large")
        return ccl_allreduce(a.data(), b.data(), a.size(), CCL_FLOAT32, CCL_SUM, comm, nullptr,
                             nullptr);
    if (coll == "broadcast")
        return ccl_broadcast(a.data(), a.size(), CCL_FLOAT32, 0, comm, nullptr, nullptr);
    if (coll == "group_alltoall") {
        ccl_group_start();
        for (int k = 0; k < 4; ++k)
            ccl_alltoall(a.data(), b.data(), a.size() / size_t(size), CCL_FLOAT32, comm, nullptr,
                         nullptr);
        return ccl_group_end();
    }
    return ccl_barrier(comm, nullptr);
}

}  // namespace

int main(int argc, char** argv) {
    std::string dir, coll = "mix";
    double seconds = 60;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string a = argv[i];
        if (a == "--results")
            dir = argv[i + 1];
        else if (a == "--coll")
            coll = argv[i + 1];
        else if (a == "--seconds")
            seconds = std::atof(argv[i + 1]);
    }
    if (dir.empty()) {
        std::fprintf(stderr, "usage: mn_loop --results DIR [--coll C] [--seconds S]\n");
        return 1;
    }
    signal(SIGTERM, SIG_IGN);
    ccl_comm_t comm = nullptr;
    if (ccl_comm_create_from_env(&comm) != CCL_SUCCESS) {
        std::fprintf(stderr, "mn_loop: ccl_comm_create_from_env: %s\n", ccl_last_error());
        return 1;
    }
    int rank = 0, size = 0;
    ccl_comm_rank(comm, &rank);
    ccl_comm_size(comm, &size);
    std::vector<float> a(1 << 20, 1.0f), b(a.size());  // 4 MiB: "large" spans many messages
    using Clock = std::chrono::steady_clock;
    const auto end = Clock::now() + std::chrono::duration<double>(seconds);
    ccl_result_t r = CCL_SUCCESS;
    double call_s = 0;
    for (long it = 0; Clock::now() < end; ++it) {
        const auto t0 = Clock::now();
        static const char* const kMix[] = {"allreduce_large", "allreduce", "broadcast"};
        r = once(coll == "mix" ? kMix[it % 3] : coll, comm, size, a, b);
        call_s = std::chrono::duration<double>(Clock::now() - t0).count();
        if (r != CCL_SUCCESS) break;
        if (it == 0) {
            std::printf("rank %d ready pid %d\n", rank, int(getpid()));
            std::fflush(stdout);
        }
    }
    if (r == CCL_SUCCESS) {
        ccl_comm_destroy(comm);
        return 0;
    }
    const double when = realtime_s();
    const std::string why = ccl_last_error();
    ccl_comm_destroy(comm);
    const std::string path = dir + "/rank." + std::to_string(rank);
    if (FILE* f = std::fopen((path + ".new").c_str(), "w")) {
        std::fprintf(f, "%s %.3f %.3f\n",
                     r == CCL_ERROR_PEER_FAILURE ? "PEER_FAILURE"
                     : r == CCL_ERROR_TIMEOUT    ? "TIMEOUT"
                                                 : ("OTHER:" + std::to_string(int(r))).c_str(),
                     when, call_s);
        std::fclose(f);
        std::rename((path + ".new").c_str(), path.c_str());
    }
    std::printf("rank %d: %s failed with \"%s\" after %.2f s in the call: %s\n", rank, coll.c_str(),
                ccl_strerror(r), call_s, why.c_str());
    std::fflush(stdout);
    // The test script writes DIR/done when every survivor reported (or 30 s passed).
    for (int i = 0; i < 300 && access((dir + "/done").c_str(), F_OK) != 0; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    return 3;
}
