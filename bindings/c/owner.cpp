// Threads as owners of handle-table slots (api.h: Entries).
#include "api.h"

#include "base/immortal.h"

namespace ccl::capi {

constinit thread_local Owner* g_this_thread_owner =
    nullptr;  // trivial: valid until the thread's very end

namespace {

// Owners of threads that are gone, for later threads: never freed, as slots may still name them.
constinit SpinLock pool_mu;
constinit Owner* pool = nullptr;

// Hands the thread's owner on when the thread ends (a call made after that, from a later
// destructor of the thread, gets a fresh one).
struct HandOn {
    ~HandOn() {
        if (!g_this_thread_owner) return;
        std::lock_guard<SpinLock> lock(pool_mu);
        g_this_thread_owner->next_free = pool;
        pool = g_this_thread_owner;
        g_this_thread_owner = nullptr;
    }
};
thread_local HandOn hand_on;

}  // namespace

Owner& adopt_owner() noexcept {
    {
        std::lock_guard<SpinLock> lock(pool_mu);
        if (pool) {
            g_this_thread_owner = pool;
            pool = pool->next_free;
        }
    }
    if (!g_this_thread_owner) g_this_thread_owner = &immortal<Owner>();
    (void)&hand_on;  // constructs it for this thread, so that its destructor runs
    return *g_this_thread_owner;
}

}  // namespace ccl::capi
