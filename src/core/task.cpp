#include "core/task.h"

#include <new>

namespace ccl {

namespace {

// Frames by size class (multiples of 256 bytes up to 4 KiB), a few per class and thread. A frame
// freed on another thread than the one that made it (a worker finishing a caller's task) joins
// the freeing thread's cache.
constexpr size_t kClassBytes = 256, kClasses = 16, kPerClass = 4;

struct FrameCache {
    void* slots[kClasses][kPerClass] = {};
    int count[kClasses] = {};
    ~FrameCache();
};

thread_local FrameCache cache;
thread_local bool cache_gone = false;  // trivially destructible: readable after ~FrameCache

FrameCache::~FrameCache() {
    cache_gone = true;
    for (size_t c = 0; c < kClasses; ++c)
        for (int i = 0; i < count[c]; ++i) ::operator delete(slots[c][i]);
}

// Sanitizers check frames best when every frame is its own allocation.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kCache = false;
#else
constexpr bool kCache = true;
#endif

}  // namespace

void* frame_alloc(size_t bytes) {
    const size_t c = (bytes + kClassBytes - 1) / kClassBytes;
    if (!kCache || c == 0 || c > kClasses || cache_gone) return ::operator new(bytes);
    int& n = cache.count[c - 1];
    if (n > 0) return cache.slots[c - 1][--n];
    return ::operator new(c* kClassBytes);
}

void frame_free(void* p, size_t bytes) {
    const size_t c = (bytes + kClassBytes - 1) / kClassBytes;
    if (kCache && c > 0 && c <= kClasses && !cache_gone) {
        int& n = cache.count[c - 1];
        if (n < int(kPerClass)) {
            cache.slots[c - 1][n++] = p;
            return;
        }
    }
    ::operator delete(p);
}

}  // namespace ccl
