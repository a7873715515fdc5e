#include "base/error.h"

#include <cerrno>
#include <cstring>

namespace ccl {

void throw_errno(const std::string& what, int err) {
    ccl_result_t code =
        (err == ENOMEM || err == ENOSPC) ? CCL_ERROR_OUT_OF_MEMORY : CCL_ERROR_SYSTEM;
    throw Error(code, what + ": " + std::strerror(err));
}

void throw_errno(const std::string& what) { throw_errno(what, errno); }

const char* result_name(ccl_result_t result) {
    switch (result) {
        case CCL_SUCCESS: return "success";
        case CCL_ERROR_INVALID_ARGUMENT: return "invalid argument";
        case CCL_ERROR_INVALID_USAGE: return "invalid usage";
        case CCL_ERROR_TIMEOUT: return "timed out";
        case CCL_ERROR_PEER_FAILURE: return "peer failure";
        case CCL_ERROR_SYSTEM: return "system error";
        case CCL_ERROR_OUT_OF_MEMORY: return "out of memory";
        case CCL_ERROR_UNSUPPORTED: return "unsupported";
        case CCL_ERROR_INTERNAL: return "internal error";
        case CCL_IN_PROGRESS: return "in progress";
        case CCL_ERROR_ABORTED: return "aborted";
    }
    return "unknown result code";
}

}  // namespace ccl
