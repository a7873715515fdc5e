// A communicator: its ranks, its shared-memory arena, and the entry point of every collective
// (plan -> schedule -> execute).
#pragma once

#include <memory>
#include <optional>
#include <set>
#include <string>

#include "core/config.h"
#include "core/error.h"
#include "core/schedule.h"
#include "shm/arena.h"

namespace ccl {

namespace kvs {
class Client;
}

class Communicator {
public:
    // Collective: every rank of the communicator calls it (in the same order for every
    // communicator created over one KVS). Sets up the arena through the KVS.
    Communicator(int size, int rank, kvs::Client& kvs);
    Communicator(const Communicator&) = delete;
    Communicator& operator=(const Communicator&) = delete;

    int rank() const { return rank_; }
    int size() const { return size_; }
    shm::Arena& arena() { return *arena_; }
    const Config& config() const { return config_; }  // as it was when the communicator was made

    // Runs one collective. After a failure that leaves the ranks out of step (timeout, dead peer,
    // mismatch) the communicator is broken and every later call fails with that error.
    void run(const CollSignature& sig, const Buffers& bufs);

private:
    int size_;
    int rank_;
    Config config_;
    std::optional<shm::Arena> arena_;
    std::optional<Schedule> last_;  // the last call's plan
    std::optional<Error> broken_;
    std::set<std::string> logged_;  // algorithm choices already reported at info
};

}  // namespace ccl
