// Version, result strings and the thread-local last error.
#include <string>

#include "api.h"
#include "core/log.h"

namespace ccl::capi {

namespace {
thread_local std::string last_error;
}

ccl_result_t fail(const char* fn, ccl_result_t code, const std::string& message) {
    last_error = std::string(fn) + ": " + message;
    // Argument errors are the caller's to handle; the rest deserve a line even if nobody checks.
    if (code == CCL_ERROR_INVALID_ARGUMENT || code == CCL_ERROR_INVALID_USAGE ||
        code == CCL_ERROR_UNSUPPORTED)
        log().debug("{}", last_error);
    else
        log().error("{}", last_error);
    return code;
}

const char* last_error_cstr() { return last_error.c_str(); }

void set_last_error(const char* fn, const std::string& message) {
    last_error = std::string(fn) + ": " + message;
}

}  // namespace ccl::capi

extern "C" {

ccl_result_t ccl_get_version(int* major, int* minor, int* patch) {
    return ccl::capi::guarded(__func__, [&] {
        ccl::capi::require_out(major, "major");
        ccl::capi::require_out(minor, "minor");
        ccl::capi::require_out(patch, "patch");
        *major = CCL_VERSION_MAJOR;
        *minor = CCL_VERSION_MINOR;
        *patch = CCL_VERSION_PATCH;
    });
}

const char* ccl_strerror(ccl_result_t result) { return ccl::result_name(result); }

const char* ccl_last_error(void) { return ccl::capi::last_error_cstr(); }

}  // extern "C"
