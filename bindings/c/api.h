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

#include "base/error.h"
#include "base/wait.h"
#include "ccl/ccl.h"

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

// A per-process random value (getrandom, else the clock and addresses) for handle keys.
uint64_t random_key() noexcept;

// Live objects behind opaque handles, in a table that is never destroyed: it is constant-
// initialized and trivially destructible, so that a call made while the process exits (an atexit
// handler, a static's destructor) still finds it, and the objects it holds, intact.
//
// A handle encodes a slot of the table, the slot's generation (how many objects it held before,
// counted from 1: generation 0 is never valid) and a type tag, mixed with a random per-table key
// by an invertible multiplication. NULL, destroyed (stale), wrong-type and made-up handles are
// all refused: a value decodes to a live object only with its slot's current generation, which
// no small integer, neighbouring value or guess finds but by chance (about 2^-32 a try).
// Slots are reused, so that adding and removing cost no allocation, and never move (they live
// in chunks of 64, 128, 256 ... slots), so that use() and enter() need no lock.
//
// Entries (enter): a call that may not share its object with a concurrent call of another thread
// (ccl.h: a communicator is used by one thread at a time) is inside its slot while it runs; a
// second thread's call finds that and is refused. No locked instruction on the way in or out: one
// would be a full fence, which waits for this thread's last store to a line a peer polls (the
// previous call's publish: a cross-core round trip, 20-50% of a small call). So a slot has an
// owner, the thread that entered it last, which enters with plain stores: it marks itself inside
// (its own Owner word), then checks that it still owns the slot. Another thread takes the slot
// over by storing itself as the owner, a heavy fence (base/wait.h: the owner's light fence is then
// enough), and a look at whether the old owner is inside: this Dekker pair lets at most one of
// them in. Taking over costs a system call, once per change of thread.
// Retiring (a destroy) follows the same pair: with a call inside, the object is left to that call,
// which releases it (Release) once it is out.
// What a table does with an object retired while a call was inside, once the call is out: drops it.
template <class T>
void drop(std::shared_ptr<T>) noexcept {}

// ThreadSanitizer does not see the order the Dekker pairs' fences give (a heavy fence is a system
// call to it): there each entry and leave also exchanges on the slot's `left` word, which gives it
// the same order in its terms, so that it checks everything else. Nothing in other builds.
#if defined(__SANITIZE_THREAD__)
inline void order_for_tsan(std::atomic<uint32_t>& word) {
    word.fetch_add(1, std::memory_order_acq_rel);
}
#else
inline void order_for_tsan(std::atomic<uint32_t>&) {}
#endif

// A thread as the owner of slots (see Entries above): the slots it is inside (several at once
// only in ccl_group_end, one per communicator of the group). Never freed (a slot may name it
// after the thread is gone): a thread's is handed on to a later thread.
struct Owner {
    static constexpr int kCells = 64;
    std::atomic<const void*> inside[kCells] = {};  // the first `used` may be in use
    int used = 0;                                  // the thread's own
    Owner* next_free = nullptr;
    // Whether it is inside `slot` (any thread may ask).
    bool is_inside(const void* slot) const {
        for (int i = 0; i < kCells; ++i)
            if (inside[i].load(std::memory_order_relaxed) == slot) return true;
        return false;
    }
};
// This thread's (made or handed on at its first call).
extern constinit thread_local Owner* g_this_thread_owner;  // constinit: no TLS wrapper
Owner& adopt_owner() noexcept;
inline Owner& this_thread_owner() noexcept {
    Owner* o = g_this_thread_owner;
    return o ? *o : adopt_owner();
}

template <class T, uintptr_t Tag, void (*Release)(std::shared_ptr<T>) noexcept = drop<T>>
class HandleTable {
    struct Slot;

public:
    constexpr HandleTable() = default;
    HandleTable(const HandleTable&) = delete;
    HandleTable& operator=(const HandleTable&) = delete;

