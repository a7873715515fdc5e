// Objects made once and never destroyed, for what a call may touch while the process exits (an
// atexit handler or a static's destructor calling ccl_comm_destroy, as DeepSpeed does): a
// function-local static would be gone by then. The one place such objects are made.
#pragma once

#include <utility>

namespace ccl {

// A new T that lives until the process ends; keep the reference in a function-local static.
template <class T, class... Args>
T& immortal(Args&&... args) {
    return *new T(std::forward<Args>(args)...);  // never deleted, by design
}

}  // namespace ccl
