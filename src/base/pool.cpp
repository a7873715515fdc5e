#include "base/pool.h"

#include <new>

namespace ccl {

namespace {

// Size classes of 256 bytes up to 4 KiB, eight blocks per class and thread: a nonblocking call
// holds a request, its list, an execution and a frame or two at once.
constexpr size_t kClassBytes = 256, kClasses = 16, kPerClass = 8;

enum class CacheState : unsigned char { unused, live, gone };

// Trivially destructible and constant-initialized, so that reaching it costs no per-access
// initialization check (and one thread-local lookup: the state lives inside); a separate
// thread-local, touched once per thread, frees it at exit.
struct Cache {
    void* slots[kClasses][kPerClass];
    int count[kClasses];
    CacheState state;
};

thread_local Cache cache{};

struct CacheCleanup {
    ~CacheCleanup() {
        cache.state = CacheState::gone;  // blocks freed after this go straight to the heap
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

namespace {
// The size class of a block (1 .. kClasses) that a cache may hold, or 0: served by the heap.
size_t pooled_class(size_t bytes) {
    const size_t c = (bytes + kClassBytes - 1) / kClassBytes;
    return kCache && c <= kClasses ? c : 0;
}
}  // namespace

void* pool_alloc(size_t bytes) {
    const size_t c = pooled_class(bytes);
    if (c == 0) return ::operator new(bytes);
    Cache& k = cache;
    if (k.state == CacheState::live && k.count[c - 1] > 0) return k.slots[c - 1][--k.count[c - 1]];
    return ::operator new(c* kClassBytes);  // its class's size: it may join a cache when freed
}

void pool_free(void* p, size_t bytes) {
    if (const size_t c = pooled_class(bytes)) {
        Cache& k = cache;
        if (k.state == CacheState::unused) {
            cleanup.arm();  // constructs it, so that it runs at this thread's exit
            k.state = CacheState::live;
        }
        if (k.state == CacheState::live && k.count[c - 1] < int(kPerClass)) {
            k.slots[c - 1][k.count[c - 1]++] = p;
            return;
        }
    }
    ::operator delete(p);
}

}  // namespace ccl