    template <class H>
    H add(std::shared_ptr<T> object) {
        std::lock_guard<SpinLock> lock(mu_);
        if (key_.load(std::memory_order_relaxed) == 0)
            // Low bits clear: a tagged value mixed with it is never 0 (NULL).
            key_.store((random_key() | 1) << 4, std::memory_order_relaxed);
        uintptr_t i;
        if (free_ == kNone) {
            i = size_.load(std::memory_order_relaxed);
            if (i >= kMaxSlots) throw Error(CCL_ERROR_OUT_OF_MEMORY, "too many live handles");
            const auto [c, at] = place(i);
            if (at == 0) chunks_[c].store(new Slot[kFirst << c], std::memory_order_release);
            size_.store(i + 1, std::memory_order_release);
        } else {
            i = free_;
            free_ = at(i).next_free;
        }
        Slot& s = at(i);
        s.index = i;
        s.live.store(object.get(), std::memory_order_release);
        s.object = std::move(object);
        return reinterpret_cast<H>(encode(s.gen.load(std::memory_order_relaxed), i));
    }
    // A reference to the object, for the holder.
    std::shared_ptr<T> get(const void* handle, const char* what) {
        std::lock_guard<SpinLock> lock(mu_);
        use(handle, what);  // validates it
        return slot(handle).object;
    }
    // The object, without a lock or a reference count, for a call that the threading rules let
    // use it meanwhile: only the calling thread may remove it (ccl.h: a request is used by one
    // thread at a time). Adds and removes of other slots may run at the same time.
    // This is the path of every call; a locked instruction here would also cost a full fence,
    // which waits for this thread's last store to a line its peer polls (a cross-core round trip).
    T& use(const void* handle, const char* what) const {
        T* object = lookup(handle);
        if (!object) [[unlikely]]
            invalid(handle, what);
        return *object;
    }
    std::shared_ptr<T> remove(const void* handle, const char* what) {
        std::lock_guard<SpinLock> lock(mu_);
        use(handle, what);
        Slot& s = slot(handle);
        invalidate(s);
        free(s);
        return std::move(s.object);
    }

    // A call inside an object: inside its slot from construction to destruction.
    class Entry {
    public:
        // Refused with CCL_ERROR_INVALID_ARGUMENT for a handle that is not valid, and with
        // CCL_ERROR_INVALID_USAGE while another thread's call is inside.
        [[gnu::always_inline]] Entry(HandleTable& table, const void* handle, const char* what)
            : table_(table),
              owner_(this_thread_owner()),
              object_(table.take(handle, what, owner_, slot_, cell_)) {}
        [[gnu::always_inline]] ~Entry() { table_.leave(*slot_, owner_, cell_); }
        Entry(const Entry&) = delete;
        Entry& operator=(const Entry&) = delete;
        T& operator*() const { return *object_; }
        T* operator->() const { return object_; }

    private:
        HandleTable& table_;
        Owner& owner_;
        Slot* slot_ = nullptr;
        int cell_ = 0;  // of owner_'s
        T* object_;
    };
    [[gnu::always_inline]] Entry enter(const void* handle, const char* what) {
        return Entry(*this, handle, what);
    }

