#include "shm/collectives.h"

namespace ccl::shm {

void barrier_now(Arena& arena, Signature sig) {
    arena.begin_round(sig, 0);
    arena.ready();
    wait_now(arena.all_ready());
    arena.done();
}

Task barrier(Arena& arena, Signature sig) {
    arena.begin_round(sig, 0);  // a lane round: no data, and no "done" to publish
    arena.ready();
    co_await arena.all_ready();
    arena.done();
}

}  // namespace ccl::shm
