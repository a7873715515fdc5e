#include <algorithm>
#include <cstring>

#include "shm/collectives.h"

namespace ccl::shm {

Task broadcast(Arena& arena, uint32_t sig, void* buf, size_t bytes, int root) {
    const size_t chunk = arena.buffer_size();
    for (size_t off = 0; off < bytes; off += chunk) {
        size_t len = std::min(chunk, bytes - off);
        arena.begin_round(sig);
        if (arena.rank() == root) {
            co_await arena.buffer_free();
            std::memcpy(arena.own_buffer(), static_cast<const char*>(buf) + off, len);
            arena.ready();
        } else {
            arena.ready();
            co_await arena.ready_of(root);
            std::memcpy(static_cast<char*>(buf) + off, arena.peer_buffer(root), len);
        }
        arena.done();
    }
}

}  // namespace ccl::shm