    // Removes the handle at once. Returns the object for the caller to release, or null when a
    // call is inside it on another thread: that call releases it (Release) when it leaves.
    std::shared_ptr<T> retire(const void* handle, const char* what) {
        std::lock_guard<SpinLock> lock(mu_);
        use(handle, what);
        Slot& s = slot(handle);
        invalidate(s);  // no call enters it from now on
        s.orphan.store(1, std::memory_order_relaxed);
        heavy_fence();  // the Dekker pair with leave(): see Entries above
        (void)s.left.load(std::memory_order_acquire);
        if (const Owner* o = s.owner.load(std::memory_order_relaxed); o && o->is_inside(&s))
            return nullptr;  // the call inside, or just leaving, takes it (leave)
        // Out already; unless its leave saw the orphan first and took it.
        if (s.orphan.exchange(0, std::memory_order_acq_rel) != 1) return nullptr;
        free(s);
        return std::move(s.object);
    }

private:
    static constexpr int kGenShift = int(sizeof(uintptr_t)) * 4;  // the high half: generation
    static constexpr uintptr_t kGenMask = (uintptr_t(1) << kGenShift) - 1;
    static constexpr uintptr_t kMaxSlots = uintptr_t(1) << (kGenShift - 4);
    static constexpr uintptr_t kFirst = 64;  // slots in chunk 0; chunk c holds kFirst << c
    static constexpr int kChunks = std::bit_width(kMaxSlots / kFirst);
    static constexpr uintptr_t kNone = ~uintptr_t(0);
    // Odd, so invertible modulo 2^bits; kUnmix is its inverse (Newton's iteration).
    static constexpr uintptr_t kMix = uintptr_t(0x9e3779b97f4a7c15ull);
    static constexpr uintptr_t kUnmix = [] {
        uintptr_t x = kMix;
        for (int i = 0; i < 6; ++i) x *= 2 - kMix * x;
        return x;
    }();
    static_assert(kMix * kUnmix == 1);
    // One cache line each, so that calls on different objects from different threads do not
    // contend for one line.
    struct alignas(64) Slot {
        std::atomic<T*> live{nullptr};       // the object, null while free: what use() reads
        std::atomic<uintptr_t> gen{1};       // changed only while free (or retired), never 0
        std::atomic<Owner*> owner{nullptr};  // enters with plain stores (Entries above)
        std::atomic<uint32_t> orphan{0};     // 1: retired with a call inside, not yet released
        // Stored (release) by every leave, loaded (acquire) by whoever takes the slot over or
        // retires it: what the last call inside did happens before what they do, in the memory
        // model's terms too (the heavy fence orders it on the machine, not for the sanitizers).
        std::atomic<uint32_t> left{0};
        SpinLock taking;              // changes of owner
        uintptr_t index = 0;          // its own
        uintptr_t next_free = kNone;  // mu_ held
        std::shared_ptr<T> object;    // mu_ held
    };

    uintptr_t encode(uintptr_t gen, uintptr_t i) const {
        return ((gen << kGenShift | i << 4 | Tag) ^ key_.load(std::memory_order_relaxed)) * kMix;
    }
    uintptr_t decode(const void* handle) const {
        return (reinterpret_cast<uintptr_t>(handle) * kUnmix) ^
               key_.load(std::memory_order_relaxed);
    }
    // The slot a handle's value names if its tag and index are right, or null.
    Slot* slot_of(uintptr_t raw) const {
        const uintptr_t i = (raw & kGenMask) >> 4;
        return (raw & 15) == Tag && i < size_.load(std::memory_order_acquire) ? &at(i) : nullptr;
    }
    // The object a handle names, or null. The object first: a slot's next object is stored after
    // its generation changed.
    T* lookup(const void* handle) const {
        const uintptr_t raw = decode(handle);
        const Slot* s = slot_of(raw);
        if (!s) return nullptr;
        T* object = s->live.load(std::memory_order_acquire);
        return s->gen.load(std::memory_order_relaxed) == raw >> kGenShift ? object : nullptr;
    }
    Slot& slot(const void* handle) { return at((decode(handle) & kGenMask) >> 4); }  // valid

