// Small blocks from a per-thread cache, for what every call makes and drops: coroutine frames,
// requests, executions. malloc/free were a sixth of a small collective's instructions.
#pragma once

#include <cstddef>
#include <memory>

namespace ccl {

// Blocks up to 4 KiB come from (and go back to) the calling thread's cache, a few per size class;
// larger ones, and every block in sanitizer builds, from the heap. A block may be freed on
// another thread than the one that made it (a worker finishing a caller's call): it joins the
// freeing thread's cache.
void* pool_alloc(size_t bytes);
void pool_free(void* p, size_t bytes);

// The pool as a standard allocator, for std::allocate_shared and containers.
template <class T>
struct PoolAllocator {
    using value_type = T;
    PoolAllocator() = default;
    template <class U>
    PoolAllocator(const PoolAllocator<U>&) {}
    T* allocate(size_t n) { return static_cast<T*>(pool_alloc(n * sizeof(T))); }
    void deallocate(T* p, size_t n) { pool_free(p, n * sizeof(T)); }
    template <class U>
    bool operator==(const PoolAllocator<U>&) const {
        return true;
    }
};

// std::make_shared from the pool (object and reference counts in one block).
template <class T, class... Args>
std::shared_ptr<T> make_pooled(Args&&... args) {
    return std::allocate_shared<T>(PoolAllocator<T>(), std::forward<Args>(args)...);
}

}  // namespace ccl
