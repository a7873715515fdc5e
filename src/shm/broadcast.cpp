#include <algorithm>
#include <cstring>

#include "shm/cma.h"
#include "shm/collectives.h"
#include "shm/copy.h"

namespace ccl::shm {

void broadcast_eager(Arena& arena, Signature sig, void* buf, size_t bytes, int root) {
    arena.begin_round(sig, bytes);
    if (arena.rank() == root) {
        wait_now(arena.buffer_free());
        arena.publish_eager(buf, bytes);
    } else {
        wait_now(arena.eager_ready(root));
        std::memcpy(buf, arena.peer_eager(root), bytes);
        arena.prefetch_next_eager(root);
    }
    arena.done();
}

Task broadcast(Arena& arena, Signature sig, void* buf, size_t bytes, int root) {
    if (bytes > 0 && bytes <= Arena::kEagerBytes) {  // as broadcast_eager
        arena.begin_round(sig, bytes);
        if (arena.rank() == root) {
            co_await arena.buffer_free();
            arena.publish_eager(buf, bytes);
        } else {
            co_await arena.eager_ready(root);
            std::memcpy(buf, arena.peer_eager(root), bytes);
            arena.prefetch_next_eager(root);
        }
        arena.done();
        co_return;
    }
    const size_t chunk = std::min(arena.buffer_size(), cache_piece_bytes());
    const bool stream = bytes >= kStreamMinBytes;
    for (size_t off = 0; off < bytes; off += chunk) {
        size_t len = std::min(chunk, bytes - off);
        arena.begin_round(sig, len);
        if (arena.rank() == root) {
            co_await arena.buffer_free();
            copy_wide(arena.own_buffer(), static_cast<const char*>(buf) + off, len);
            arena.ready();
        } else {
            co_await arena.ready_of(root);
            copy_wide(static_cast<char*>(buf) + off, arena.peer_buffer(root), len, stream);
        }
        arena.done();
    }
}

Task broadcast_cma(Arena& arena, Signature sig, void* buf, size_t bytes, int root) {
    // Both ranks say where their buffer is; then the root writes the second half straight into
    // the other's buffer while the other reads the first half straight from the root's: each
    // core copies half, where through the arena one core copies all of it in and the other all
    // of it out.
    const int me = arena.rank(), peer = 1 - me;
    arena.begin_round(sig);
    co_await arena.buffer_free();
    share_extents(arena, {buf, bytes, buf, bytes});
    co_await arena.all_ready();
    const size_t half = bytes / 2 / 64 * 64;
    if (me == root)
        cma_write(arena.peer_process(peer), peer_recv(arena, peer, half, bytes - half),
                  static_cast<char*>(buf) + half, bytes - half);
    else
        cma_read(arena.peer_process(peer), buf, peer_send(arena, peer, 0, half), half);
    arena.done();
    co_await arena.all_done();  // until then the peer copies from or into this rank's buffer
}

}  // namespace ccl::shm