    // Enters a valid handle's slot as `me` (in `me`'s cell `cell`); returns its object.
    [[gnu::always_inline]] T* take(const void* handle, const char* what, Owner& me, Slot*& slot,
                                   int& cell) {
        const uintptr_t raw = decode(handle);
        slot = slot_of(raw);
        if (!slot || slot->gen.load(std::memory_order_relaxed) != raw >> kGenShift) [[unlikely]]
            invalid(handle, what);
        if (me.used == Owner::kCells) [[unlikely]]
            too_many(what);
        cell = me.used++;
        me.inside[cell].store(slot, std::memory_order_relaxed);
        light_fence();  // the Dekker pair with take_over() and retire()
        if (slot->owner.load(std::memory_order_relaxed) != &me) [[unlikely]]
            take_over(*slot, me, cell, what);
        order_for_tsan(slot->left);
        // Only now is the answer sure: retired before, the slot has another generation (or no
        // object). Then out again, by a leave that releases the object of a newer handle of the
        // slot if that was retired meanwhile.
        T* object = slot->live.load(std::memory_order_acquire);
        if (!object || slot->gen.load(std::memory_order_relaxed) != raw >> kGenShift) [[unlikely]] {
            leave(*slot, me, cell);
            invalid(handle, what);
        }
        return object;
    }
    // Another thread owns the slot (or nobody yet): become its owner, unless that thread is inside.
    [[gnu::cold, gnu::noinline]] void take_over(Slot& s, Owner& me, int cell, const char* what) {
        std::lock_guard<SpinLock> lock(s.taking);
        Owner* last = s.owner.load(std::memory_order_relaxed);
        s.owner.store(&me, std::memory_order_relaxed);
        heavy_fence();  // `last`'s cells are seen now, and it sees that it owns no more
        (void)s.left.load(std::memory_order_acquire);
        if (last && last != &me && last->is_inside(&s)) {
            s.owner.store(last, std::memory_order_relaxed);
            out_of(me, cell);
            busy(what);
        }
    }
    [[gnu::always_inline]] void leave(Slot& s, Owner& me, int cell) noexcept {
        order_for_tsan(s.left);
        s.left.store(1, std::memory_order_release);
        out_of(me, cell);
        light_fence();  // the Dekker pair with retire()
        if (s.orphan.load(std::memory_order_relaxed)) [[unlikely]]
            orphaned(s);
    }
    // Frees `me`'s cell; cells in use stay below `used` (a group's entries may leave in any order).
    static void out_of(Owner& me, int cell) noexcept {
        me.inside[cell].store(nullptr, std::memory_order_release);
        if (cell + 1 != me.used) return;  // a group's, left before a later one
        do --me.used;
        while (me.used > 0 && !me.inside[me.used - 1].load(std::memory_order_relaxed));
    }
    [[gnu::cold, gnu::noinline]] void orphaned(Slot& s) noexcept {
        if (s.orphan.exchange(0, std::memory_order_acq_rel) != 1) return;  // retire took it
        std::shared_ptr<T> object;
        {
            std::lock_guard<SpinLock> lock(mu_);
            free(s);
            object = std::move(s.object);
        }
        Release(std::move(object));
    }
    // Makes every handle of the slot invalid (mu_ held).
    void invalidate(Slot& s) {
        s.live.store(nullptr, std::memory_order_release);
        uintptr_t gen = (s.gen.load(std::memory_order_relaxed) + 1) & kGenMask;
        s.gen.store(gen ? gen : 1, std::memory_order_release);
    }
    void free(Slot& s) {  // mu_ held
        s.next_free = free_;
        free_ = s.index;
    }
    // Out of line, so that use() inlines to a few loads and compares.
    [[noreturn, gnu::cold, gnu::noinline]] static void invalid(const void* handle,
                                                               const char* what) {
        throw Error(
            CCL_ERROR_INVALID_ARGUMENT,
            handle ? std::string(what) + " handle is not valid (destroyed, or not a " + what + ")"
                   : std::string(what) + " handle is NULL");
    }
    [[noreturn, gnu::cold, gnu::noinline]] static void too_many(const char* what) {
        throw Error(CCL_ERROR_INVALID_USAGE, "a group spans more than " +
                                                 std::to_string(Owner::kCells) + " " + what +
                                                 "s; end it on fewer");
    }
    [[noreturn, gnu::cold, gnu::noinline]] static void busy(const char* what) {
        throw Error(CCL_ERROR_INVALID_USAGE,
                    std::string("another thread is inside a call on this ") + what + ": a " + what +
                        " is used by one thread at a time (ccl.h)");
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
    std::atomic<uintptr_t> key_{0};   // drawn at the first add
    uintptr_t free_ = kNone;          // slots to reuse, the last freed first (mu_ held)
};

// An output pointer argument must not be NULL.
inline void require_out(const void* p, const char* name) {
    if (!p) throw Error(CCL_ERROR_INVALID_ARGUMENT, std::string(name) + " is NULL");
}

}  // namespace ccl::capi
