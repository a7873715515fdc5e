#include "shm/collectives.h"

namespace ccl::shm {

Task barrier(Arena& arena, uint32_t sig) {
    arena.begin_round(sig);
    arena.ready();
    co_await arena.all_ready();
    arena.done();
}

}  // namespace ccl::shm
