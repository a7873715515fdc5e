// Threads as owners of handle-table slots (api.h: Entries).
#include "api.h"

#include "core/immortal.h"

namespace ccl::capi {

namespace {

// Owners of threads that are gone, for later threads: never freed, as slots may still name them.
constinit SpinLock pool_mu;
constinit Owner* pool = nullptr;

thread_local Owner* this_thread = nullptr;  // trivial: valid until the thread's very end

// Hands the thread's owner on when the thread ends (a call made after that, from a later
// destructor of the thread, gets a fresh one).
struct HandOn {
    ~HandOn() {
        if (!this_thread) return;
        std::lock_guard<SpinLock> lock(pool_mu);
        this_thread->next_free = pool;
        pool = this_thread;
        this_thread = nullptr;
    }
};
thread_local HandOn hand_on;

}  // namespace

Owner& this_thread_owner() noexcept {
    if (this_thread) [[likely]]
        return *this_thread;
    {
        std::lock_guard<SpinLock> lock(pool_mu);
        if (pool) {
            this_thread = pool;
            pool = pool->next_free;
        }
    }
    if (!this_thread) this_thread = &immortal<Owner>();
    (void)&hand_on;  // constructs it for this thread, so that its destructor runs
    return *this_thread;
}

}  // namespace ccl::capi
