// Errors inside ccl are exceptions carrying a ccl_result_t; bindings/c catches them at the ABI
// boundary and turns them into a result code plus the thread's last-error message.
#pragma once

#include <stdexcept>
#include <string>

#include "ccl/ccl.h"

namespace ccl {

class Error : public std::runtime_error {
public:
    // An error never carries CCL_SUCCESS: that would turn a failure into a success.
    Error(ccl_result_t code, const std::string& message)
        : std::runtime_error(message), code_(code == CCL_SUCCESS ? CCL_ERROR_INTERNAL : code) {}
    ccl_result_t code() const { return code_; }

private:
    ccl_result_t code_;
};

// A short name of a result code (what ccl_strerror() returns).
const char* result_name(ccl_result_t result);

// Throws CCL_ERROR_SYSTEM (or CCL_ERROR_OUT_OF_MEMORY for ENOMEM/ENOSPC) with "what: strerror".
[[noreturn]] void throw_errno(const std::string& what, int err);
[[noreturn]] void throw_errno(const std::string& what);  // uses errno

}  // namespace ccl
