// Ranks given different settings that choose algorithms (the last rank another CCL_ALLREDUCE, or
// another CCL_ALLREDUCE_DIRECT_MAX): every rank's ccl_comm_create_from_env fails with
// CCL_ERROR_INVALID_USAGE naming the variable, at once, instead of a later call failing as a
// "collective mismatch" that names none. Then, with the settings alike again, a communicator
// works. Usage (under cclrun): settings_differ CCL_ALLREDUCE direct
#include <ccl/ccl.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: %s VARIABLE VALUE (under cclrun)\n", argv[0]);
        return 2;
    }
    const char* rank_text = std::getenv("CCL_RANK");
    const char* size_text = std::getenv("CCL_SIZE");
    if (!rank_text || !size_text) return 2;
    const int rank = std::atoi(rank_text), size = std::atoi(size_text);
    if (rank == size - 1) setenv(argv[1], argv[2], 1);
    ccl_comm_t comm = nullptr;
    const ccl_result_t r = ccl_comm_create_from_env(&comm);
    const std::string message = ccl_last_error();
    if (r != CCL_ERROR_INVALID_USAGE || message.find(argv[1]) == std::string::npos) {
        std::fprintf(stderr, "rank %d: got %s (%s), expected %s naming %s\n", rank, ccl_strerror(r),
                     message.c_str(), ccl_strerror(CCL_ERROR_INVALID_USAGE), argv[1]);
        return 1;
    }
    std::printf("rank %d: %s\n", rank, message.c_str());
    return 0;
}
