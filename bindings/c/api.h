// Shared by the extern "C" functions: the exception -> ccl_result_t boundary and the registry that
// validates opaque handles.
#pragma once

#include <sched.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

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

// A lock for sections of a few dozen instructions (the handle tables'): uncontended, one exchange
// and one store, where a pthread mutex makes two calls and two atomic operations; every
// nonblocking call passes three of them. A waiter yields, as the holder may have been preempted
// on a crowded node.
class SpinLock {
public:
    void lock() {
        while (held_.exchange(true, std::memory_order_acquire))
            while (held_.load(std::memory_order_relaxed)) sched_yield();
    }
    void unlock() { held_.store(false, std::memory_order_release); }

private:
    std::atomic<bool> held_{false};
};

// Live objects behind opaque handles. A handle is a slot of the table, the slot's generation (how
// many objects it held before) and a type tag in its low bits, not a pointer: NULL, destroyed and
// wrong-type handles are all detected (until a slot is reused 2^32 times). Slots are reused, so
// adding and removing cost no allocation.
template <class T, uintptr_t Tag>
class HandleTable {
public:
    template <class H>
    H add(std::shared_ptr<T> object) {
        std::lock_guard<SpinLock> lock(mu_);
        uintptr_t i;
        if (free_.empty()) {
            if (slots_.size() >= kMaxSlots)
                throw Error(CCL_ERROR_OUT_OF_MEMORY, "too many live handles");
            i = slots_.size();
            slots_.emplace_back();
        } else {
            i = free_.back();
            free_.pop_back();
        }
        slots_[i].object = std::move(object);
        return reinterpret_cast<H>((slots_[i].gen << kGenShift) | (i << 4) | Tag);
    }
    std::shared_ptr<T> get(const void* handle, const char* what) {
        std::lock_guard<SpinLock> lock(mu_);
        return slot(handle, what).object;
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
        std::lock_guard<SpinLock> lock(mu_);
        Slot& s = slot(handle, what);
        std::shared_ptr<T> object = std::move(s.object);
        s.gen = (s.gen + 1) & kGenMask;
        free_.push_back(size_t(&s - slots_.data()));
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
    static constexpr int kGenShift = int(sizeof(uintptr_t)) * 4;  // the high half: generation
    static constexpr uintptr_t kGenMask = (uintptr_t(1) << kGenShift) - 1;
    static constexpr uintptr_t kMaxSlots = uintptr_t(1) << (kGenShift - 4);
    struct Slot {
        std::shared_ptr<T> object;  // null while free
        uintptr_t gen = 0;
    };
    // The live slot `handle` names (mu_ held).
    Slot& slot(const void* handle, const char* what) {
        const auto h = reinterpret_cast<uintptr_t>(handle);
        const uintptr_t i = (h & kGenMask) >> 4;
        if ((h & 15) != Tag || i >= slots_.size() || slots_[i].gen != h >> kGenShift ||
            !slots_[i].object)
            throw invalid(handle, what);
        return slots_[i];
    }
    struct Memo {
        const void* handle = nullptr;
        T* object = nullptr;
        uint64_t removals = 0;
    };
    SpinLock mu_;
    std::atomic<uint64_t> removals_{0};
    std::vector<Slot> slots_;
    std::vector<uintptr_t> free_;  // slots to reuse, the last freed first
};

// An output pointer argument must not be NULL.
inline void require_out(const void* p, const char* name) {
    if (!p) throw Error(CCL_ERROR_INVALID_ARGUMENT, std::string(name) + " is NULL");
}

}  // namespace ccl::capi
