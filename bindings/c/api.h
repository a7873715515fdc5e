// Shared by the extern "C" functions: the exception -> ccl_result_t boundary and the registry that
// validates opaque handles.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "ccl/ccl.h"
#include "core/error.h"

namespace ccl::capi {

// Records `message` as this thread's last error (prefixed with the function name) and returns code.
ccl_result_t fail(const char* fn, ccl_result_t code, const std::string& message);
const char* last_error_cstr();
// Sets this thread's last-error message without logging it (a state reported, not a failure).
void set_last_error(const char* fn, const std::string& message);

// Runs `body` and turns whatever it throws into a result code plus last-error message: nothing
// escapes into the caller's C code.
template <class F>
ccl_result_t guarded(const char* fn, F&& body) noexcept {
    try {
        body();
        return CCL_SUCCESS;
    } catch (const Error& e) {
        return fail(fn, e.code(), e.what());
    } catch (const std::bad_alloc&) {
        return fail(fn, CCL_ERROR_OUT_OF_MEMORY, "out of memory");
    } catch (const std::exception& e) {
        return fail(fn, CCL_ERROR_INTERNAL, std::string("internal error: ") + e.what());
    } catch (...) {
        return fail(fn, CCL_ERROR_INTERNAL, "internal error: unknown exception");
    }
}

// Live objects behind opaque handles. A handle is a never-reused number (with a type tag in its low
// bits), not a pointer: NULL, destroyed and wrong-type handles are all detected.
template <class T, uintptr_t Tag>
class HandleTable {
public:
    template <class H>
    H add(std::shared_ptr<T> object) {
        std::lock_guard<std::mutex> lock(mu_);
        uintptr_t id = (next_++ << 4) | Tag;
        live_.emplace(id, std::move(object));
        return reinterpret_cast<H>(id);
    }
    std::shared_ptr<T> get(const void* handle, const char* what) {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = live_.find(reinterpret_cast<uintptr_t>(handle));
        if (it == live_.end()) throw invalid(handle, what);
        return it->second;
    }
    // The object, for a call that the threading rules let use it without holding a reference
    // (only the calling thread may destroy it meanwhile, as for a communicator's calls). A
    // per-thread memo of the last lookup, valid while nothing was removed since, saves the lock
    // and the reference count on the path of every collective.
    T& use(const void* handle, const char* what) {
        static thread_local Memo memo;  // trivially destructible: no per-access TLS guard
        const uint64_t removals = removals_.load(std::memory_order_acquire);
        if (memo.handle == handle && memo.removals == removals && handle) return *memo.object;
        std::shared_ptr<T> object = get(handle, what);
        memo = {handle, object.get(), removals};
        return *object;
    }
    std::shared_ptr<T> remove(const void* handle, const char* what) {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = live_.find(reinterpret_cast<uintptr_t>(handle));
        if (it == live_.end()) throw invalid(handle, what);
        std::shared_ptr<T> object = std::move(it->second);
        live_.erase(it);
        removals_.fetch_add(1, std::memory_order_acq_rel);  // before the object can go
        return object;
    }

private:
    static Error invalid(const void* handle, const char* what) {
        return Error(
            CCL_ERROR_INVALID_ARGUMENT,
            handle ? std::string(what) + " handle is not valid (destroyed, or not a " + what + ")"
                   : std::string(what) + " handle is NULL");
    }
    struct Memo {
        const void* handle = nullptr;
        T* object = nullptr;
        uint64_t removals = 0;
    };
    std::mutex mu_;
    std::atomic<uint64_t> removals_{0};
    std::unordered_map<uintptr_t, std::shared_ptr<T>> live_;
    uintptr_t next_ = 1;
};

// An output pointer argument must not be NULL.
inline void require_out(const void* p, const char* name) {
    if (!p) throw Error(CCL_ERROR_INVALID_ARGUMENT, std::string(name) + " is NULL");
}

}  // namespace ccl::capi
