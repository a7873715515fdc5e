#include "core/error.h"

#include <cerrno>
#include <cstring>

namespace ccl {

void throw_errno(const std::string& what, int err) {
    ccl_result_t code = (err == ENOMEM || err == ENOSPC) ? CCL_ERROR_OUT_OF_MEMORY : CCL_ERROR_SYSTEM;
    throw Error(code, what + ": " + std::strerror(err));
}

void throw_errno(const std::string& what) { throw_errno(what, errno); }

}  // namespace ccl
