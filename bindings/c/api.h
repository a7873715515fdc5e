// Shared by the extern "C" functions: the exception -> ccl_result_t boundary and the registry that
// validates opaque handles.
#pragma once

#include <sched.h>

#include <array>
#include <atomic>
#include <bit>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
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
// adding and removing cost no allocation, and never move (they live in chunks of 64, 128, 256 ...
// slots), so that use() needs no lock.
template <class T, uintptr_t Tag>
class HandleTable {
public:
    HandleTable() = default;
    HandleTable(const HandleTable&) = delete;
    HandleTable& operator=(const HandleTable&) = delete;
    ~HandleTable() {
        for (auto& c : chunks_) delete[] c.load(std::memory_order_relaxed);
    }

    template <class H>
    H add(std::shared_ptr<T> object) {
        std::lock_guard<SpinLock> lock(mu_);
        uintptr_t i;
        if (free_.empty()) {
            i = size_.load(std::memory_order_relaxed);
            if (i >= kMaxSlots) throw Error(CCL_ERROR_OUT_OF_MEMORY, "too many live handles");
            const auto [c, at] = place(i);
            if (at == 0) chunks_[c].store(new Slot[kFirst << c], std::memory_order_release);
            size_.store(i + 1, std::memory_order_release);
        } else {
            i = free_.back();
            free_.pop_back();
        }
        Slot& s = at(i);
        s.live.store(object.get(), std::memory_order_release);
        s.object = std::move(object);
        return reinterpret_cast<H>((s.gen.load(std::memory_order_relaxed) << kGenShift) | (i << 4) |
                                   Tag);
    }
    // A reference to the object, for the holder.
    std::shared_ptr<T> get(const void* handle, const char* what) {
        std::lock_guard<SpinLock> lock(mu_);
        use(handle, what);  // validates it
        return at(index(handle)).object;
    }
    // The object, without a lock or a reference count, for a call that the threading rules let
    // use it meanwhile: only the calling thread may remove it (ccl.h: a communicator, a request is
    // used by one thread at a time). Adds and removes of other slots may run at the same time.
    // This is the path of every call; a locked instruction here would also cost a full fence,
    // which waits for this thread's last store to a line its peer polls (a cross-core round trip).
    T& use(const void* handle, const char* what) const {
        const auto h = reinterpret_cast<uintptr_t>(handle);
        const uintptr_t i = index(handle);
        T* object = nullptr;
        if ((h & 15) == Tag && i < size_.load(std::memory_order_acquire)) {
            const Slot& s = at(i);
            object = s.live.load(std::memory_order_acquire);
            if (s.gen.load(std::memory_order_relaxed) != h >> kGenShift) object = nullptr;
        }
        if (!object) [[unlikely]]
            invalid(handle, what);
        return *object;
    }
    std::shared_ptr<T> remove(const void* handle, const char* what) {
        std::lock_guard<SpinLock> lock(mu_);
        use(handle, what);
        const uintptr_t i = index(handle);
        Slot& s = at(i);
        s.live.store(nullptr, std::memory_order_release);
        s.gen.store((s.gen.load(std::memory_order_relaxed) + 1) & kGenMask,
                    std::memory_order_relaxed);
        free_.push_back(i);
        return std::move(s.object);
    }

private:
    static constexpr int kGenShift = int(sizeof(uintptr_t)) * 4;  // the high half: generation
    static constexpr uintptr_t kGenMask = (uintptr_t(1) << kGenShift) - 1;
    static constexpr uintptr_t kMaxSlots = uintptr_t(1) << (kGenShift - 4);
    static constexpr uintptr_t kFirst = 64;  // slots in chunk 0; chunk c holds kFirst << c
    static constexpr int kChunks = std::bit_width(kMaxSlots / kFirst);
    struct Slot {
        std::atomic<T*> live{nullptr};  // the object, null while free: what use() reads
        std::atomic<uintptr_t> gen{0};  // changed only while free
        std::shared_ptr<T> object;      // mu_ held
    };
    // Out of line, so that use() inlines to a few loads and compares.
    [[noreturn, gnu::cold, gnu::noinline]] static void invalid(const void* handle,
                                                               const char* what) {
        throw Error(
            CCL_ERROR_INVALID_ARGUMENT,
            handle ? std::string(what) + " handle is not valid (destroyed, or not a " + what + ")"
                   : std::string(what) + " handle is NULL");
    }
    static uintptr_t index(const void* handle) {
        return (reinterpret_cast<uintptr_t>(handle) & kGenMask) >> 4;
    }
    // Slot i's chunk and its place there: chunk c starts at slot kFirst * (2^c - 1).
    static std::pair<int, uintptr_t> place(uintptr_t i) {
        const int c = std::bit_width(i / kFirst + 1) - 1;
        return {c, i - kFirst * ((uintptr_t(1) << c) - 1)};
    }
    Slot& at(uintptr_t i) const {  // i < size_
        const auto [c, off] = place(i);
        return chunks_[c].load(std::memory_order_acquire)[off];
    }

    SpinLock mu_;  // adds and removes
    std::array<std::atomic<Slot*>, kChunks> chunks_{};
    std::atomic<uintptr_t> size_{0};  // slots made
    std::vector<uintptr_t> free_;     // slots to reuse, the last freed first (mu_ held)
};

// An output pointer argument must not be NULL.
inline void require_out(const void* p, const char* name) {
    if (!p) throw Error(CCL_ERROR_INVALID_ARGUMENT, std::string(name) + " is NULL");
}

}  // namespace ccl::capi
