// Version, result strings, the thread-local last error and the handles' random keys.
#include <sys/random.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>

#include "api.h"
#include "base/log.h"

namespace ccl::capi {

namespace {
// Trivially destructible: a call made at exit, after this thread's thread-local objects were
// destroyed (an atexit handler, a static's destructor), still has it. Longer messages are cut.
constexpr size_t kLastErrorBytes = 2048;
thread_local char last_error[kLastErrorBytes];

void set(const char* fn, const std::string& message) {
    const size_t n = std::strlen(fn);
    std::string line;
    line.reserve(n + 2 + message.size());
    line.append(fn, n).append(": ").append(message);
    const size_t len = std::min(line.size(), kLastErrorBytes - 1);
    std::memcpy(last_error, line.data(), len);
    last_error[len] = '\0';
}
}  // namespace

ccl_result_t fail(const char* fn, ccl_result_t code, const std::string& message) {
    set(fn, message);
    // Argument errors are the caller's to handle; the rest deserve a line even if nobody checks,
    // and so does a collective mismatch, a usage error of the whole job that breaks the
    // communicator on every rank (its message says which values differed, on which rank).
    const bool mismatch = message.rfind("collective mismatch", 0) == 0;
    if (!mismatch && (code == CCL_ERROR_INVALID_ARGUMENT || code == CCL_ERROR_INVALID_USAGE ||
                      code == CCL_ERROR_UNSUPPORTED))
        log().debug("{}: {}", fn, message);
    else
        log().error("{}: {}", fn, message);
    return code;
}

const char* last_error_cstr() { return last_error; }

void set_last_error(const char* fn, const std::string& message) { set(fn, message); }

uint64_t random_key() noexcept {
    uint64_t key = 0;
    if (::getrandom(&key, sizeof key, GRND_NONBLOCK) == ssize_t(sizeof key) && key) return key;
    // No entropy yet (early boot): the clock, the pid and where things were mapped.
    key = uint64_t(std::chrono::steady_clock::now().time_since_epoch().count()) ^
          uint64_t(::getpid()) << 40 ^ reinterpret_cast<uintptr_t>(&key) ^
          reinterpret_cast<uintptr_t>(&random_key);
    key ^= key >> 31;
    key *= 0xbf58476d1ce4e5b9ull;
    return key ^ (key >> 29);
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
