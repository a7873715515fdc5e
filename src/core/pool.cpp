#include "core/pool.h"

#include <new>

namespace ccl {

namespace {

// Size classes of 256 bytes up to 4 KiB, eight blocks per class and thread: a nonblocking call
// holds a request, its list, an execution and a frame or two at once.
constexpr size_t kClassBytes = 256, kClasses = 16, kPerClass = 8;

// Trivially destructible and constant-initialized, so that reaching it costs no per-access
// initialization check; a separate thread-local, touched once per thread, frees it at exit.
struct Cache {
    void* slots[kClasses][kPerClass];
    int count[kClasses];
};

enum class CacheState : unsigned char { unused, live, gone };

thread_local Cache cache{};
thread_local CacheState cache_state = CacheState::unused;

struct CacheCleanup {
    ~CacheCleanup() {
        cache_state = CacheState::gone;  // blocks freed after this go straight to the heap
        for (size_t c = 0; c < kClasses; ++c)
            for (int i = 0; i < cache.count[c]; ++i) ::operator delete(cache.slots[c][i]);
    }
    bool armed = false;
    void arm() { armed = true; }
};
thread_local CacheCleanup cleanup;

// Sanitizers check blocks best when every block is its own allocation.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kCache = false;
#else
constexpr bool kCache = true;
#endif

}  // namespace

void* pool_alloc(size_t bytes) {
    const size_t c = (bytes + kClassBytes - 1) / kClassBytes;
    if (kCache && c > 0 && c <= kClasses && cache_state == CacheState::live) {
        int& n = cache.count[c - 1];
        if (n > 0) return cache.slots[c - 1][--n];
    }
    const bool sized = kCache && c > 0 && c <= kClasses;  // may join a cache when freed
    return ::operator new(sized ? c* kClassBytes : bytes);
}

void pool_free(void* p, size_t bytes) {
    const size_t c = (bytes + kClassBytes - 1) / kClassBytes;
    if (kCache && c > 0 && c <= kClasses && cache_state != CacheState::gone) {
        if (cache_state == CacheState::unused) {
            cleanup.arm();  // constructs it, so that it runs at this thread's exit
            cache_state = CacheState::live;
        }
        int& n = cache.count[c - 1];
        if (n < int(kPerClass)) {
            cache.slots[c - 1][n++] = p;
            return;
        }
    }
    ::operator delete(p);
}

}  // namespace ccl
